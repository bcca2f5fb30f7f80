"""Raw memory (pi-echo): every message of a session as line-numbered source text. Pure.

pbot's exchanges keep only what the user asked and the final answer. When the question is
"what did that test run print?" the evidence is elsewhere: in tool calls and their results,
bash executions, thinking, custom messages and compaction summaries. Here each of those
becomes a *source*: a short one-line label, and lines of text (1-based line numbers) split
into titled sections, e.g. a tool source has a ``call`` section and a ``result`` section.

A source is anchored at one entry: it is visible from a leaf exactly when that entry is on
the path from the leaf to the root. A tool call's source is anchored at its *result* entry
(which descends from the call), so a call and its result are delivered together, and a result
recorded on an abandoned branch is never visible from another leaf. Images never enter the
text (a line says an image was there); long outputs stay whole, recall pages them by lines.

Every text is redacted where it is taken from its entry (``scrub``), before labels, lines or
sections are made of it: the index, recall, cues and the tools only ever see redacted text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from pbot_watch.history.jstext import js_string
from pbot_watch.pi.branch import current_leaf, walk_to_root
from pbot_watch.redact.policy import scrub
from pbot_watch.shorten import shorten

LABEL_CHARS = 90
ARGS_CHARS = 60
IMAGE_LINE = "[image omitted]"
ARGUMENT_KEYS = ("command", "path", "file_path", "pattern", "query", "url")
"""The argument that says what a tool call did, in order of preference (labels and cues show it)."""
OWN_TOOLS = frozenset({"history_search", "history_read", "search_memory", "recall_memory"})
"""pbot-watch's tools (pi-echo names its two the same). Their calls and results are the model
looking at memory, not work: they are no cue, and no source memory search returns, or a search
for a word would find the previous searches for it first, and even its own call."""


def own_tool(name: object) -> bool:
    """A call of one of ``OWN_TOOLS``: native, or over MCP (``mcp__pbot_watch__search_memory``)."""
    if not isinstance(name, str):
        return False
    return name in OWN_TOOLS or (name.startswith("mcp__") and name.rsplit("__", 1)[-1] in OWN_TOOLS)


@dataclass(frozen=True)
class Section:
    title: str
    first: int
    last: int


@dataclass
class Source:
    """One searchable, recallable unit of raw memory."""

    entry_id: str
    seq: int
    part: int
    kind: str
    timestamp: str
    label: str
    lines: list[str]
    sections: list[Section]
    unanswered: str | None = None
    """For a tool call delivered without a result (none seen yet), the call's id: a result that
    arrives later takes the call along, and this source goes (``MemoryFeed``)."""
    derived: bool = False
    """The label is ``index.derived_label`` of the kind and the text by construction (made from
    the text of its one section, titled by the kind): ``index.stored_label`` need not derive it
    again to find it so (hundreds of thousands of sources on a first run)."""


@dataclass
class EntryLink:
    seq: int
    entry_id: str
    parent_id: str | None
    kept: str | None = None
    """For a compaction entry, its ``firstKeptEntryId`` ("" when it has none); else ``None``."""


@dataclass
class SessionMemory:
    """A session file's raw memory: its entry tree (ids and parents) and its sources."""

    links: list[EntryLink] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)


class _Builder:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.sections: list[Section] = []

    def section(self, title: str, text: str) -> None:
        body = text.split("\n")
        # A trailing newline (most command output) does not make an empty last line.
        if len(body) > 1 and body[-1] == "":
            body.pop()
        first = len(self.lines) + 1
        self.lines.extend(body)
        self.sections.append(Section(title, first, len(self.lines)))


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict)]


def source_text(content: Any) -> str:
    """A message's text as raw memory's sources show it: pi-echo's reading, redacted here.

    ``unredacted_text`` is the same reading before redaction, for a caller that shows only a
    few lines of it and redacts those (``cue_text.scrub_shown``).

    Text blocks joined by newlines (a string is one block; a block without text gives
    nothing), an image as one ``[image omitted]`` line, never its data: sources are lines a
    model pages through (pi-echo's README). Records read the same content by personal-bot's
    ``text()`` instead (``history.exchanges.pbot_text``: ``undefined``, ``[图片]``), so their
    text stays pbot's; the two differ on purpose and must not be merged.
    """
    return scrub(unredacted_text(content))


