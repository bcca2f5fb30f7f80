"""Build Pi session files in tests: the entry shapes Pi 1.6.0 writes, with full control of links.

``SessionBuilder`` appends entries as Pi does (each one a child of the current leaf unless a
``parent`` is given) and renders them as Pi's JSONL: compact ``JSON.stringify`` lines, raw
non-ASCII. The hypothesis strategy ``session_files`` draws whole trees from it: branches,
several roots, orphans, duplicate ids, every stop reason, images and non-message tips.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

EPOCH = datetime(2026, 11, 29, 20, 0, 0, tzinfo=UTC)
AUTO: Any = object()
MISSING: Any = object()


def iso(ms: int) -> str:
    moment = EPOCH + timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def jsonl(entries: list[dict[str, Any]]) -> bytes:
    return b"".join(
        (json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8") for e in entries
    )


@dataclass
class SessionBuilder:
    """Appends entries like Pi's SessionManager; ``leaf`` is the parent of the next entry."""

    session_id: str = "01a228f5-0000-7000-8000-000000000001"
    cwd: str = "/nonexistent/workspace"
    version: int | None = 3
    entries: list[dict[str, Any]] = field(default_factory=list)
    leaf: str | None = None
    clock: int = 0
    counter: int = 0

    def header(self) -> dict[str, Any]:
        head: dict[str, Any] = {"type": "session"}
        if self.version is not None:
            head["version"] = self.version
        head.update(id=self.session_id, timestamp=iso(0), cwd=self.cwd)
        return head

    def new_id(self) -> str:
        self.counter += 1
        return f"{self.counter:08x}"

    def add(
        self,
        kind: str,
        *,
        parent: Any = AUTO,
        id: Any = AUTO,  # noqa: A002 - Pi's field name
        timestamp: Any = AUTO,
        **fields: Any,
    ) -> str:
        entry_id = self.new_id() if id is AUTO else id
        self.clock += 1000
        entry: dict[str, Any] = {"type": kind}
        if entry_id is not MISSING:
            entry["id"] = entry_id
        parent_id = self.leaf if parent is AUTO else parent
        if parent_id is not MISSING:
            entry["parentId"] = parent_id
        if timestamp is AUTO:
            entry["timestamp"] = iso(self.clock)
        elif timestamp is not MISSING:
            entry["timestamp"] = timestamp
        entry.update(fields)
        self.entries.append(entry)
        self.leaf = entry_id if isinstance(entry_id, str) else None
        return entry_id if isinstance(entry_id, str) else ""

    def message(self, message: dict[str, Any], **kw: Any) -> str:
        message.setdefault("timestamp", 1795980000000 + self.clock)
        return self.add("message", message=message, **kw)

    def user(self, text: str | list[dict[str, Any]], **kw: Any) -> str:
        content = [{"type": "text", "text": text}] if isinstance(text, str) else text
        return self.message({"role": "user", "content": content}, **kw)

    def assistant(
        self,
        text: str | None = "ok",
        stop: str = "stop",
        *,
        tool: bool = False,
        thinking: str | None = None,
        **kw: Any,
    ) -> str:
        content: list[dict[str, Any]] = []
        if thinking is not None:
            content.append({"type": "thinking", "thinking": thinking})
        if text is not None:
            content.append({"type": "text", "text": text})
        if tool:
            content.append(
                {
                    "type": "toolCall",
                    "id": f"call_{self.counter}",
                    "name": "bash",
                    "arguments": {"command": "ls"},
                }
            )
        message = {
            "role": "assistant",
            "content": content,
            "api": "openai-completions",
            "provider": "fake",
            "model": "fake-1",
            "stopReason": stop,
        }
        if stop in ("error", "aborted"):
            message["errorMessage"] = "Request was aborted" if stop == "aborted" else "503 overloaded"
        return self.message(message, **kw)

    def tool_result(self, output: str = "done", **kw: Any) -> str:
        return self.message(
            {
                "role": "toolResult",
                "toolCallId": f"call_{self.counter}",
                "toolName": "bash",
                "content": [{"type": "text", "text": output}],
                "isError": False,
            },
            **kw,
        )

    def turn(self, question: str, answer: str = "ok") -> tuple[str, str]:
        return self.user(question), self.assistant(answer)

    def info(self, name: str | None, **kw: Any) -> str:
        return self.add("session_info", **({"name": name} if name is not None else {}), **kw)

    def label(self, target: str, label: str | None = "mark", **kw: Any) -> str:
        return self.add("label", targetId=target, **({"label": label} if label is not None else {}), **kw)

    def custom(self, **kw: Any) -> str:
        return self.add("custom", customType="test-state", data={"n": 1}, **kw)

    def lines(self) -> list[dict[str, Any]]:
        return [self.header(), *self.entries]

    def bytes(self) -> bytes:
        return jsonl(self.lines())


# ---- hypothesis: whole session trees ---------------------------------------------------

KINDS = (
    "user",
    "user",
    "user",
    "stop",
    "stop",
    "stop",
    "tool",
    "length",
    "aborted",
    "error",
    "toolResult",
    "info",
    "label",
    "custom",
    "custom_message",
    "image",
    "no_text",
    "thinking",
)
TEXTS = st.text(
    alphabet=st.sampled_from([*list("ab c\n\t"), "é", "中", "文", "😀", "\u2028", "\u3000", "\xa0", "Z"]),
    min_size=0,
    max_size=12,
)


