"""SQLite opened one way: the service state, the summary store and the search index share it.

* **WAL and one busy timeout**: ``status`` and queries read while the service writes, and a
  writer that finds the lock taken waits ``BUSY_TIMEOUT_SECONDS`` before giving up.
* **synchronous per durability**: ``"full"`` where a row must not outlive, after a power cut,
  the files it vouches for (the service's cursors) or was paid for (summaries); ``"normal"``
  for what is rebuilt from the archive (the search index).
* **explicit transactions** (``isolation_level=None``): ``transaction`` takes the write lock up
  front (``BEGIN IMMEDIATE``), so a read-then-write never fails halfway on a lock upgrade the
  busy timeout cannot wait for.
* **numbered migrations** recorded in ``_migrations(name, applied_at)``, as
  ``llm/migrations.py`` does; each one commits together with its row.
* **private files**: the folder 0700, the database and its ``-wal``/``-shm`` 0600 whatever the
  umask; ``search.db`` holds every exchange and raw tool output.
* **a minimum SQLite**: 3.34, the first with the trigram tokenizer literal search needs.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Literal, TypeVar

from pbot_watch.archive.atomic import DIR_MODE, FILE_MODE, ensure_dir
from pbot_watch.errors import PbotWatchError

T = TypeVar("T")
Durability = Literal["full", "normal"]
Migration = Callable[[sqlite3.Connection], None]
Migrations = Sequence[tuple[str, Migration]]
"""``(name, function)`` in the order they apply; a name is recorded once applied and never reused."""

BUSY_TIMEOUT_SECONDS = 10.0
WAL_SIZE_LIMIT = 64 << 20
"""What a ``-wal`` file is cut back to each time SQLite starts it over (``journal_size_limit``).

