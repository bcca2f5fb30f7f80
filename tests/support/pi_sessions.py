"""Pi session files for tests: one builder for every entry Pi 1.6.0 writes.

``PiSession`` appends entries as Pi's SessionManager does (each one a child of the current leaf
unless a ``parent`` is given) and renders them as Pi's JSONL: compact ``JSON.stringify`` lines,
raw non-ASCII. It builds a file in memory (``data``, ``write``, ``append_to``) or, given a
``file``, appends the header and then each entry to it as Pi does while it runs. Ids come from a
counter and timestamps from a clock (``start``, one ``step`` per entry) unless a test names them;
``MISSING`` leaves a field out, as only hand-made or damaged files do.

The hypothesis strategy ``session_builders`` draws whole trees from it (branches, several roots,
orphans, duplicate ids, every stop reason, images and non-message tips); ``generated_history``
writes a realistic workload of branches and forks for the summary tests and benchmarks.
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

EPOCH = datetime(2026, 11, 29, 20, 0, 0, tzinfo=UTC)
AUTO: Any = object()
MISSING: Any = object()
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAE" * 20
# An entry is a JSON object, or bytes written as they are (garbage, or a torn line without its newline).
Entry = dict[str, Any] | bytes


def iso(moment: datetime) -> str:
    """Pi's ``new Date().toISOString()``: milliseconds and a Z."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def jsonl(entries: list[Entry]) -> bytes:
    """Lines as Pi writes them: ``JSON.stringify`` (compact, raw non-ASCII) and a newline each."""
    return b"".join(line(e) for e in entries)


