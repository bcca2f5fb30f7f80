"""The start scan's catch-up: which files it still has to read, and how fast it goes, for status.

On a first run over a long history the service reads every session file once before it is
caught up; that takes a while, and ``pbot-watch status`` says how far it is (files and bytes
done, rate, time left). Files are counted at the size the start scan saw; a file appended to
meanwhile is read once, whole, and counts once.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from pbot_watch.service.status import CatchUpInfo, iso


class CatchUp:
    """Files the start scan found changed, and the progress of reading them."""

    def __init__(self, sizes: Mapping[Path, int], now: float | None = None) -> None:
        self.pending: dict[Path, int] = dict(sizes)
        self.files_total = len(self.pending)
        self.bytes_total = sum(self.pending.values())
        self.files_done = 0
        self.bytes_done = 0
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
                self.files_done += 1
                self.bytes_done += size
        if self.pending:
            return False
        self.finished = time.time() if now is None else now
        return True

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
        )