def unredacted_text(content: Any) -> str:
    """``source_text`` before redaction: what a secret in it is looked for in."""
    parts: list[str] = []
    for block in _blocks(content):
        kind = block.get("type")
        if kind == "text":
            parts.append(js_string(block.get("text")) if "text" in block else "")
        elif kind == "image":
            parts.append(IMAGE_LINE)
    return "\n".join(parts)


def _short(text: str, limit: int = LABEL_CHARS) -> str:
    """The text on one line, whitespace collapsed, cut to ``limit`` characters with an ellipsis."""
    return shorten(text, limit, flatten=True)


# What ``str.splitlines`` ends a line at (``\r\n`` is one end).
_LINE_END = re.compile("\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


_SPLIT_CHARS = 1 << 20
"""Texts up to this long have their lines counted by making them: ``splitlines`` is in C, several
times faster than the regex, and a megabyte's lines are a few megabytes for a moment."""


def _line_count(text: str) -> int:
    """``len(text.splitlines())``, without making the lines of a long text (tool output can be huge)."""
    if len(text) <= _SPLIT_CHARS:
        return len(text.splitlines())
    unended = bool(text) and _LINE_END.fullmatch(text[-1]) is None
    return len(_LINE_END.findall(text)) + unended


def _args(arguments: Any) -> str:
    if isinstance(arguments, dict):
        for key in ARGUMENT_KEYS:
            if isinstance(arguments.get(key), str):
                return _short(scrub(arguments[key]), ARGS_CHARS)
    if arguments is None:
        return ""
    return _short(scrub(json.dumps(arguments, ensure_ascii=False)), ARGS_CHARS)


def _call_text(call: dict[str, Any]) -> str:
    name = call.get("name") if isinstance(call.get("name"), str) else "tool"
    arguments = call.get("arguments")
    if isinstance(arguments, dict) and isinstance(arguments.get("command"), str) and len(arguments) == 1:
        return scrub(f"{name}: {arguments['command']}")
    return scrub(f"{name} {json.dumps(arguments, ensure_ascii=False)}")


def _shown_call(call_text: str) -> tuple[str, str]:
    """The tool's name and what a label shows of its arguments, read back from ``_call_text``."""
    colon = call_text.find(": ")
    if colon >= 0 and call_text.find(" ") == colon + 1:
        name, _sep, command = call_text.partition(": ")
        return name, _short(command, ARGS_CHARS)
    name, _sep, rest = call_text.partition(" ")
    try:
        arguments = json.loads(rest)
    except (ValueError, RecursionError):
        return name, ""
    return name, _args(arguments)


def tool_label(text: str, sections: list[tuple[str, int, int]], name: str | None) -> str:
    """The label a tool source's text and sections give: its call's name and arguments from its
    ``call`` section, else ``name`` (a result whose call was not seen), and its result's first
    line and line count. ``index.py`` keeps a source's label only when this is not it.
    """
    lines = text.split("\n")

    def body(first: int, last: int) -> str:
        return "\n".join(lines[first - 1 : last])

    call = [(first, last) for title, first, last in sections if title == "call"]
    shown: tuple[str | None, str] = _shown_call(body(*call[0])) if call else (name, "")
    if len(sections) == 1 and call:
        return f"toolCall {shown[0]}({shown[1]}) → no result"
    if not sections or sections[-1][0] not in ("result", "error") or shown[0] is None:
        return ""
    title, first, last = sections[-1]
    result = body(first, last)
    mark = "✗" if title == "error" else "→"
    head = _short(result.split("\n", 1)[0], 50) if result else "(empty)"
    return f"toolResult {shown[0]}({shown[1]}) {mark} {head} [{_count(_line_count(result) or 1)}]"


def _stamp(entry: dict[str, Any]) -> str:
    value = entry.get("timestamp")
    return value if isinstance(value, str) else ""


def _source(entry: dict[str, Any], seq: int, part: int, kind: str, label: str, builder: _Builder) -> Source:
    return Source(
        entry_id=entry["id"],
        seq=seq,
        part=part,
        kind=kind,
        timestamp=_stamp(entry),
        label=label,
        lines=builder.lines,
        sections=builder.sections,
    )


def _text_source(entry: dict[str, Any], seq: int, part: int, kind: str, text: str, title: str = "") -> Source:
    """A source of one section holding ``text``, labelled by its kind and text (``derived``).

    The section holds ``text`` without one trailing newline, which a flattened label never
    shows: the label is the one ``index.derived_label`` gives the stored text.
    """
    b = _Builder()
    b.section(title or kind, text)
    source = _source(entry, seq, part, kind, f"{kind} {_short(text)}", b)
    source.derived = True
    return source


def _count(n: int) -> str:
    return f"{n} line" if n == 1 else f"{n} lines"


def session_memory(entries: list[dict[str, Any]]) -> SessionMemory:
    """Sources and entry links of one session file's entries (as ``SessionReader`` yields them)."""
    feed = MemoryFeed().feed(entries)
    return SessionMemory(feed.links, feed.sources)


def _result_call_id(entry: dict[str, Any]) -> str | None:
    """The ``toolCallId`` of a tool result entry, else ``None``."""
    message = entry.get("message")
    if entry.get("type") == "message" and isinstance(message, dict) and message.get("role") == "toolResult":
        call_id = message.get("toolCallId")
        return call_id if isinstance(call_id, str) else None
    return None


def call_ids(entries: list[dict[str, Any]]) -> set[str]:
    """Every tool call id these entries mention: in calls (assistant blocks) or in results."""
    out: set[str] = set()
    for entry in entries:
        result = _result_call_id(entry)
        if result is not None:
            out.add(result)
        message = entry.get("message")
        if isinstance(message, dict) and message.get("role") == "assistant":
            for block in _blocks(message.get("content")):
                if block.get("type") == "toolCall" and isinstance(block.get("id"), str):
                    out.add(block["id"])
    return out


@dataclass
class FeedResult:
    """What one ``MemoryFeed.feed`` call adds, and which earlier sources it makes obsolete."""

    links: list[EntryLink]
    sources: list[Source]
    answered_now: set[str]
    """Calls whose first result came with these entries: their earlier "no result" sources go."""


@dataclass
class MemoryFeed:
    """Raw memory of one session file, extracted as its entries arrive: whole or in pieces.

    A tool result is delivered with its call, which was written earlier, maybe in bytes read
    long before; and a call is delivered alone ("no result") only while no result answers it.
    So the state carried from one piece to the next is the entry count (``seq``), the calls
    seen (``calls``) and the calls answered (``answered``). A caller that keeps this state
    elsewhere (the index keeps it in SQLite) may load only the calls the next entries mention
    (``call_ids``): nothing else is consulted. Feeding a file in any pieces gives the sources of
    feeding it whole, once each ``answered_now`` call's unanswered source is dropped.
    """

    seq: int = 0
    calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    answered: set[str] = field(default_factory=set)

    def feed(self, entries: list[dict[str, Any]]) -> FeedResult:
        # A call answered later in the same piece is delivered with its result only.
        results = {call_id for entry in entries if (call_id := _result_call_id(entry)) is not None}
        answered_now = results - self.answered
        self.answered |= results
        out = FeedResult([], [], answered_now)
        for seq, entry in enumerate(entries, self.seq):
            entry_id = entry.get("id")
            if not isinstance(entry_id, str):
                continue
            parent = entry.get("parentId")
            kept = None
            if entry.get("type") == "compaction":
                kept = entry.get("firstKeptEntryId") if isinstance(entry.get("firstKeptEntryId"), str) else ""
            out.links.append(EntryLink(seq, entry_id, parent if isinstance(parent, str) else None, kept))
            out.sources.extend(_entry_sources(entry, seq, self.calls, self.answered))
        self.seq += len(entries)
        return out


def _entry_sources(
    entry: dict[str, Any], seq: int, calls: dict[str, dict[str, Any]], answered: set[str]
) -> list[Source]:
    kind = entry.get("type")
    sources: list[Source] = []
    if kind == "message" and isinstance(entry.get("message"), dict):
        message = entry["message"]
        role = message.get("role")
        content = message.get("content")
        if role == "user":
            text = source_text(content)
            if text:
                sources.append(_text_source(entry, seq, 0, "user", text))
        elif role == "assistant":
            blocks = _blocks(content)
            thinking = scrub(
                "\n".join(js_string(b.get("thinking")) for b in blocks if b.get("type") == "thinking")
            )
            text = scrub("\n".join(js_string(b.get("text")) for b in blocks if b.get("type") == "text"))
            if thinking.strip():
                sources.append(_text_source(entry, seq, 0, "thinking", thinking))
            if text.strip():
                sources.append(_text_source(entry, seq, 1, "assistant", text))
            for i, block in enumerate(b for b in blocks if b.get("type") == "toolCall"):
                call_id = block.get("id")
                if isinstance(call_id, str):
                    calls[call_id] = block
                if isinstance(call_id, str) and call_id in answered:
                    continue  # delivered with its result
                if own_tool(block.get("name")):
                    continue  # the model looking at memory (and the search in flight): no source
                b = _Builder()
                b.section("call", _call_text(block))
                name = block.get("name") if isinstance(block.get("name"), str) else "tool"
                label = f"toolCall {name}({_args(block.get('arguments'))}) → no result"
                source = _source(entry, seq, 2 + i, "tool", label, b)
                source.unanswered = call_id if isinstance(call_id, str) else None
                sources.append(source)
        elif role == "toolResult":
            call_id = message.get("toolCallId")
            call = calls.get(call_id) if isinstance(call_id, str) else None
            name = message.get("toolName") if isinstance(message.get("toolName"), str) else "tool"
            if own_tool(name) or (call is not None and own_tool(call.get("name"))):
                return sources  # what memory search or recall returned is memory already
            result = source_text(content)
            b = _Builder()
            if call is not None:
                b.section("call", _call_text(call))
            b.section("error" if message.get("isError") else "result", result)
            mark = "✗" if message.get("isError") else "→"
            first = _short(result.split("\n", 1)[0], 50) if result else "(empty)"
            args = _args(call.get("arguments")) if call is not None else ""
            label = f"toolResult {name}({args}) {mark} {first} [{_count(_line_count(result) or 1)}]"
            sources.append(_source(entry, seq, 0, "tool", label, b))
        elif role == "bashExecution":
            command = scrub(message["command"]) if isinstance(message.get("command"), str) else ""
            output = scrub(message["output"]) if isinstance(message.get("output"), str) else ""
            b = _Builder()
            b.section("command", f"$ {command}")
            code = message.get("exitCode")
            b.section(
                "output", output + ("" if output.endswith("\n") or not output else "\n") + f"[exit {code}]"
            )
            mark = "✗" if code not in (0, None) else "→"
            sources.append(
                _source(entry, seq, 0, "bash", f"bash({_short(command, ARGS_CHARS)}) {mark} exit {code}", b)
            )
        elif role in ("custom", "hookMessage"):
            text = source_text(content)
            if text:
                sources.append(
                    _text_source(entry, seq, 0, "custom", text, str(message.get("customType") or ""))
                )
    elif kind == "custom_message":
        text = source_text(entry.get("content"))
        if text:
            sources.append(_text_source(entry, seq, 0, "custom", text, str(entry.get("customType") or "")))
    elif kind == "compaction":
        # Always a source, even without a summary: a compaction source's row id is what lets a
        # memory-search cursor ignore compactions written after its first page (query.py).
        summary = scrub(entry["summary"]) if isinstance(entry.get("summary"), str) else ""
        b = _Builder()
        b.section(kind, summary)
        sources.append(_source(entry, seq, 0, kind, f"{kind} {_short(summary) or '(no summary)'}", b))
    elif kind == "branch_summary":
        told = scrub(entry["summary"]) if isinstance(entry.get("summary"), str) else None
        if told:
            sources.append(_text_source(entry, seq, 0, kind, told))
    return sources


def path_to_root(links: list[EntryLink], leaf: str) -> list[str]:
    """Entry ids from ``leaf`` up to the root (``pi/branch.walk_to_root``, Pi's ``getBranch``)."""
    path, _cut = walk_to_root(leaf, {link.entry_id: link for link in links}, _parent_id)
    return [link.entry_id for link in path]


def _parent_id(link: EntryLink) -> str | None:
    return link.parent_id


def current_leaf_id(links: list[EntryLink]) -> str | None:
    """The current leaf of raw memory's tree (``pi/branch.current_leaf`` over its entries with an id)."""
    return current_leaf(links, _entry_id)


def _entry_id(link: EntryLink) -> str | None:
    return link.entry_id