def line(entry: Entry) -> bytes:
    if isinstance(entry, bytes):
        return entry
    return (json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


# ---- writing files as Pi does ------------------------------------------------------------------
def lines_of(path: Path) -> list[bytes]:
    """A session file's lines, each with its newline (blank lines dropped)."""
    return [line + b"\n" for line in path.read_bytes().split(b"\n") if line]


def append(path: Path, data: bytes) -> None:
    """One ``appendFileSync``: a single write with ``O_APPEND``."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def append_split(path: Path, data: bytes, rng: random.Random, pieces: int = 3, pause: float = 0.05) -> None:
    """One line in several writes with pauses between them (any cut point, even inside a character)."""
    cuts = sorted(rng.sample(range(1, len(data)), min(pieces - 1, len(data) - 1)))
    for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True):
        append(path, data[start:end])
        time.sleep(pause)  # the pause is the scenario (a slow writer), not a wait for a result


def rewrite_in_place(path: Path, data: bytes) -> None:
    """Pi's ``writeFileSync`` on load after a migration: same inode, new content."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def with_session_id(header: bytes, session_id: str, **fields: Any) -> bytes:
    """A header line (of a real Pi file, say) with another session id and more fields."""
    value = json.loads(header)
    value["id"] = session_id
    value.update(fields)
    return line(value)


@dataclass
class PiSession:
    """One Pi session file's entries; ``leaf`` is the parent of the next entry."""

    session_id: str = "01a228f5-0000-7000-8000-000000000001"
    cwd: str = "/nonexistent/workspace"
    version: int | None = 3
    entries: list[Entry] = field(default_factory=list)
    leaf: str | None = None
    counter: int = 0
    clock: int = 0
    start: datetime = EPOCH
    step: timedelta = timedelta(seconds=1)
    parent_session: str | None = None
    # More header fields than Pi writes (a long note, say); they follow Pi's own.
    header_fields: dict[str, Any] = field(default_factory=dict)
    # When set, the header is written at once and every entry is appended as it is added.
    file: Path | None = None

    def __post_init__(self) -> None:
        if self.file is not None:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            self.file.write_bytes(line(self.header()))

    def header(self) -> dict[str, Any]:
        head: dict[str, Any] = {"type": "session"}
        if self.version is not None:
            head["version"] = self.version
        head.update(id=self.session_id, timestamp=iso(self.start), cwd=self.cwd)
        if self.parent_session:
            head["parentSession"] = self.parent_session
        head.update(self.header_fields)
        return head

    def new_id(self) -> str:
        self.counter += 1
        return f"{self.counter:08x}"

    def now(self) -> datetime:
        """The time of the entry being added."""
        return self.start + self.clock * self.step

    # ---- entries ------------------------------------------------------------------------------
    def add(
        self,
        kind: str,
        *,
        parent: Any = AUTO,
        id: Any = AUTO,  # noqa: A002 - Pi's field name
        timestamp: Any = AUTO,
        **fields: Any,
    ) -> str:
        """An entry of any ``type``; returns its id ("" when it has none)."""
        entry_id = self.new_id() if id is AUTO else id
        self.clock += 1
        entry: dict[str, Any] = {"type": kind}
        if entry_id is not MISSING:
            entry["id"] = entry_id
        parent_id = self.leaf if parent is AUTO else parent
        if parent_id is not MISSING:
            entry["parentId"] = parent_id
        if timestamp is AUTO:
            entry["timestamp"] = iso(self.now())
        elif timestamp is not MISSING:
            entry["timestamp"] = timestamp
        entry.update(fields)
        self._append(entry)
        self.leaf = entry_id if isinstance(entry_id, str) else None
        return entry_id if isinstance(entry_id, str) else ""

    def raw(self, data: bytes) -> None:
        """Bytes written as they are: a line that is no JSON, or a torn one without its newline."""
        self._append(data)

    def _append(self, entry: Entry) -> None:
        self.entries.append(entry)
        if self.file is not None:
            append(self.file, line(entry))

    def message(self, message: dict[str, Any], **kw: Any) -> str:
        """A ``message`` entry; the message gets Pi's epoch-milliseconds ``timestamp`` unless it has one."""
        message.setdefault("timestamp", int((self.now() + self.step).timestamp() * 1000))
        return self.add("message", message=message, **kw)

    def user(self, text: str | list[dict[str, Any]], *, image: bool = False, **kw: Any) -> str:
        content = [{"type": "text", "text": text}] if isinstance(text, str) else text
        if image:
            content.append({"type": "image", "data": PNG, "mimeType": "image/png"})
        return self.message({"role": "user", "content": content}, **kw)

    def assistant(
        self,
        text: str | None = "ok",
        stop: str | None = None,
        *,
        thinking: str | None = None,
        calls: list[tuple[str, str, dict[str, Any]]] | None = None,
        tool: bool = False,
        **kw: Any,
    ) -> str:
        """An assistant message: thinking, text, then tool calls ``(id, name, arguments)``.

        ``tool`` is one bash ``ls`` call; ``stop`` defaults to ``toolUse`` with calls, else ``stop``.
        """
        calls = list(calls or [])
        if tool:
            calls.append((f"call_{self.counter}", "bash", {"command": "ls"}))
        content: list[dict[str, Any]] = []
        if thinking is not None:
            content.append({"type": "thinking", "thinking": thinking})
        if text is not None:
            content.append({"type": "text", "text": text})
        content += [{"type": "toolCall", "id": i, "name": n, "arguments": a} for i, n, a in calls]
        stop = stop or ("toolUse" if calls else "stop")
        message: dict[str, Any] = {
            "role": "assistant",
            "content": content,
            "api": "openai-completions",
            "provider": "fake",
            "model": "fake-1",
            "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2},
            "stopReason": stop,
        }
        if stop in ("error", "aborted"):
            message["errorMessage"] = "Request was aborted" if stop == "aborted" else "503 overloaded"
        return self.message(message, **kw)

    def tool_result(
        self,
        output: str = "done",
        *,
        call_id: str | None = None,
        name: str = "bash",
        error: bool = False,
        **kw: Any,
    ) -> str:
        """The result of a tool call (by default of the call ``tool=True`` just made)."""
        message = {
            "role": "toolResult",
            "toolCallId": call_id or f"call_{self.counter}",
            "toolName": name,
            "content": [{"type": "text", "text": output}],
            "isError": error,
        }
        return self.message(message, **kw)

    def bash(self, command: str, output: str, code: int = 0, **kw: Any) -> str:
        """A command the person ran with ``!`` in Pi."""
        message = {"role": "bashExecution", "command": command, "output": output, "exitCode": code}
        return self.message(message, **kw)

    def turn(self, question: str, answer: str = "ok") -> tuple[str, str]:
        return self.user(question), self.assistant(answer)

    def compaction(self, kept: str, summary: str = "## Goal\nSummary of earlier work.", **kw: Any) -> str:
        """A compaction as Pi writes it: everything before ``kept`` leaves the model's context."""
        return self.add("compaction", summary=summary, firstKeptEntryId=kept, tokensBefore=50000, **kw)

    def branch_summary(self, from_id: str, summary: str = "Tried another way first.", **kw: Any) -> str:
        """What Pi writes when /tree leaves a branch: a summary of the branch left, from ``from_id``."""
        return self.add("branch_summary", fromId=from_id, summary=summary, **kw)

    def info(self, name: str | None, **kw: Any) -> str:
        """A ``session_info`` entry: the session's name (``None`` leaves the field out)."""
        return self.add("session_info", **({"name": name} if name is not None else {}), **kw)

    def label(self, target: str, label: str | None = "mark", **kw: Any) -> str:
        return self.add("label", targetId=target, **({"label": label} if label is not None else {}), **kw)

    def custom(self, custom_type: str = "test-state", **kw: Any) -> str:
        """An extension's private state: never part of the conversation."""
        kw.setdefault("data", {"n": 1})
        return self.add("custom", customType=custom_type, **kw)

    # ---- branches and forks ---------------------------------------------------------------------
    def branch_at(self, entry_id: str | None) -> None:
        """Continue from an earlier entry (Pi's /tree): later entries start a new branch."""
        self.leaf = entry_id

    def fork(self, session_id: str | None = None, *, counter: int | None = None) -> PiSession:
        """A new session holding the current branch's entries, as ``pi --fork`` writes it.

        Ids and timestamps are copied unchanged; new ids continue from ``counter`` (by default
        where this session's stand, so give a fork its own when both go on).
        """
        by_id = {e["id"]: e for e in self.entries if isinstance(e, dict) and isinstance(e.get("id"), str)}
        path: list[Entry] = []
        current = by_id.get(self.leaf) if self.leaf else None
        while current is not None:
            path.append(dict(current))
            parent = current.get("parentId")
            current = by_id.get(parent) if isinstance(parent, str) and parent else None
        path.reverse()
        return PiSession(
            session_id=session_id or str(uuid.uuid4()),
            cwd=self.cwd,
            version=self.version,
            entries=path,
            leaf=self.leaf,
            counter=self.counter if counter is None else counter,
            clock=self.clock,
            start=self.start,
            step=self.step,
            parent_session=self.session_id,
        )

    # ---- realistic conversations ----------------------------------------------------------------
    def exchange(self, index: int, chinese: bool = False) -> None:
        """One question and answer on a coding topic (``index`` picks the topic and numbers it)."""
        topics = TOPICS_ZH if chinese else TOPICS_EN
        question, answer = topics[index % len(topics)]
        self.user(f"{question} (#{index})")
        self.assistant(f"{answer} (#{index})")

    def exchanges(self, count: int, start: int = 0, chinese: bool = False) -> None:
        for i in range(start, start + count):
            self.exchange(i, chinese)

    # ---- the file -------------------------------------------------------------------------------
    def lines(self) -> list[Entry]:
        return [self.header(), *self.entries]

    def data(self) -> bytes:
        return jsonl(self.lines())

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.data())
        return path

    def append_to(self, path: Path, since: int) -> int:
        """Append entries ``since`` onwards to ``path`` in one write (as Pi does); returns the new count."""
        append(path, jsonl(self.entries[since:]))
        return len(self.entries)


