"""The service's persistent state: one cursor per session file, in SQLite under ``state_dir``.

A cursor row says how far a file was read and what its first bytes and the bytes before the
offset looked like (``pbot_watch.pi.cursor.Cursor``). The tailer writes a row only *after*
the record built from those bytes is on disk, so a ``kill -9`` between the two leaves an old
cursor: the next start re-reads and finds the record already equal (nothing lost, nothing
duplicated). Schema changes are numbered migrations ``m001_...`` (``pbot_watch.sqlite.migrate``),
so an old state file upgrades in place.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pbot_watch.pi.cursor import Cursor
from pbot_watch.sqlite import Migrations, connect, migrate, transaction

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
    """The SQLite file of one service instance; used from the service's consumer thread only."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / STATE_FILE
        # full: a cursor must not survive a power cut that the record it covers did not survive.
        self.db = connect(self.path, "full")
        self.applied = migrate(self.db, MIGRATIONS)

    def close(self) -> None:
        self.db.close()

    def files(self) -> Iterator[FileState]:
        rows = self.db.execute(
            "SELECT path, dev, ino, offset, head, tail, mtime_ns, whole, session_id, workspace, skipped"
            " FROM files"
        )
        for path, dev, ino, offset, head, tail, mtime_ns, whole, session_id, workspace, skipped in rows:
            cursor = Cursor(dev, ino, offset, head, tail, mtime_ns, whole)
            yield FileState(Path(path), cursor, session_id, workspace, bool(skipped))

    def save(self, states: Iterable[FileState]) -> None:
        """Write cursors in one transaction (callers pass only files whose records are on disk)."""
        now = time.time()
        rows = [
            (
                str(s.path),
                s.cursor.dev,
                s.cursor.ino,
                s.cursor.offset,
                s.cursor.head,
                s.cursor.tail,
                s.cursor.mtime_ns,
                s.cursor.whole,
                s.session_id,
                s.workspace,
                int(s.skipped),
                now,
            )
            for s in states
        ]
        if not rows:
            return
        with transaction(self.db):
            self.db.executemany(
                "INSERT OR REPLACE INTO files (path, dev, ino, offset, head, tail, mtime_ns, whole,"
                " session_id, workspace, skipped, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

    def forget(self, paths: Iterable[Path]) -> None:
        """Deleted files: their cursors go, their records stay where they are."""
        rows = [(str(p),) for p in paths]
        if rows:
            with transaction(self.db):
                self.db.executemany("DELETE FROM files WHERE path = ?", rows)
