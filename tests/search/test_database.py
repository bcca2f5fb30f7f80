"""``search/database.py``: the one owner of ``search.db``'s versions and damage, for both families.

Real SQLite files in temporary folders; the damage is real (pages overwritten), as
``test_damaged_index.py`` makes it for the commands.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from pbot_watch.memory.index import MEMORY_SCHEMA_VERSION, ensure_memory_tables
from pbot_watch.search.database import (
    PAGE_SIZE,
    Family,
    asked_again_on_damage,
    damage_found,
    ensure_family,
    version_of,
)
from pbot_watch.search.index import FTS_AUTOMERGE, SCHEMA_VERSION, SearchIndex
from tests.search.test_damaged_index import damage


def corrupt_error() -> sqlite3.DatabaseError:
    error = sqlite3.DatabaseError("database disk image is malformed")
    error.sqlite_errorcode = sqlite3.SQLITE_CORRUPT  # type: ignore[attr-defined]
    return error


class TestVersions:
    def test_both_families_record_their_version_in_meta(self, tmp_path: Path) -> None:
        """History's version is written when the file is made, raw memory's when its tables are."""
        with SearchIndex(tmp_path / "search.db") as index:
            ensure_memory_tables(index)
            assert (SCHEMA_VERSION, MEMORY_SCHEMA_VERSION) == (
                version_of(index.conn, "schema_version"),
                version_of(index.conn, "memory_schema_version"),
            )

    def test_a_family_of_another_version_is_rebuilt_and_the_other_kept(self, tmp_path: Path) -> None:
        """A new version of one family empties its tables only: history's rows stay."""
        with SearchIndex(tmp_path / "search.db") as index:
            index.conn.execute("INSERT INTO folders(path) VALUES ('/w')")
            old = Family("extra_version", 1, ("extra",), ("CREATE TABLE extra(x)",))
            ensure_family(index.conn, old)
            index.conn.execute("INSERT INTO extra VALUES (1)")
            ensure_family(index.conn, Family("extra_version", 2, ("extra",), ("CREATE TABLE extra(x, y)",)))
            assert (0, 1, 2) == (
                index.conn.execute("SELECT count(*) FROM extra").fetchone()[0],
                index.conn.execute("SELECT count(*) FROM folders").fetchone()[0],
                version_of(index.conn, "extra_version"),
            )

    def test_no_meta_is_no_version(self, tmp_path: Path) -> None:
        """A database without ``meta`` (another program's) has no version: it is rebuilt on open."""
        conn = sqlite3.connect(tmp_path / "other.db")
        try:
            assert version_of(conn, "schema_version") is None
        finally:
            conn.close()

    def test_a_busy_file_is_an_error_not_a_missing_version(self, tmp_path: Path) -> None:
        """A file another connection holds is not taken for one without ``meta``: that would
        have it built anew, deleting the holder's rows.
        """
        path = tmp_path / "search.db"
        SearchIndex(path).close()
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        other = sqlite3.connect(path, timeout=0)
        try:
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                version_of(other, "schema_version")
        finally:
            other.close()
            holder.execute("ROLLBACK")
            holder.close()


def open_and_write(path: Path, n: int, start: object) -> None:
    """In its own process: open ``search.db`` (made anew by whoever comes first) and write a row."""
    start.wait()  # type: ignore[attr-defined]
    with SearchIndex(path) as index:
        ensure_memory_tables(index)
        index.conn.execute("INSERT INTO folders(path) VALUES (?)", (f"/w{n}",))


class TestOpening:
    def test_processes_opening_a_new_file_at_once_make_it_once(self, tmp_path: Path) -> None:
        """Two build workers, the service and a CLI query may open a missing ``search.db`` together:
        one makes it, the others open what it made (none deletes a file another is writing, which
        left a worker's store with ``database disk image is malformed``), and every row is kept.
        """
        context = multiprocessing.get_context("spawn")
        for attempt in range(4):
            path = tmp_path / f"try{attempt}" / "search.db"
            start = context.Event()
            processes = [context.Process(target=open_and_write, args=(path, n, start)) for n in range(6)]
            for process in processes:
                process.start()
            start.set()
            for process in processes:
                process.join(60)
            assert [process.exitcode for process in processes] == [0] * 6
            with SearchIndex(path) as index:
                assert damage_found(index.conn) is None
                rows = index.conn.execute("SELECT path FROM folders ORDER BY path").fetchall()
                assert rows == [(f"/w{n}",) for n in range(6)]


