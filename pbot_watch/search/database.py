"""``search.db``'s one owner: opening it, its two table families' versions, and damage.

``search.db`` holds two families of derived tables: history search (``search/index.py``:
records -> nodes and their FTS tables) and raw memory (``memory/index.py``: session files ->
sources). Nothing in it is a source of truth, so this module answers once, for both:

* **Versions.** Each family records its version in ``meta``. History's tables hold ``meta``
  itself, so a file that is no database at all, or whose history family is of another
  version (``open_file``'s ``fits``), is deleted and built anew. A family of another version
  inside a sound file (raw memory, ``ensure_family``) has its own tables dropped and made
  empty; the other family is kept.
* **Damage.** SQLite reports a damaged page only when something reads it (``database disk
  image is malformed``). Whoever meets it asks its question once more of a file started
  afresh (``asked_again_on_damage``): the next refresh rebuilds what the file held. The file
  is deleted (``start_afresh``), never set aside: ``sqlite.set_aside`` is for what cannot be
  rebuilt, the service's cursors and paid-for summaries.
* **Integrity.** ``PRAGMA quick_check`` reads every page, a second or more for a big index, so
  it runs where a whole pass follows anyway: ``reindex`` checks first (``damage_found``), and
  replaces a damaged file before a long rebuild meets a bad page halfway.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pbot_watch.archive.atomic import FILE_MODE
from pbot_watch.sqlite import connect, is_busy, is_corrupt, is_intact, private_dir, remove, transaction

T = TypeVar("T")

INDEX_FILE = "search.db"
BUILD_LOCK = ".lock"
"""Suffix of the file whose ``flock`` keeps openers looking at ``search.db`` and its one builder apart."""

PAGE_SIZE = 16 << 10
"""Of a new ``search.db``: raw memory's compressed texts (a few hundred bytes to a few KB each)
leave a quarter of a 4 KB page unused on average, and 1/30 of a 16 KB one (on the generated 634 MB
corpus, 586 MB vacuumed with 4 KB pages, 574 with 8 KB, 568 with 16 KB). An existing file keeps its own."""


def index_path(state_dir: Path) -> Path:
    return state_dir / INDEX_FILE


@dataclass(frozen=True)
class Family:
    """A family of tables in ``search.db`` that is rebuilt, never migrated, when its version changes."""

    version_key: str
    """Its row in ``meta``."""
    version: int
    tables: Sequence[str]
    """Every table it has had (older ones too), dropped when it is rebuilt."""
    statements: Sequence[str]
    """``CREATE`` statements, run in order."""


def version_of(conn: sqlite3.Connection, key: str) -> int | None:
    """A family's version as ``meta`` records it; ``None`` when not recorded (or no ``meta`` yet)."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    except sqlite3.OperationalError as error:
        if is_busy(error):
            raise
        return None
    return int(row[0]) if row else None


def open_file(
    path: Path, fits: Callable[[sqlite3.Connection], bool], create: Callable[[sqlite3.Connection], None]
) -> sqlite3.Connection:
    """``search.db`` opened, or built anew by ``create`` when it is no database or does not ``fits``.

    Normal durability: everything here is rebuilt from the archive after a power cut. The
    service, two build workers and a query may open a missing file at once, and building anew
    deletes the file with its ``-wal`` and ``-shm``, so the look and the build exclude each
    other (``_locked``): every opener looks under a shared ``flock``, one builder at a time
    holds it exclusively and looks again first. A look is not harmless to a build beside it:
    a connection to the file being deleted makes a new ``-wal`` by its name, which the new
    file then shares, and closing it deletes that ``-wal`` with the builder's committed rows
    (a worker's store left ``malformed``, a row missing).
    """
    with _locked(path, fcntl.LOCK_SH):
        conn = _fitting(path, fits)
    if conn is not None:
        return conn
    with _locked(path, fcntl.LOCK_EX):
        conn = _fitting(path, fits)  # made by another while this one waited
        if conn is not None:
            return conn
        start_afresh(path)
        conn = connect(path, "normal", page_size=PAGE_SIZE)
        with transaction(conn):
            create(conn)
        return conn


def _fitting(path: Path, fits: Callable[[sqlite3.Connection], bool]) -> sqlite3.Connection | None:
    """The file opened when it is a database that ``fits``, else ``None`` (and nothing changed).

    A busy or locked file is an error of its own, raised: taking it for one that does not fit
    would delete another process's rows. A missing or empty file is not looked into: only the
    builder makes one, since lookers that each turn a new empty file into WAL need its lock
    at once and SQLite answers one of them ``database is locked`` without waiting.
    """
    try:
        if path.stat().st_size == 0:
            return None
    except FileNotFoundError:
        return None
    try:
        conn = connect(path, "normal", page_size=PAGE_SIZE)
    except sqlite3.DatabaseError as error:
        if is_busy(error):
            raise
        return None
    try:
        if fits(conn):
            return conn
    except sqlite3.DatabaseError as error:
        if is_busy(error):
            conn.close()
            raise
    conn.close()
    return None


@contextmanager
def _locked(path: Path, kind: int) -> Iterator[None]:
    """A ``flock`` of ``kind`` on ``search.db.lock`` beside the file, released on close or exit."""
    private_dir(path.parent)
    fd = os.open(f"{path}{BUILD_LOCK}", os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        fcntl.flock(fd, kind)
        yield
    finally:
        os.close(fd)


def ensure_family(conn: sqlite3.Connection, family: Family) -> None:
    """Create ``family``'s tables, or rebuild them empty when they are of another version.

    One read when they are current (every query calls this); the check is repeated inside the
    write transaction so two processes opening a fresh database create the tables once.
    """
    if version_of(conn, family.version_key) == family.version:
        return
    with transaction(conn):
        if version_of(conn, family.version_key) == family.version:
            return
        for table in family.tables:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
        for statement in family.statements:
            conn.execute(statement)
        conn.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (family.version_key, str(family.version))
        )


def start_afresh(path: Path) -> None:
    """Delete ``search.db`` with its ``-wal`` and ``-shm``: a damaged page cannot be trusted in place."""
    remove(path)


def damage_found(conn: sqlite3.Connection) -> str | None:
    """What ``PRAGMA quick_check`` says of a damaged file, or ``None`` when every page is sound."""
    try:
        if is_intact(conn):
            return None
    except sqlite3.DatabaseError as error:
        if not is_corrupt(error):
            raise
        return str(error)
    return "PRAGMA quick_check found damaged pages"


def asked_again_on_damage(
    work: Callable[[sqlite3.DatabaseError | None], T], afresh: Callable[[sqlite3.DatabaseError], None]
) -> T:
    """``work(None)``; when it meets damage, ``afresh(damage)`` and then ``work(damage)``, once.

    Only damage is answered so (``sqlite.is_corrupt``): a busy or full database is an error
    of its own, and a second damage on a file just built is not hidden by a third try.
    """
    try:
        return work(None)
    except sqlite3.DatabaseError as error:
        if not is_corrupt(error):
            raise
        damage = error
    afresh(damage)
    return work(damage)