A WAL file otherwise keeps the size of the longest stretch without a checkpoint that could
finish: on a first run over 634 MB, the service's writers and readers were never all done at
once, and ``search.db-wal`` reached 116-243 MB and stayed that size on disk while the service
ran. Not 16 MB, where the automatic checkpoint starts (1,000 of ``search.db``'s 16 KB pages):
cut back that far and grown again all through a first run, the 634 MB one took 0.6-2.6 s longer
than with no limit or with 64 MB, in each of four back-to-back pairs of runs."""
MIN_VERSION = (3, 34, 0)
SIDE_FILES = ("-wal", "-shm")


class SQLiteTooOld(PbotWatchError):
    """The SQLite library Python was built with lacks what our databases need."""

    def __init__(self, version: str) -> None:
        needed = ".".join(map(str, MIN_VERSION))
        super().__init__(
            f"SQLite {needed} or newer is needed (for the trigram tokenizer); this Python uses"
            f" SQLite {version}: use a Python built against a newer SQLite"
        )


def check_version(version: tuple[int, int, int] = sqlite3.sqlite_version_info) -> None:
    """Raise ``SQLiteTooOld`` before anything is opened, rather than failing on the first FTS table."""
    if version < MIN_VERSION:
        raise SQLiteTooOld(".".join(map(str, version)))


def connect(
    path: Path, durability: Durability, *, threads: bool = False, page_size: int | None = None
) -> sqlite3.Connection:
    """Open (or create) the database at ``path`` with our policy; ``threads`` lets threads share it.

    A connection shared between threads needs its callers to serialise their use of it
    (``SummaryStore`` holds a lock); by default it stays on the thread that opened it.
    ``page_size``: of a database created by this connection (SQLite ignores it for an existing one).
    """
    check_version()
    private_dir(path.parent)
    private_file(path)
    conn = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=not threads
    )
    try:
        if page_size is not None:
            conn.execute(f"PRAGMA page_size = {int(page_size)}")  # before WAL: it fixes the page size
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
        conn.execute(f"PRAGMA synchronous = {durability.upper()}")
    except BaseException:
        conn.close()
        raise
    return conn


def private_dir(path: Path) -> None:
    """Create ``path`` 0700, or take group and other access away from an existing one.

    Older versions created the state folder with the umask's mode (0755 with the usual 022).
    A folder we may not change (someone else's) is left as it is: the files in it are private.
    So is a folder everyone shares (the sticky bit: ``/tmp``), where a database opened directly
    (a benchmark's, a script's) would otherwise close the folder to every other user.
    """
    ensure_dir(path)
    with contextlib.suppress(OSError):
        mode = path.stat().st_mode
        if mode & 0o077 and not mode & stat.S_ISVTX:
            path.chmod(DIR_MODE)


def private_file(path: Path) -> None:
    """Make the database file (creating it empty) and any ``-wal``/``-shm`` beside it 0600.

    SQLite creates its ``-wal`` and ``-shm`` files with the database file's mode, so a database
    file created 0600 here keeps every later one private; the chmods cover files an older
    version left world-readable. A file we may not change is left to SQLite to open or refuse.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        pass
    else:
        os.fchmod(fd, FILE_MODE)  # the umask may have taken bits away; exactly 0600
        os.close(fd)
    for suffix in ("", *SIDE_FILES):
        with contextlib.suppress(OSError):
            existing = Path(f"{path}{suffix}")
            if existing.stat().st_mode & 0o777 != FILE_MODE:
                existing.chmod(FILE_MODE)


def is_busy(error: sqlite3.Error) -> bool:
    """Whether ``error`` says another connection holds the file (busy or locked), not that it is bad."""
    return (getattr(error, "sqlite_errorcode", 0) & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def is_corrupt(error: sqlite3.Error) -> bool:
    """Whether ``error`` says the file is damaged or no database at all (not busy, not full)."""
    return (getattr(error, "sqlite_errorcode", 0) & 0xFF) in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def remove(path: Path) -> None:
    """Delete a database with its ``-wal`` and ``-shm`` (only for derived data, rebuilt after)."""
    for suffix in ("", *SIDE_FILES):
        with contextlib.suppress(FileNotFoundError):
            Path(f"{path}{suffix}").unlink()


def set_aside(path: Path) -> Path:
    """Move a damaged database out of the way (kept beside it for a look) and drop its side files.

    For state that is not free to rebuild (the service's cursors, paid-for summaries): the
    next open starts afresh, and the old file is there for ``sqlite3 .recover``. An earlier
    damaged copy is replaced.
    """
    aside = path.with_name(path.name + ".corrupt")
    path.replace(aside)
    remove(path)  # its -wal and -shm
    return aside


def is_intact(conn: sqlite3.Connection) -> bool:
    """``PRAGMA quick_check``: every page readable and well formed (milliseconds for tens of MB)."""
    return conn.execute("PRAGMA quick_check(1)").fetchall() == [("ok",)]


LOCK_POLL_SECONDS = 0.002
"""How often a writer waiting for the write lock asks for it again (``begin_immediate``)."""


def begin_immediate(conn: sqlite3.Connection, wait_ms: int | None = None) -> None:
    """``BEGIN IMMEDIATE``, asking for the write lock every ``LOCK_POLL_SECONDS`` for ``wait_ms``
    (the connection's busy timeout by default), then raising SQLite's busy error.

    SQLite's own busy handler sleeps 1, 2, 5, ... ms and then 100 ms between tries: a writer that
    has waited long asks least often, so on a first run the service's history index, whose
    transactions are short, kept losing the lock to raw memory's build workers that had just
    begun waiting, and finished last (91 s of a 634 MB run, 64 s before raw memory's writes grew
    shorter). Every waiter asking at the same short interval takes the lock in about the order
    it is freed, whoever waited longest included.
    """
    (timeout,) = conn.execute("PRAGMA busy_timeout").fetchone()
    wait_ms = timeout if wait_ms is None else wait_ms
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as error:
                if not is_busy(error) or time.monotonic() >= deadline:
                    raise
            else:
                return
            time.sleep(LOCK_POLL_SECONDS)
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout)}")


@contextmanager
def transaction(conn: sqlite3.Connection, *, immediate: bool = True) -> Iterator[None]:
    """One write transaction: everything inside commits together, or nothing does.

    A failed statement or ``COMMIT`` (disk full, busy) leaves no transaction open behind it:
    SQLite may already have rolled back itself, and a ``COMMIT`` that failed has not.
    ``immediate=False`` is for a reader that writes only its own temp tables: it takes no
    lock on the database other processes write.
    """
    if immediate:
        begin_immediate(conn)
    else:
        conn.execute("BEGIN")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def try_write(conn: sqlite3.Connection, work: Callable[[], T], wait_ms: int) -> T | None:
    """``work()`` in a write transaction, or ``None`` when the lock is busy past ``wait_ms`` or
    the database cannot be written: a reader that keeps something for later readers (a tally,
    a ranking) never waits on the service's writes for it, and answers all the same.
    """
    try:
        begin_immediate(conn, wait_ms)
    except sqlite3.OperationalError:
        return None
    try:
        result = work()
        conn.execute("COMMIT")
    except sqlite3.OperationalError:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        return None
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result


def execute_script(conn: sqlite3.Connection, sql: str) -> None:
    """Run ``sql``'s statements one by one: ``executescript`` would commit the open transaction."""
    statement = ""
    for line in sql.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            conn.execute(statement)
            statement = ""
    if statement.strip():
        conn.execute(statement)


def migrate(conn: sqlite3.Connection, migrations: Migrations) -> list[str]:
    """Apply every migration not yet recorded, in order; return the names applied now.

    Each migration and its ``_migrations`` row commit together, so a crash never half-applies
    one; the check is repeated under the write lock, so two processes opening the same database
    at once apply each migration once. A database where everything is applied is only read.
    """
    conn.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    _rename_applied_column(conn)
    done = {row[0] for row in conn.execute("SELECT name FROM _migrations")}
    applied: list[str] = []
    for name, func in migrations:
        if name in done:
            continue
        with transaction(conn):
            if conn.execute("SELECT 1 FROM _migrations WHERE name = ?", (name,)).fetchone() is not None:
                continue
            func(conn)
            conn.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", (name, time.time()))
        applied.append(name)
    return applied


def _rename_applied_column(conn: sqlite3.Connection) -> None:
    # The service state recorded migrations in a column named ``applied``; one shape for all.
    def columns() -> set[str]:
        return {row[1] for row in conn.execute("PRAGMA table_info(_migrations)")}

    if "applied_at" in columns():
        return
    with transaction(conn):
        if "applied_at" not in columns():
            conn.execute("ALTER TABLE _migrations RENAME COLUMN applied TO applied_at")
