"""What Pi writes, and the reader that turns lines into entries.

The first line is the header, a pydantic model that allows extra fields: Pi adds fields in
minor releases and we must never reject a session for that. Every later line is an entry,
``{type, id, parentId, timestamp, ...}``; a ``message`` entry carries ``message.role`` (``user``,
``assistant``, ``toolResult``, ``bashExecution``, ``custom``...), ``message.content`` (a string or
blocks: ``text``, ``image``, ``thinking``, ``toolCall``...) and an assistant's ``stopReason``;
``id``/``parentId`` may be missing (v1 files). Entries stay decoded dicts: the indexer touches a
handful of keys per entry, so one bad field in one entry cannot lose the rest of the file.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from pbot_watch.pi.jsonline import Malformed, decode_line
from pbot_watch.pi.lines import LineSplitter
from pbot_watch.pi.untrusted import well_formed_ids, well_formed_value

CURRENT_SESSION_VERSION = 3


class _Open(BaseModel):
    # Pi's keys are camelCase; unknown ones are kept (a newer Pi may add some).
    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True)


class SessionHeader(_Open):
    """The first line of every session file (``type: "session"``)."""

    type: Literal["session"]
    id: str
    version: Any = None
    timestamp: Any = None
    cwd: Any = None
    parent_session: Any = None

    @model_validator(mode="before")
    @classmethod
    def _well_formed(cls, value: Any) -> Any:
        # The id, cwd and any extra field are kept, and stored, by every part: see ``pi.untrusted``.
        return well_formed_value(value)

    @property
    def workspace(self) -> str | None:
        """The session's working directory, where its records live by default."""
        return self.cwd if isinstance(self.cwd, str) and self.cwd else None

    @property
    def effective_version(self) -> float:
        """``header.version ?? 1`` as Pi reads it; a non-numeric version is left unmigrated."""
        if self.version is None:
            return 1
        if isinstance(self.version, bool):
            return int(self.version)  # ``true < 2`` in JavaScript: a v1 file
        if isinstance(self.version, (int, float)):
            return self.version
        try:
            return float(self.version)
        except (TypeError, ValueError):
            return CURRENT_SESSION_VERSION


def v1_entry_id(session_id: str, ordinal: int) -> str:
    """A stable 8-hex id for the ``ordinal``-th entry of a v1 file.

    Pi gives v1 entries random ids when it migrates, and only once it rewrites the file; until
    then every reading must give the same ids, or node ids would change on each pass.
    """
    return hashlib.blake2b(f"{session_id}\0{ordinal}".encode(), digest_size=4).hexdigest()


# How an entry's ``id``/``parentId`` looked before normalisation. personal-bot finds tips with
# ``!parents.has(entry.id)`` over raw values, so ``null`` and a missing key are distinct values
# there (and ``getBranch(undefined)`` falls back to the leaf). Ids that are neither a string nor
# null are treated as missing: Pi never writes them.
ID_NULL = 1
ID_MISSING = 2
PARENT_NULL = 4
PARENT_MISSING = 8


_ABSENT: Any = object()