TOPICS_EN = [
    (
        "Fix the failing test in tests/test_api.py",
        "I ran `pytest -q tests/test_api.py`; the KeyError came from src/api/views.py and is fixed.",
    ),
    (
        "Add a --dry-run flag to scripts/deploy.sh",
        "Added --dry-run to scripts/deploy.sh; it prints the rsync command instead of running it.",
    ),
    (
        "Why is the build slow?",
        "The build spends most time in webpack; caching node_modules/.cache halves it.",
    ),
    (
        "Rename UserStore to AccountStore",
        "Renamed UserStore to AccountStore in src/store/account.ts and updated 14 imports.",
    ),
]
TOPICS_ZH = [
    (
        "请修复 src/app.py 里的登录错误",
        "我检查了 src/app.py，密码校验失败是编码问题，已改为 utf-8，`pytest -q` 通过。",
    ),
    ("把配置文件迁移到 TOML", "已把 config.yaml 迁移到 config.toml，并更新了 README.md 的说明。"),
]


def generated_history(
    root: Path, exchanges: int, branches: int = 3, forks: int = 2, cwd: str = "/w"
) -> list[Path]:
    """A workload: one session of ``exchanges`` on the main line with ``branches`` side branches,
    then ``forks`` forked sessions that each continue the main line a little further.

    A fork's groups have the same input text as the original's, so only a content-keyed cache
    can notice that they need no new summary.
    """
    main = PiSession(str(uuid.UUID(int=1)), cwd)
    main.exchanges(exchanges)
    # Side branches off the middle of the main line, each as long as a quarter of it.
    trunk = [e["id"] for e in main.entries if isinstance(e, dict)]
    end = main.leaf
    for b in range(branches):
        main.branch_at(trunk[(len(trunk) // 2) - 1 - 2 * b])
        main.exchanges(max(4, exchanges // 4), start=1000 * (b + 1))
    main.branch_at(end)
    files = [main.write(root / "main.jsonl")]
    for f in range(forks):
        fork = main.fork(str(uuid.UUID(int=100 + f)), counter=0x10000 * (f + 1))
        fork.exchanges(4, start=5000 * (f + 1))
        files.append(fork.write(root / f"fork-{f}.jsonl"))
    return files


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
) -> PiSession:
    """A tree of entries: mostly linear, with branches, new roots, orphans and duplicate ids.

    ``odd`` adds what only hand-made or damaged files hold: missing or empty ids and parents,
    text blocks whose ``text`` is not a string, string contents and padded session names.
    ``untimed`` drops some entries' ``timestamp`` (pbot fails on those; we must not).
    """
    builder = PiSession()
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


def has_cycle(entries: list[Entry]) -> bool:
    """Whether following ``parentId`` through the last-wins id map ever repeats (pbot would hang)."""
    by_id = {e["id"]: e for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)}
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


def pi_rewrite_v1(data: bytes, rng: random.Random) -> bytes:
    """The v3 file Pi 1.6 writes when it opens the v1 file ``data`` (``migrateV1ToV2``, then v3).

    As Pi's loader: lines that do not parse are dropped, each entry gets a random 8-hex id
    and the previous entry as parent (keys added at the end, as JavaScript adds them), and a
    compaction's ``firstKeptEntryIndex`` (an index into the parsed lines, header = 0) becomes
    the ``firstKeptEntryId`` of the entry there, or none when that entry has no id yet. The
    real Pi does the same in the end-to-end test; ``tests/memory/test_v1.py`` checks this one
    against the file Pi wrote from ``onload/v1.before.jsonl``.
    """
    parsed: list[Any] = []
    for raw in data.decode().strip().split("\n"):
        try:
            parsed.append(json.loads(raw))
        except ValueError:
            continue
    taken: set[str] = set()
    previous: str | None = None
    for entry in parsed:
        if entry.get("type") == "session":
            entry["version"] = 3
            continue
        entry_id = f"{rng.getrandbits(32):08x}"
        while entry_id in taken:
            entry_id = f"{rng.getrandbits(32):08x}"
        taken.add(entry_id)
        entry["id"], entry["parentId"], previous = entry_id, previous, entry_id
        index = entry.get("firstKeptEntryIndex")
        if entry.get("type") == "compaction" and isinstance(index, int):
            del entry["firstKeptEntryIndex"]
            target = parsed[index] if 0 <= index < len(parsed) else None
            if target is not None and target.get("type") != "session":
                if "id" in target:
                    entry["firstKeptEntryId"] = target["id"]
                else:
                    entry.pop("firstKeptEntryId", None)
        if entry.get("type") == "message" and entry["message"].get("role") == "hookMessage":
            entry["message"]["role"] = "custom"
    return jsonl(parsed)
