r"""Split a growing byte stream into complete JSONL lines.

Pi appends one ``JSON.stringify(entry) + "\\n"`` per entry, but a reader can see any prefix
of a write, even one that ends inside a UTF-8 character. Only ``\\n`` ends a line (never
``str.splitlines``: U+2028 and friends are legal raw inside JSON strings), and the bytes after
the last newline wait until their newline arrives.
"""

from __future__ import annotations


class LineSplitter:
    """Turns chunks of bytes into complete lines, keeping the unfinished tail.

    ``consumed`` is the file offset just past the last complete line: the offset a cursor
    may safely persist, because everything before it has been handed out.
    """

    __slots__ = ("_tail", "consumed")

    def __init__(self, consumed: int = 0) -> None:
        self._tail = b""
        self.consumed = consumed

    @property
    def pending(self) -> int:
        """Bytes seen but not yet part of a complete line."""
        return len(self._tail)

    def feed(self, chunk: bytes) -> list[bytes]:
        if not chunk:
            return []
        data = self._tail + chunk if self._tail else chunk
        last = data.rfind(b"\n")
        if last < 0:
            self._tail = data
            return []
        # split the whole buffer and keep the last piece as the tail: no copy of the buffer
        lines = data.split(b"\n")
        self._tail = lines.pop()
        self.consumed += last + 1
        return lines
