"""How far a session file has been read, and what to do when it changed. Pure.

Pi only appends, except when it rewrites a whole file in place (v1/v2 migration on load,
``--session`` on an empty file) or a file is replaced (same path, new inode). A cursor holds
the device, inode, offset and two fingerprints: the file's first bytes and the bytes just
before the offset. Same file, same fingerprints, at least as long: an append, read from the
offset. Anything else: re-read from 0.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

HEAD_BYTES = 4096
TAIL_BYTES = 1024

Plan = Literal["nothing", "append", "reread"]


def fingerprint(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@dataclass(frozen=True, slots=True)
class Cursor:
    dev: int
    ino: int
    offset: int
    head: str
    tail: str

    @staticmethod
    def windows(offset: int) -> tuple[tuple[int, int], tuple[int, int]]:
        """Byte ranges ``(start, length)`` of the head and tail fingerprints for ``offset``."""
        head = (0, min(offset, HEAD_BYTES))
        tail_start = max(0, offset - TAIL_BYTES)
        return head, (tail_start, offset - tail_start)


def plan(cursor: Cursor | None, dev: int, ino: int, size: int, head: bytes, tail: bytes) -> Plan:
    """Decide from the cursor, the file's stat and the bytes in the cursor's windows."""
    if cursor is None:
        return "reread" if size > 0 else "nothing"
    if (dev, ino) != (cursor.dev, cursor.ino) or size < cursor.offset:
        return "reread"
    if fingerprint(head) != cursor.head or fingerprint(tail) != cursor.tail:
        return "reread"
    return "append" if size > cursor.offset else "nothing"
