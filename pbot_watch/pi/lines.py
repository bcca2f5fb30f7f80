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
    may safely persist, because everything before it has been handed out. An unfinished line
    is kept as the list of chunks it came in and joined once, when its newline arrives: a
    single line of many megabytes (a pasted log) costs one copy, not one per chunk.
    """

    __slots__ = ("_parts", "_pending", "consumed")

    def __init__(self, consumed: int = 0) -> None:
        self._parts: list[bytes] = []
        self._pending = 0
        self.consumed = consumed

    @property
    def pending(self) -> int:
        """Bytes seen but not yet part of a complete line."""
        return self._pending

    def feed(self, chunk: bytes) -> list[bytes]:
        if not chunk:
            return []
        last = chunk.rfind(b"\n")
        if last < 0:
            self._parts.append(chunk)
            self._pending += len(chunk)
            return []
        if self._parts:
            self._parts.append(chunk)
            data = b"".join(self._parts)
            self._parts = []  # the pieces go before the split makes its copies
            last += self._pending
        else:
            data = chunk
        # split the whole buffer and keep the last piece as the tail: no copy of the buffer
        lines = data.split(b"\n")
        tail = lines.pop()
        self._parts = [tail] if tail else []
        self._pending = len(tail)
        self.consumed += last + 1
        return lines