ODD_TEXT_VALUES: tuple[Any, ...] = (
    5,
    1.5,
    1e21,
    1e-7,
    -0.0,
    2**60,
    None,
    True,
    [1, None, "a", [2, 3]],
    {"a": 1},
    "",
)
ODD_LINKS: tuple[Any, ...] = (MISSING, "", None)


@st.composite
def session_builders(
    draw: st.DrawFn,
    *,
    max_entries: int = 40,
    orphans: bool = True,
    duplicates: bool = True,
    odd: bool = False,
    untimed: bool = False,
) -> SessionBuilder:
    """A tree of entries: mostly linear, with branches, new roots, orphans and duplicate ids.

    ``odd`` adds what only hand-made or damaged files hold: missing or empty ids and parents,
    text blocks whose ``text`` is not a string, string contents and padded session names.
    ``untimed`` drops some entries' ``timestamp`` (pbot fails on those; we must not).
    """
    builder = SessionBuilder()
    count = draw(st.integers(min_value=0, max_value=max_entries))
    ids: list[str] = []
    for _ in range(count):
        kind = draw(st.sampled_from(KINDS))
        link = draw(st.sampled_from(("leaf",) * 6 + ("earlier", "root") + (("orphan",) if orphans else ())))
        parent: Any = AUTO
        if link == "earlier" and ids:
            parent = draw(st.sampled_from(ids))
        elif link == "root":
            parent = None
        elif link == "orphan":
            parent = "deadbeef"
        entry_id: Any = AUTO
        if duplicates and ids and draw(st.integers(0, 15)) == 0:
            entry_id = draw(st.sampled_from(ids))
        text = draw(TEXTS)
        if odd and draw(st.integers(0, 9)) == 0:
            parent = draw(st.sampled_from(ODD_LINKS))
        if odd and draw(st.integers(0, 9)) == 0:
            entry_id = draw(st.sampled_from(ODD_LINKS))
        kw: dict[str, Any] = {"parent": parent, "id": entry_id}
        if untimed and draw(st.integers(0, 5)) == 0:
            kw["timestamp"] = MISSING
        if odd and kind in ("user", "stop") and draw(st.booleans()):
            role = "user" if kind == "user" else "assistant"
            content: Any = [{"type": "text", "text": draw(st.sampled_from(ODD_TEXT_VALUES))}]
            if role == "user" and draw(st.booleans()):
                content = text
            new = builder.message({"role": role, "content": content, "stopReason": "stop"}, **kw)
            ids.append(new)
            continue
        if odd and kind == "info":
            text = draw(st.sampled_from(("  padded name  ", "", "\u3000", text)))
        if kind == "user":
            new = builder.user(text, **kw)
        elif kind == "image":
            new = builder.user(
                [{"type": "text", "text": text}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}],
                **kw,
            )
        elif kind in ("stop", "length", "aborted", "error"):
            new = builder.assistant(text, kind, **kw)
        elif kind == "tool":
            new = builder.assistant(text, "toolUse", tool=True, **kw)
        elif kind == "thinking":
            new = builder.assistant(text, "stop", thinking="hmm", **kw)
        elif kind == "no_text":
            new = builder.message(
                {"role": "assistant", "content": [{"type": "text"}], "stopReason": "stop"}, **kw
            )
        elif kind == "toolResult":
            new = builder.tool_result(text, **kw)
        elif kind == "info":
            new = builder.info(text, **kw)
        elif kind == "label":
            new = builder.label(ids[-1] if ids else "x", **kw)
        elif kind == "custom":
            new = builder.custom(**kw)
        else:
            new = builder.add("custom_message", customType="note", content=text, display=True, **kw)
        ids.append(new)
    return builder


def has_cycle(entries: list[dict[str, Any]]) -> bool:
    """Whether following ``parentId`` through the last-wins id map ever repeats (pbot would hang)."""
    by_id = {e["id"]: e for e in entries if isinstance(e.get("id"), str)}
    for start in by_id.values():
        seen: set[str] = set()
        current: dict[str, Any] | None = start
        while current is not None:
            if current["id"] in seen:
                return True
            seen.add(current["id"])
            parent = current.get("parentId")
            current = by_id.get(parent) if isinstance(parent, str) and parent else None
    return False


# ---- running the pure pipeline -----------------------------------------------------------


def history_of(data: bytes) -> Any:
    """``SessionHistory`` of a whole file (``None`` without exchanges), through ``SessionFile``."""
    from pbot_watch.history.project import SessionFile

    state = SessionFile()
    state.feed(data)
    return state.history()


def record_of(data: bytes, previous: dict[str, Any] | None = None, record_id: str = "rec") -> dict[str, Any]:
    """The record of a whole file, with a fixed record id (or ``previous``'s)."""
    from pbot_watch.history.nodes import index_history

    history = history_of(data)
    assert history is not None
    return index_history(history, previous or {"id": record_id, "nodes": []})


def exchanges_of(data: bytes) -> list[list[tuple[list[str], bool, str]]]:
    """Per branch: (entryIds, completed, text) of each exchange."""
    history = history_of(data)
    if history is None:
        return []
    return [[(e["entryIds"], e["completed"], e["text"]) for e in branch] for branch in history.branches]
