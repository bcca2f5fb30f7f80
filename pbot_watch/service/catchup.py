"""The start scan's catch-up: which files it still has to read, and how fast it goes, for status.

On a first run over a long history the service reads every session file once before it is
caught up; that takes a while, and ``pbot-watch status`` says how far it is (files and bytes
done, rate, time left). Files are counted at the size the start scan saw; a file appended to
meanwhile is read once, whole, and counts once.

Caught up means searchable: the catch-up finishes when every file was read (for the records, or
for raw memory alone: ``memory``, the files only raw memory lacked) and ``searchable`` says the
indexes hold what was read (the record listeners have nothing queued).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from pbot_watch.service.status import CatchUpInfo, iso


class CatchUp:
    """Files the start scan found changed, and the progress of reading them."""

    def __init__(
        self,
        sizes: Mapping[Path, int],
        now: float | None = None,
        *,
        memory: Mapping[Path, int] | None = None,
        searchable: Callable[[], bool] = lambda: True,
    ) -> None:
        self.pending: dict[Path, int] = {**(memory or {}), **sizes}
        self.memory: set[Path] = set(memory or {}) - set(sizes)
        """Files read for raw memory alone (their records are current)."""
        self.memory_total = len(self.memory)
        self.files_total = len(self.pending)
        self.bytes_total = sum(self.pending.values())
        self.files_done = 0
        self.bytes_done = 0
        self.searchable = searchable
        self.started = time.time() if now is None else now
        # Nothing to read: caught up from the start.
        self.finished: float | None = None if self.pending else self.started

    def done(self, paths: Iterable[Path], now: float | None = None) -> bool:
        """``paths`` were read to their end; ``True`` when this made the catch-up finish."""
        if self.finished is not None:
            return False
        for path in paths:
            size = self.pending.pop(path, None)
            if size is not None:
                self.memory.discard(path)
                self.files_done += 1
                self.bytes_done += size
        return self.check(now)

    def check(self, now: float | None = None) -> bool:
        """Finish once nothing is left to read and the indexes hold it all; ``True`` when this finished it."""
        if self.finished is not None or self.pending or not self.searchable():
            return False
        self.finished = time.time() if now is None else now
        return True

    def memory_due(self) -> list[Path]:
        """The files still to read for raw memory alone, in the order they were given (newest first)."""
        return [path for path in self.pending if path in self.memory]

    def info(self, now: float | None = None) -> CatchUpInfo:
        end = self.finished if self.finished is not None else time.time() if now is None else now
        seconds = max(0.0, end - self.started)
        rate = self.bytes_done / seconds if seconds > 0 and self.bytes_done else None
        left = self.bytes_total - self.bytes_done
        return CatchUpInfo(
            files_total=self.files_total,
            files_done=self.files_done,
            bytes_total=self.bytes_total,
            bytes_done=self.bytes_done,
            started=iso(self.started),
            finished=iso(self.finished) if self.finished is not None else None,
            seconds=round(seconds, 1),
            bytes_per_second=round(rate) if rate else None,
            eta_seconds=round(left / rate, 1) if rate and self.finished is None else None,
            memory_files_total=self.memory_total,
            memory_files_done=self.memory_total - len(self.memory),
        )
