"""The service's persistent state: one cursor per session file, in SQLite under ``state_dir``.

A cursor row says how far a file was read and what its first bytes and the bytes before the
offset looked like (``pbot_watch.pi.cursor.Cursor``). The tailer writes a row only *after*
the record built from those bytes is on disk, so a ``kill -9`` between the two leaves an old
cursor: the next start re-reads and finds the record already equal (nothing lost, nothing
duplicated). Schema changes are numbered migrations ``m001_...`` recorded in ``_migrations``,
as ``llm/migrations.py`` does, so an old state file upgrades in place.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pbot_watch.archive.atomic import ensure_dir
from pbot_watch.pi.cursor import Cursor

STATE_FILE = "state.sqlite3"

Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: list[tuple[str, Migration]] = []


def migration(func: Migration) -> Migration:
    """Register ``func`` as the next migration; its name (``m001_...``) is its identity forever."""
    MIGRATIONS.append((func.__name__, func))
    return func


@migration
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


@migration
def m002_files_skipped(db: sqlite3.Connection) -> None:
    # A record that could not be written (workspace missing or read-only) is retried at the
    # next start even though its cursor is current.
    db.execute("ALTER TABLE files ADD COLUMN skipped INTEGER NOT NULL DEFAULT 0")


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
        ensure_dir(state_dir)
        self.path = state_dir / STATE_FILE
        # isolation_level=None: we open transactions explicitly, so a batch of cursors is one commit.
        self.db = sqlite3.connect(self.path, isolation_level=None, timeout=5)
        self.db.execute("PRAGMA journal_mode=WAL")
        # FULL: a cursor must not survive a power cut that the record it covers did not survive.
        self.db.execute("PRAGMA synchronous=FULL")
        self.applied = migrate(self.db)

    def close(self) -> None:
        self.db.close()

    def files(self) -> Iterator[FileState]:
        rows = self.db.execute(
            "SELECT path, dev, ino, offset, head, tail, session_id, workspace, skipped FROM files"
        )
        for path, dev, ino, offset, head, tail, session_id, workspace, skipped in rows:
            yield FileState(
                Path(path), Cursor(dev, ino, offset, head, tail), session_id, workspace, bool(skipped)
            )

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
                s.session_id,
                s.workspace,
                int(s.skipped),
                now,
            )
            for s in states
        ]
        if not rows:
            return
        with self._transaction():
            self.db.executemany(
                "INSERT OR REPLACE INTO files (path, dev, ino, offset, head, tail, session_id, workspace,"
                " skipped, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

    def forget(self, paths: Iterable[Path]) -> None:
        """Deleted files: their cursors go, their records stay where they are."""
        rows = [(str(p),) for p in paths]
        if rows:
            with self._transaction():
                self.db.executemany("DELETE FROM files WHERE path = ?", rows)

    def _transaction(self) -> _Transaction:
        return _Transaction(self.db)


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, value: object, tb: object) -> None:
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")


def migrate(db: sqlite3.Connection) -> list[str]:
    """Apply every migration not yet recorded; return the names applied now."""
    db.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied REAL NOT NULL)")
    done = {row[0] for row in db.execute("SELECT name FROM _migrations")}
    applied: list[str] = []
    for name, func in MIGRATIONS:
        if name in done:
            continue
        # Each migration and its bookkeeping row commit together: a crash never half-applies one.
        db.execute("BEGIN IMMEDIATE")
        try:
            func(db)
            db.execute("INSERT INTO _migrations (name, applied) VALUES (?, ?)", (name, time.time()))
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        applied.append(name)
    return applied
