"""How far a session file has been read, and what to do when it changed. Pure.

Pi only appends, except when it rewrites a whole file in place (v1/v2 migration on load,
``--session`` on an empty file) or a file is replaced (same path, new inode). A cursor holds
the device, inode, offset, the file's mtime when it was read, and three fingerprints: the
file's first bytes, the bytes just before the offset, and all the bytes up to the offset.

* Same file, same window fingerprints, longer: an append, read from the offset. (An edit in
  the middle of a file that also grew is not seen: checking it would cost a read of the whole
  file on every append.)
* Same size and same mtime: nothing happened.
* Same size, mtime changed: something rewrote the file without growing it (an editor, a
  ``sed -i`` that kept the length). The windows cannot tell, so the whole fingerprint is
  compared (``verify``): a full read of the file, paid only in this case.
* Anything else: re-read from 0.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

HEAD_BYTES = 4096
TAIL_BYTES = 1024
DIGEST_BYTES = 16

Plan = Literal["nothing", "append", "reread"]
Check = Plan | Literal["verify"]


def hasher() -> hashlib.blake2b:
    """A running fingerprint: fed piece by piece, it ends equal to ``fingerprint`` of the whole."""
    return hashlib.blake2b(digest_size=DIGEST_BYTES)


def fingerprint(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=DIGEST_BYTES).hexdigest()


@dataclass(frozen=True, slots=True)
class Cursor:
    dev: int
    ino: int
    offset: int
    head: str
    tail: str
    # The file's mtime when it was read up to ``offset``, and the fingerprint of bytes
    # [0, offset); both 0/"" in cursors saved before they existed.
    mtime_ns: int = 0
    whole: str = ""

    @staticmethod
    def windows(offset: int) -> tuple[tuple[int, int], tuple[int, int]]:
        """Byte ranges ``(start, length)`` of the head and tail fingerprints for ``offset``."""
        head = (0, min(offset, HEAD_BYTES))
        tail_start = max(0, offset - TAIL_BYTES)
        return head, (tail_start, offset - tail_start)

    COLUMNS: ClassVar[tuple[str, ...]] = ("dev", "ino", "offset", "head", "tail", "mtime_ns", "whole")
    """The SQL columns a cursor is stored in, in ``row`` order (every store of cursors uses these)."""

    def row(self) -> tuple[int, int, int, str, str, int, str]:
        """The cursor as the values of ``COLUMNS``."""
        return (self.dev, self.ino, self.offset, self.head, self.tail, self.mtime_ns, self.whole)

    @classmethod
    def from_row(cls, values: tuple[Any, ...]) -> Cursor:
        """The cursor stored as ``values`` of ``COLUMNS`` (a store without ``whole`` passes six)."""
        dev, ino, offset, head, tail, mtime_ns, *whole = values
        return cls(int(dev), int(ino), int(offset), str(head), str(tail), int(mtime_ns), *map(str, whole))

    def seen(self, mtime_ns: int, whole: str) -> Cursor:
        """The same cursor, checked unchanged at ``mtime_ns``: not checked again until it changes."""
        return replace(self, mtime_ns=mtime_ns, whole=whole)


def plan(
    cursor: Cursor | None, dev: int, ino: int, size: int, mtime_ns: int, head: bytes, tail: bytes
) -> Check:
    """Decide from the cursor, the file's stat and the bytes in the cursor's windows.

    ``"verify"``: same size, new mtime; the caller compares the whole fingerprint (``verify``).
    """
    if cursor is None:
        return "reread" if size > 0 else "nothing"
    if (dev, ino) != (cursor.dev, cursor.ino) or size < cursor.offset:
        return "reread"
    if fingerprint(head) != cursor.head or fingerprint(tail) != cursor.tail:
        return "reread"
    if size > cursor.offset:
        return "append"
    return "nothing" if mtime_ns == cursor.mtime_ns else "verify"


def verify(cursor: Cursor, whole: str) -> Plan:
    """After ``"verify"``: ``whole`` is the fingerprint of the file's bytes [0, cursor.offset) now.

    A cursor saved before whole fingerprints existed cannot tell; it is trusted, as it was.
    """
    if not cursor.whole:
        return "nothing"
    return "nothing" if whole == cursor.whole else "reread"
