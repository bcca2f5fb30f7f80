"""The service's persistent state: one cursor per session file, in SQLite under ``state_dir``.

A cursor row says how far a file was read and what its first bytes and the bytes before the
offset looked like (``pbot_watch.pi.cursor.Cursor``). The tailer writes a row only *after*
the record built from those bytes is on disk, so a ``kill -9`` between the two leaves an old
cursor: the next start re-reads and finds the record already equal (nothing lost, nothing
duplicated). Schema changes are numbered migrations ``m001_...`` (``pbot_watch.sqlite.migrate``),
so an old state file upgrades in place.

Cursors are worth keeping, not worth stopping for: ``StateStore`` degrades to memory when
SQLite fails and says so (``error``, ``unsaved``) for status.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import structlog

from pbot_watch.pi.cursor import Cursor
from pbot_watch.service.schedule import RETRY_SECONDS
from pbot_watch.sqlite import (
    BUSY_TIMEOUT_SECONDS,
    Migrations,
    connect,
    is_corrupt,
    migrate,
    set_aside,
    transaction,
)

log = structlog.get_logger("pbot_watch.service")

# While the database is failing, a retry waits this long for a lock, not the full busy timeout:
# the consumer thread, which also reads the sessions, must not stall on every retry.
RETRY_BUSY_SECONDS = 0.2

STATE_FILE = "state.sqlite3"


def m001_files(db: sqlite3.Connection) -> None:
    # ``path`` is the key because watch events name paths; (dev, ino) only decides whether the
    # file behind a path is still the one the cursor describes.
    db.execute(
        """
        CREATE TABLE files (
            path TEXT PRIMARY KEY,
            dev INTEGER NOT NULL,
            ino INTEGER NOT NULL,
            offset INTEGER NOT NULL,
            head TEXT NOT NULL,
            tail TEXT NOT NULL,
            session_id TEXT,
            workspace TEXT,
            updated REAL NOT NULL
        )
        """
    )
    # Finding every file of a session id (an /import copy) when one of them changes.
    db.execute("CREATE INDEX files_session ON files(session_id)")


def m002_files_skipped(db: sqlite3.Connection) -> None:
    # A record that could not be written (workspace missing or read-only) is retried at the
    # next start even though its cursor is current.
    db.execute("ALTER TABLE files ADD COLUMN skipped INTEGER NOT NULL DEFAULT 0")


def m003_files_whole(db: sqlite3.Connection) -> None:
    # A same-size rewrite (new mtime, same length) is told from a touch by the fingerprint of
    # every byte up to the offset. Old rows get 0 and "": trusted once, then refreshed.
    db.execute("ALTER TABLE files ADD COLUMN mtime_ns INTEGER NOT NULL DEFAULT 0")
    db.execute("ALTER TABLE files ADD COLUMN whole TEXT NOT NULL DEFAULT ''")


MIGRATIONS: Migrations = [
    ("m001_files", m001_files),
    ("m002_files_skipped", m002_files_skipped),
    ("m003_files_whole", m003_files_whole),
]


@dataclass(frozen=True, slots=True)
class FileState:
    """What the state remembers of one session file."""

    path: Path
    cursor: Cursor
    session_id: str | None
    workspace: str | None
    skipped: bool = False


class StateStore:
    """The SQLite file of one service instance; used from the service's consumer thread only.

    Nothing here stops the service: cursors are only an optimisation (without them every file
    is read again and every record found unchanged). When the database cannot be written
    (disk full, another process holding its write lock past the busy timeout) the rows wait
    in memory and are retried after 1, 5, 30, then every 120 seconds, with a short busy
    timeout so a retry never stalls reading; ``error`` says why, for status. A database that
    cannot be opened at start is retried the same way (the service starts with no cursors);
    one that is corrupt is set aside as ``state.sqlite3.corrupt`` and started afresh.
    """

    def __init__(
        self,
        state_dir: Path,
        on_error: Callable[[str], None] | None = None,
        retry_seconds: tuple[float, ...] = RETRY_SECONDS,
    ) -> None:
        self.path = state_dir / STATE_FILE
        self.on_error = on_error
        self.retry_seconds = retry_seconds
        self.db: sqlite3.Connection | None = None
        self.applied: list[str] = []
        self.error: str | None = None
        self.warnings: list[str] = []
        # Rows not written yet, by path: a row to write, or None for a forgotten file.
        self._unsaved: dict[str, tuple[object, ...] | None] = {}
        self._attempts = 0
        self._retry_at = 0.0
        self._open()

    @property
    def unsaved(self) -> int:
        """Cursor changes kept in memory until the database takes them."""
        return len(self._unsaved)

    def close(self) -> None:
        """One last attempt to write what waits (with the short timeout), then close."""
        if self._unsaved:
            self._flush()
        if self.db is not None:
            self.db.close()
            self.db = None

    def files(self) -> Iterator[FileState]:
        """The saved cursors; none while the database cannot be read (every file is read again)."""
        if self.db is None:
            return
        try:
            rows = self.db.execute(
                f"SELECT path, {', '.join(Cursor.COLUMNS)}, session_id, workspace, skipped FROM files"
            ).fetchall()
        except sqlite3.Error as error:
            self._failed(error, "read")
            return
        width = len(Cursor.COLUMNS)
        for path, *values in rows:
            session_id, workspace, skipped = values[width:]
            yield FileState(
                Path(path), Cursor.from_row(tuple(values[:width])), session_id, workspace, bool(skipped)
            )

    def save(self, states: Iterable[FileState]) -> None:
        """Write cursors in one transaction (callers pass only files whose records are on disk)."""
        now = time.time()
        for s in states:
            self._unsaved[str(s.path)] = (
                str(s.path),
                *s.cursor.row(),
                s.session_id,
                s.workspace,
                int(s.skipped),
                now,
            )
        self.retry()

    def forget(self, paths: Iterable[Path]) -> None:
        """Deleted files: their cursors go, their records stay where they are."""
        for path in paths:
            self._unsaved[str(path)] = None
        self.retry()

    def retry(self, now: float | None = None) -> None:
        """Write what waits, unless a failure's back-off has not ended yet (called every tick)."""
        if not self._unsaved and self.db is not None:
            return
        if self.error is not None and (time.monotonic() if now is None else now) < self._retry_at:
            return
        if self.db is None and not self._open():
            return
        self._flush()

    # ---- the database ------------------------------------------------------------------------
    def _open(self) -> bool:
        try:
            self.db = connect(self.path, "full")
            self.applied = migrate(self.db, MIGRATIONS)
        except sqlite3.Error as error:
            self._close_quietly()
            if is_corrupt(error):
                return self._start_afresh(error)
            self._failed(error, "open")
            return False
        except OSError as error:
            self._close_quietly()
            self._failed(error, "open")
            return False
        if self.error is not None:
            self._busy_timeout(RETRY_BUSY_SECONDS)  # until the next write succeeds
        return True

    def _start_afresh(self, error: sqlite3.Error) -> bool:
        """A corrupt state: keep it aside for a look, start empty (every file is read again)."""
        try:
            aside = set_aside(self.path)
        except OSError as failure:
            self._failed(failure, "set aside")
            return False
        message = (
            f"the service state {self.path} was unreadable ({error}); it is kept as {aside.name}"
            " and started afresh: every session file is read again once"
        )
        self.warnings.append(message)
        log.warning("state_started_afresh", path=str(self.path), error=str(error))
        return self._open()

    def _flush(self) -> None:
        if self.db is None:
            return
        rows = list(self._unsaved.items())
        if not rows:
            self._recovered(0)
            return
        try:
            with transaction(self.db):
                self.db.executemany(
                    "DELETE FROM files WHERE path = ?", [(path,) for path, row in rows if row is None]
                )
                self.db.executemany(
                    f"INSERT OR REPLACE INTO files (path, {', '.join(Cursor.COLUMNS)},"
                    " session_id, workspace, skipped, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [row for _, row in rows if row is not None],
                )
        except sqlite3.Error as error:
            if is_corrupt(error):
                self._close_quietly()
                if self._start_afresh(error):
                    self._flush()
                return
            self._failed(error, "write")
            return
        for path, row in rows:
            if self._unsaved.get(path, row) == row:
                self._unsaved.pop(path, None)
        self._recovered(len(rows))

    def _recovered(self, rows: int) -> None:
        if self.error is not None:
            log.info("state_saved_again", rows=rows, after=self.error)
            self.error = None
            self._attempts = 0
            self._busy_timeout(BUSY_TIMEOUT_SECONDS)

    def _failed(self, error: Exception, doing: str) -> None:
        """Remember why, back off, and tell status (once per new reason)."""
        message = f"cannot {doing} the service state {self.path}: {error}; cursors are kept in memory"
        self._attempts += 1
        delay = self.retry_seconds[min(self._attempts, len(self.retry_seconds)) - 1]
        self._retry_at = time.monotonic() + delay
        if message != self.error:
            log.error("state_save_failed", path=str(self.path), doing=doing, error=str(error))
            if self.on_error is not None:
                self.on_error(message)
        self.error = message
        self._busy_timeout(RETRY_BUSY_SECONDS)

    def _busy_timeout(self, seconds: float) -> None:
        if self.db is not None:
            with contextlib.suppress(sqlite3.Error):
                self.db.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")

    def _close_quietly(self) -> None:
        if self.db is not None:
            with contextlib.suppress(sqlite3.Error):
                self.db.close()
        self.db = None
