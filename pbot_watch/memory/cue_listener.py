"""The service keeps the cue ledgers of marathon sessions from the entries it parses, and saves them for Pi.

A Pi child asked for the cues of a session it never saw (Pi restarted on it, or ``/resume``)
would otherwise read the whole file first: 15 s for 300 MB on a busy machine, while the
extension waits 10. The service reads every byte of every session file anyway; the entries
it decodes for the records are handed here too (``EntriesFollower``, as raw memory's are), fed
to the same ``CueLedger`` the child would compute, and saved where the child looks
(``cue_follow.ledger_store``). The child then loads the ledger in a fraction of a second and
reads only the bytes appended after it. One parse per append, not two.

Only files from ``SAVED_FROM`` on are kept (a smaller one is read whole by the child in well
under a second), the two most recently read ones in memory. A ledger is saved when its reading
reaches the file's end with a megabyte or more read since its last save (or none saved yet),
so a saved ledger is at most about a megabyte of appends behind, and every 64 MB of a first
read of a marathon session (not after each piece the service reads). When the entries do not go on where the ledger
stands (the service restarted and the saved ledger is older, or the file crossed
``SAVED_FROM``), the file is read from the ledger's own cursor, once, and is back in step.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from pbot_watch.log import get_logger
from pbot_watch.memory.cue_follow import (
    LEDGER_HEAD,
    SAVED_FROM,
    FollowedCues,
    LedgerRefused,
    NotASession,
    ledger_head,
    ledger_store,
)

if TYPE_CHECKING:
    from pbot_watch.archive.stamp import FileStamp
    from pbot_watch.indexer import EntriesRead

log = get_logger(__name__)

SERVICE_LEDGERS = 2
"""Ledgers the service holds in memory (30 MB each at 300 MB): the sessions being appended to; the
others wait on disk, and load in a tenth of a CPU second when their file grows again."""
SAVE_AFTER = 1 << 20
"""Appended bytes after which a held ledger is saved again: what a child may have to read itself."""


class CueLedgerFollower:
    """Keeps and saves the cue ledgers of the big session files the service reads (``EntriesFollower``)."""

    def __init__(self, state_dir: Path, saved_from: int = SAVED_FROM) -> None:
        self.saved_from = saved_from
        self.cues = FollowedCues(ledger_store(state_dir), keep=SERVICE_LEDGERS, saved_from=saved_from)
        self._lock = threading.Lock()
        """The reading thread feeds, the catch-up syncs: one ledger store."""

    def __call__(self, read: EntriesRead) -> None:
        with self._lock:
            if read.cursor.offset < self.saved_from and not self._big(read.path):
                return
            try:
                if not self.cues.take(read.path, read.header, read.start, read.entries, read.cursor):
                    self.cues.ledger(read.path)  # the file's beginning is unknown here: read it, once
            except (OSError, NotASession) as error:  # gone or replaced meanwhile: the next read says so
                log.info("cue_ledger_not_kept", path=str(read.path), error=str(error)[:200])
                return
            self.cues.save_due(read.path, at_end=read.stamp.size >= _size(read.path), after=SAVE_AFTER)

    def stale(self, stamps: dict[Path, FileStamp]) -> list[Path]:
        """Of these files (path: stamp now), the big ones whose saved ledger is missing, foreign or behind."""
        store = self.cues.store
        assert store is not None
        stale = []
        for path, stamp in stamps.items():
            if stamp.size < self.saved_from:
                continue
            stored = self.cues.saved_file(path)
            try:
                assert stored is not None
                with stored.open("rb") as handle:
                    head = ledger_head(handle.read(LEDGER_HEAD))
            except (OSError, LedgerRefused):
                stale.append(path)
                continue
            _dev, ino, offset, *_ = head.cursor
            if not head.current(path) or ino != stamp.ino or offset + SAVE_AFTER < stamp.size:
                stale.append(path)
        return stale

    def sync(self, path: Path) -> int:
        """Bring ``path``'s saved ledger up to date by reading it (from the saved one's cursor); bytes read."""
        with self._lock:
            if not self._big(path):
                return 0
            before = self.cues.bytes_read
            try:
                self.cues.ledger(path)
            except (OSError, NotASession) as error:
                log.info("cue_ledger_not_kept", path=str(path), error=str(error)[:200])
            else:
                self.cues.save_due(path, at_end=True, after=SAVE_AFTER)
            return self.cues.bytes_read - before

    def status(self) -> dict[str, int]:
        """For status: reads fed as parsed, and the session bytes the ledgers had to read themselves."""
        return {"reads_fed": self.cues.taken, "bytes_read_itself": self.cues.bytes_read}

    def close(self) -> None:
        """Save what the ledgers took since their last save (the service stops)."""
        with self._lock:
            self.cues.save_all()

    def _big(self, path: Path) -> bool:
        return _size(path) >= self.saved_from


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
