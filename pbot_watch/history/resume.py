"""A session file's parsed state as compact bytes, to go on reading it without re-parsing. Pure.

The service holds a bounded number of parsed session files in memory. A file it dropped (read
only to catch up, or evicted for a busier one) used to be re-read from byte 0 at its next
append: a 200 MB marathon session beside a small active one was re-parsed whole on every turn.
What a ``SessionFile`` knows is the reader's few counters and one ``Step`` per entry (ids,
links and the already redacted texts: tool output is never kept), and the tree is rebuilt
from the steps exactly as it was built from the entries (``SessionTree.add_step``). So the
resumable form is a log of frames, each adding the steps of one read and marking where the
file stood (the cursor's identity, offset and window fingerprints): appended as the cursor
moves, it costs what the read added, and resuming at a saved cursor costs decoding the steps
(1 to 10% of the file's bytes once compressed) instead of parsing the file.

Frames are msgpack (msgspec, already what decodes Pi's lines), compressed with zlib at level
1 (a third of the size, at over 100 MB/s: a history of conversation keeps about 30% of its
bytes as steps, 10% once compressed), behind a length and a CRC: a torn or foreign tail is
where the log ends. The format is internal to one machine's state and
versioned; a log of another version is not resumed, the file is read from 0 as before.

Frames also carry the digests of the file's whole 1 MB blocks read meanwhile (``WholeDigest``):
without them, the first cursor after a restart hashed the whole file again (0.4 s at 300 MB)
to make its whole-file fingerprint. Frames of version 2 (before) are resumed without them.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from pbot_watch.errors import PbotWatchError
from pbot_watch.history.exchanges import Step
from pbot_watch.history.project import SessionFile
from pbot_watch.history.tree import SessionTree
from pbot_watch.pi.cursor import Cursor
from pbot_watch.pi.entries import SessionHeader, SessionReader

VERSION = 3
READ_VERSIONS = (2, 3)
_FRAME = struct.Struct("<II")  # payload length, CRC-32 of the payload
_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder().decode


class Unencodable(PbotWatchError, ValueError):
    """A step holds a value msgpack cannot carry (an integer past 64 bits, a lone surrogate)."""


@dataclass(frozen=True, slots=True)
class Frame:
    """One decoded frame: where the file stood after it, and the steps it added."""

    mark: tuple[int, int, int, str, str]
    first: int
    entries: int
    v1_headers: list[int]
    counters: tuple[int, int, int]
    rows: list[list[Any]]
    end: int
    """Offset in the log just past this frame."""
    raw: int
    """The frame's size before compression."""
    first_block: int = 0
    blocks: list[bytes] | None = None
    """Digests of the file's whole blocks from ``first_block`` on (``None``: not known)."""


def _mark(cursor: Cursor) -> tuple[int, int, int, str, str]:
    """What must match for a log to stand for a file read up to ``cursor``.

    Its mtime and whole fingerprint are left out: they are refreshed without a read.
    """
    return (cursor.dev, cursor.ino, cursor.offset, cursor.head, cursor.tail)


def frame(
    state: SessionFile,
    cursor: Cursor,
    first: int,
    blocks: list[bytes] | None = None,
    first_block: int = 0,
) -> tuple[bytes, int]:
    """The frame that adds ``state``'s steps from index ``first`` on, leaving the file at ``cursor``,
    and the size of its steps before compression (what their memory is estimated from).

    ``blocks``: the digests of the file's whole blocks from ``first_block`` on, read up to
    ``cursor`` (``sources.WholeDigest``), or ``None`` when they are not known.

    Raises ``Unencodable`` when a step cannot be written (the file then has no log: it is
    read from 0 when it comes back, as before).
    """
    reader = state.reader
    rows = [
        (s.id, s.parent, s.kind, s.timestamp, s.text, s.stop, s.tool_call, s.name, s.is_info, s.links)
        for s in state.tree.steps[first:]
    ]
    try:
        payload = _encode(
            (
                VERSION,
                _mark(cursor),
                first,
                reader.entries,
                reader.v1_headers,
                (reader.malformed, reader.blank, reader.extra_headers),
                rows,
                first_block,
                blocks,
            )
        )
    except (msgspec.EncodeError, OverflowError, UnicodeEncodeError, TypeError) as error:
        raise Unencodable(str(error)) from error
    raw = len(payload)
    payload = zlib.compress(payload, 1)
    return _FRAME.pack(len(payload), zlib.crc32(payload)) + payload, raw


def frames(data: bytes) -> Iterator[Frame]:
    """The log's frames in order, stopping at the first torn, foreign or out-of-sequence one."""
    at = 0
    steps = 0
    while at + _FRAME.size <= len(data):
        length, crc = _FRAME.unpack_from(data, at)
        start, end = at + _FRAME.size, at + _FRAME.size + length
        payload = data[start:end]
        if len(payload) != length or zlib.crc32(payload) != crc:
            return
        try:
            raw = zlib.decompress(payload)
            version, mark, first, entries, v1_headers, counters, rows, *more = _decode(raw)
            first_block, blocks = more if version == VERSION else (0, None)
        except (msgspec.DecodeError, TypeError, ValueError, zlib.error):
            return
        if version not in READ_VERSIONS or first != steps:
            return
        steps += len(rows)
        yield Frame(
            tuple(mark), first, entries, v1_headers, tuple(counters), rows, end, len(raw), first_block, blocks
        )
        at = end


@dataclass(frozen=True, slots=True)
class Resumed:
    """A state rebuilt from a log, and how many of the log's bytes it used (the rest is stale)."""

    state: SessionFile
    log_bytes: int
    raw_bytes: int
    """Those bytes before compression."""
    blocks: list[bytes] | None = None
    """The digests of the file's whole blocks logged up to the cursor (``None``: not known)."""


def resume(data: bytes, cursor: Cursor, header: SessionHeader) -> Resumed | None:
    """The state of a file read up to ``cursor``, from its log; ``None`` when the log does not reach it.

    ``header`` is the file's header (read again from the file: it is not in the log). The state
    equals what reading the file's bytes [0, ``cursor.offset``) builds: same reader counters,
    the same steps added in the same order to a new tree.
    """
    want = _mark(cursor)
    rows: list[list[Any]] = []
    raw = 0
    blocks: list[bytes] | None = []
    for found in frames(data):
        rows.extend(found.rows)
        raw += found.raw
        if found.blocks is None or (
            found.first_block and (blocks is None or found.first_block > len(blocks))
        ):
            blocks = None  # a frame that did not know them, or a gap: unknown from here on
        else:
            blocks = [*(blocks or [])[: found.first_block], *found.blocks]
        if found.mark != want:
            continue
        reader = SessionReader.resume(header, cursor.offset, found.entries, found.v1_headers)
        reader.malformed, reader.blank, reader.extra_headers = found.counters
        tree = SessionTree()
        add = tree.add_step
        for row in rows:
            add(Step(*row))
        return Resumed(SessionFile(reader, tree), found.end, raw, blocks)
    return None