class TestPages:
    def test_a_new_file_has_large_pages_and_an_existing_one_keeps_its_own(self, tmp_path: Path) -> None:
        """Compressed texts fill 16 KB pages better than 4 KB ones; a file made before keeps its
        pages (SQLite cannot change them in WAL mode) and its rows.
        """
        with SearchIndex(tmp_path / "search.db") as index:
            assert PAGE_SIZE == index.conn.execute("PRAGMA page_size").fetchone()[0]
        # A sound file of this version made with 4 KB pages (before they were larger) is kept as it is.
        conn = sqlite3.connect(tmp_path / "search.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute("PRAGMA page_size = 4096")
        conn.execute("VACUUM")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("INSERT INTO folders(path) VALUES ('/w')")
        conn.close()
        with SearchIndex(tmp_path / "search.db") as index:
            assert 4096 == index.conn.execute("PRAGMA page_size").fetchone()[0]
            assert [("/w",)] == index.conn.execute("SELECT path FROM folders").fetchall()

    def test_every_fts_table_merges_more_segments_at_a_time(self, tmp_path: Path) -> None:
        """``FTS_AUTOMERGE``: a first run leaves a segment per write transaction, and merging
        them 8 at a time instead of FTS5's 4 rewrites each posting about half as often."""
        with SearchIndex(tmp_path / "search.db") as index:
            ensure_memory_tables(index)
            tables = [
                row[0]
                for row in index.conn.execute("SELECT name FROM sqlite_master WHERE sql LIKE '%USING fts5(%'")
            ]
            assert sorted(tables) == [
                "mem_literal",
                "mem_terms",
                "nodes_literal",
                "nodes_terms",
                "records_terms",
            ]
            for table in tables:
                config = dict(index.conn.execute(f"SELECT k, v FROM {table}_config").fetchall())
                assert config.get("automerge") == FTS_AUTOMERGE, table


class TestDamage:
    def test_quick_check_finds_damaged_pages(self, tmp_path: Path) -> None:
        """A sound file passes; one with its pages overwritten is named damaged."""
        path = tmp_path / "search.db"
        with SearchIndex(path) as index:
            ensure_memory_tables(index)
            index.conn.executemany(
                "INSERT INTO folders(path) VALUES (?)", [(f"/w/{n}" * 40,) for n in range(400)]
            )
            assert damage_found(index.conn) is None
        damage(path)
        with SearchIndex(path) as index:
            assert damage_found(index.conn) is not None

    def test_damage_is_answered_once_on_a_file_started_afresh(self) -> None:
        """The work is done again after ``afresh``, told the damage; a second damage is not hidden."""
        calls: list[object] = []

        def work(seen: sqlite3.DatabaseError | None) -> str:
            calls.append(seen)
            if len(calls) == 1:
                raise corrupt_error()
            return "answer"

        assert "answer" == asked_again_on_damage(work, calls.append)
        assert [None, "malformed", "malformed"] == [None if c is None else "malformed" for c in calls]

        def always(_: sqlite3.DatabaseError | None) -> str:
            raise corrupt_error()

        with pytest.raises(sqlite3.DatabaseError):
            asked_again_on_damage(always, lambda _: None)

    def test_other_errors_are_not_damage(self) -> None:
        """A busy or locked database is its own error: nothing is started afresh."""
        afresh: list[object] = []

        def busy(_: sqlite3.DatabaseError | None) -> str:
            raise sqlite3.OperationalError("database is locked")

        with pytest.raises(sqlite3.OperationalError):
            asked_again_on_damage(busy, afresh.append)
        assert [] == afresh