class SessionReader:
    """Bytes of one session file in, migrated entry dicts out; incremental by construction.

    Feeding the file in any chunks gives the same entries as feeding it whole: only complete
    lines are decoded, and all state (migration chain, counters) advances per line.
    Entries come out with ``id``/``parentId`` normalised to a non-empty string or ``None``,
    which is exactly how Pi's ``getBranch`` treats falsy values. Every id an entry gives (its
    own, its parent's, a tool call's...) and the header's id and cwd are well-formed text
    (``pi.untrusted``).
    """

    def __init__(self) -> None:
        self.lines = LineSplitter()
        self.header: SessionHeader | None = None
        self.not_session = False
        self.malformed = 0
        self.blank = 0
        self.extra_headers = 0
        self._ordinal = 0
        self._v1_headers: list[int] = []
        """Where a v1 file has extra header lines, as Pi's migration indexes lines (header = 0):
        Pi counts them, they are no entries."""
        self._v1 = False
        self._v2 = False
        self._previous_id: str | None = None

    @classmethod
    def resume(
        cls, header: SessionHeader, offset: int, entries: int, v1_headers: Sequence[int] | None = None
    ) -> SessionReader:
        """A reader that goes on where another stopped: at ``offset`` (just past a complete line),
        after ``entries`` entries of the session with this ``header``.

        That is all the state a reader carries from line to line (v1 files number their entries
        and chain each to the previous one), so the entries after ``offset`` come out exactly as
        from a reader that read the file from its start. ``v1_headers`` is the other reader's
        ``v1_headers``; without it, extra header lines before ``offset`` (concatenated v1 files)
        are taken as none.
        """
        reader = cls()
        reader.lines = LineSplitter(offset)
        reader._start(header)
        reader._ordinal = entries
        reader._v1_headers = list(v1_headers or ())
        if reader._v1 and entries:
            reader._previous_id = v1_entry_id(header.id, entries - 1)
        return reader

    @property
    def entries(self) -> int:
        """Entries read so far (``resume`` goes on after them)."""
        return self._ordinal

    @property
    def v1_headers(self) -> tuple[int, ...]:
        """Extra header lines of a v1 file so far, as ``resume`` takes them."""
        return tuple(self._v1_headers)

    @property
    def consumed(self) -> int:
        """Offset just past the last complete line read."""
        return self.lines.consumed

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        return [entry for entry, _ in self.feed_links(chunk)]

    def feed_links(self, chunk: bytes) -> Iterator[tuple[dict[str, Any], int]]:
        """Like ``feed``, with each entry's link shape (``ID_NULL``, ``PARENT_MISSING``...).

        Entries come one at a time, each decoded when the caller asks for it, so a caller that
        keeps only a few fields lets each entry die before the next one is made: a whole file's
        entries never live at once, and the garbage collector never walks them. The caller must
        consume every entry (the reader's state advances with them).
        """
        line_of = self._line
        for line in self.lines.feed(chunk):
            entry = line_of(line)
            if entry is not None:
                yield entry

    def _line(self, line: bytes) -> tuple[dict[str, Any], int] | None:
        try:
            value, refused = decode_line(line)
        except Malformed:
            # Blank lines are rare: looked for only among the lines that do not parse.
            if line.strip():
                self.malformed += 1
            else:
                self.blank += 1
            return None
        if self.not_session:
            return None
        if self.header is None:
            self._first(value)
            return None
        if not isinstance(value, dict):
            # JSON that is not an object: Pi's loader keeps it as an entry without id or parent
            # (it still moves the leaf), so it stays in the tree as an empty entry. Counted as bad input.
            self.malformed += 1
            value = {}
        if value.get("type") == "session":
            # getEntries() drops every header line; a second one (concatenated files) adds nothing.
            self.extra_headers += 1
            if self._v1:
                self._v1_headers.append(self._ordinal + len(self._v1_headers) + 1)
            return None
        if refused:  # only a line msgspec refused can hold a lone surrogate
            well_formed_ids(value)
        return self._migrate(value)

    def _first(self, value: Any) -> None:
        # Pi's rule: the first parsed entry must be {type: "session", id: string}.
        try:
            header = SessionHeader.model_validate(value)
        except (ValidationError, RecursionError):  # RecursionError: extra fields nested past the stack
            self.not_session = True
            return
        self._start(header)

    def _start(self, header: SessionHeader) -> None:
        self.header = header
        version = header.effective_version
        self._v1 = version < 2
        self._v2 = version < CURRENT_SESSION_VERSION

    def _v1_kept(self, entry: dict[str, Any]) -> None:
        """A v1 compaction's ``firstKeptEntryIndex`` turned into ``firstKeptEntryId``, as Pi's
        ``migrateV1ToV2`` does it: the index counts the file's parsed lines, header = 0; a
        header line there leaves the entry as it is; an entry not read yet (after the
        compaction) has no id then, so the compaction keeps none (``firstKeptEntryId`` goes).
        """
        assert self.header is not None
        index = entry.pop("firstKeptEntryIndex")
        if isinstance(index, float) and index.is_integer():
            index = int(index)  # ``5.0`` is the number 5 in JavaScript
        if index.__class__ is not int or index < 1 or index in self._v1_headers:
            return
        if index > self._ordinal + len(self._v1_headers) + 1:
            entry.pop("firstKeptEntryId", None)
            return
        ordinal = index - 1 - bisect.bisect_left(self._v1_headers, index)
        entry["firstKeptEntryId"] = v1_entry_id(self.header.id, ordinal)

    def _migrate(self, entry: dict[str, Any]) -> tuple[dict[str, Any], int]:
        if self._v1:
            assert self.header is not None
            entry["id"] = v1_entry_id(self.header.id, self._ordinal)
            entry["parentId"] = self._previous_id
            self._previous_id = entry["id"]
            if entry.get("type") == "compaction" and "firstKeptEntryIndex" in entry:
                self._v1_kept(entry)
            shape = PARENT_NULL if entry["parentId"] is None else 0
        else:
            # the hot path: one lookup per key, nothing rewritten for the usual string ids
            entry_id = entry.get("id", _ABSENT)
            parent = entry.get("parentId", _ABSENT)
            shape = 0
            if entry_id.__class__ is not str:
                shape = ID_NULL if entry_id is None else ID_MISSING
                entry["id"] = None
            elif not entry_id:
                entry["id"] = None
            if parent.__class__ is not str:
                shape |= PARENT_NULL if parent is None else PARENT_MISSING
                entry["parentId"] = None
            elif not parent:
                entry["parentId"] = None
        if self._v2 and entry.get("type") == "message":
            message = entry.get("message")
            if isinstance(message, dict) and message.get("role") == "hookMessage":
                message["role"] = "custom"
        self._ordinal += 1
        return entry, shape


def session_header(chunks: Iterable[bytes]) -> SessionHeader | Literal[False] | None:
    """A session file's header by Pi's rule; ``False`` when it is not a session, ``None`` when undecided.

    The rule is ``SessionReader``'s: blank lines and lines that do not parse are skipped, and the
    first line that parses must be ``{type: "session", id: string}``. Every part that asks "is
    this a session, whose, where" uses this, so a file ``index`` archives is one ``search`` finds.
    Lines are fed one at a time and ``chunks`` is consumed lazily: nothing after the header is
    decoded or even read. ``None`` is an empty file or a first line still being written.
    """
    reader = SessionReader()
    for chunk in chunks:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            reader.feed(chunk[start : end + 1])
            if reader.header is not None:
                return reader.header
            if reader.not_session:
                return False
            start = end + 1
        reader.feed(chunk[start:])
    return None
