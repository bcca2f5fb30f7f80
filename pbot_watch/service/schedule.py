"""When the service reads each changed file: debounce, a maximum delay, back-off after failures.

Pi appends a message as several writes in quick succession; reading after each would parse
the same session many times. So a changed file waits for a quiet gap (``debounce_seconds``
since its last change), but never longer than ``max_delay`` after its first unread change, so
a session appended to without pause is still read a few times a second. A file whose read or
record write failed is tried again after 1, 5, 30, then every 120 seconds; such a file is not
"busy" (status would otherwise say busy forever for a folder made read-only).

The schedule is plain bookkeeping on ``time.monotonic()`` values passed in by the caller, so
its rules are tested without clocks or files.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

# A file appended to without pause is still read at least this often (debounce is per quiet gap).
MAX_DEBOUNCE_DELAY = 0.5
RETRY_SECONDS = (1, 5, 30, 120)
CHUNK_FILES = 32
CHUNK_BYTES = 4 << 20


@dataclass
class _Pending:
    first: float
    last: float


@dataclass
class _Retry:
    due: float
    attempts: int


class ReadSchedule:
    """The files waiting to be read, and when each is due."""

    def __init__(
        self,
        debounce_seconds: float,
        max_delay: float = MAX_DEBOUNCE_DELAY,
        retry_seconds: tuple[float, ...] = RETRY_SECONDS,
    ) -> None:
        self.debounce_seconds = debounce_seconds
        self.max_delay = max_delay
        self.retry_seconds = retry_seconds
        self._pending: dict[Path, _Pending] = {}
        self._retries: dict[Path, _Retry] = {}

    @property
    def pending(self) -> int:
        """Files changed and waiting for their debounce (or for a batch)."""
        return len(self._pending)

    @property
    def retrying(self) -> int:
        """Files whose last attempt failed, waiting for their back-off."""
        return len(self._retries)

    @property
    def busy(self) -> bool:
        """Whether reads are waiting; a file that only waits for a retry does not count."""
        return bool(self._pending)

    def mark(self, path: Path, now: float) -> None:
        """``path`` changed at ``now``: its quiet gap starts again, its maximum delay does not."""
        pending = self._pending.get(path)
        if pending is None:
            self._pending[path] = _Pending(now, now)
        else:
            pending.last = now

    def mark_overdue(self, path: Path, now: float) -> None:
        """``path`` is due at once (found by a scan, not seen being written)."""
        self.mark(path, now - self.max_delay)

    def _due(self, pending: _Pending) -> float:
        return min(pending.last + self.debounce_seconds, pending.first + self.max_delay)

    def due(self, now: float) -> list[Path]:
        """The files to read at ``now``, sorted: debounced changes, then retries whose back-off ended."""
        due = [p for p, pending in self._pending.items() if self._due(pending) <= now]
        due += [p for p, retry in self._retries.items() if retry.due <= now and p not in self._pending]
        return sorted(due)

    def wait_seconds(self, now: float, tick: float) -> float:
        """How long the caller may wait for changes before the next pending file falls due."""
        if not self._pending:
            return tick
        soonest = min(self._due(p) for p in self._pending.values())
        return max(0.0, min(tick, soonest - now))

    def take(self, paths: Iterable[Path]) -> None:
        """``paths`` are being read now: they are no longer pending (a retry stays until ``finished``)."""
        for path in paths:
            self._pending.pop(path, None)

    def finished(self, paths: Iterable[Path], failed: Collection[Path], now: float) -> None:
        """The outcome of reading ``paths``: each failure backs off further, a success clears it."""
        for path in paths:
            if path in failed:
                retry = self._retries.get(path)
                attempts = retry.attempts + 1 if retry else 1
                delay = self.retry_seconds[min(attempts, len(self.retry_seconds)) - 1]
                self._retries[path] = _Retry(now + delay, attempts)
            else:
                self._retries.pop(path, None)


def batches(
    paths: list[Path], max_files: int = CHUNK_FILES, max_bytes: int = CHUNK_BYTES
) -> Iterator[list[Path]]:
    """Batches of at most ``max_files`` files or about ``max_bytes`` of them.

    One batch is one SQLite commit, so batches amortise the fsync over many small files; the
    byte bound keeps a batch short (a stop request is seen between batches). A file of
    ``max_bytes`` or more starts a batch of its own: the files before it have their records
    written without waiting for it.
    """
    chunk: list[Path] = []
    size = 0
    for path in paths:
        own = 0
        with suppress(OSError):
            own = os.stat(path).st_size
        if chunk and own >= max_bytes:
            yield chunk
            chunk, size = [], 0
        size += own
        chunk.append(path)
        if len(chunk) >= max_files or size >= max_bytes:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk
