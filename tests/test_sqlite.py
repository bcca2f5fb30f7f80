"""pbot_watch.sqlite: how every database of ours is opened, changed and kept private."""

from __future__ import annotations

import sqlite3
import stat
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pbot_watch.sqlite import (
    BUSY_TIMEOUT_SECONDS,
    WAL_SIZE_LIMIT,
    SQLiteTooOld,
    check_version,
    connect,
    execute_script,
    migrate,
    transaction,
    try_write,
)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


class TestConnect:
    def test_wal_and_busy_timeout(self, tmp_path: Path) -> None:
        """Readers never wait for the writer; a writer waits for the lock before giving up."""
        conn = connect(tmp_path / "a.db", "normal")
        assert "wal" == conn.execute("PRAGMA journal_mode").fetchone()[0]
        assert int(BUSY_TIMEOUT_SECONDS * 1000) == conn.execute("PRAGMA busy_timeout").fetchone()[0]
        conn.close()

    def test_the_wal_file_is_cut_back_when_it_starts_over(self, tmp_path: Path) -> None:
        """A reader that holds an old snapshot keeps the WAL growing past the limit; once it is
        gone, the next write starts the WAL over and the file is cut back to the limit instead of
        keeping its largest size on disk."""
        path = tmp_path / "a.db"
        writer = connect(path, "normal")
        writer.execute("CREATE TABLE t(x BLOB)")
        reader = connect(path, "normal")
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM t").fetchone()  # its snapshot pins the WAL
        wal = Path(f"{path}-wal")
        for _ in range(WAL_SIZE_LIMIT // (1 << 20) + 16):
            writer.execute("INSERT INTO t VALUES (randomblob(1 << 20))")
        assert wal.stat().st_size > WAL_SIZE_LIMIT + (8 << 20)
        reader.execute("COMMIT")
        writer.execute("PRAGMA wal_checkpoint(PASSIVE)")
        writer.execute("INSERT INTO t VALUES (1)")  # starts the WAL over
        assert wal.stat().st_size <= WAL_SIZE_LIMIT
        reader.close()
        writer.close()

    @pytest.mark.parametrize(("durability", "level"), [("full", 2), ("normal", 1)])
    def test_synchronous_per_durability(self, tmp_path: Path, durability: str, level: int) -> None:
        """``full`` syncs every commit; ``normal`` (rebuildable data) syncs at checkpoints."""
        conn = connect(tmp_path / "a.db", durability)  # type: ignore[arg-type]
        assert level == conn.execute("PRAGMA synchronous").fetchone()[0]
        conn.close()

    def test_explicit_transactions_only(self, tmp_path: Path) -> None:
        """A statement outside ``transaction`` commits at once: no implicit transaction is left open."""
        conn = connect(tmp_path / "a.db", "normal")
        conn.execute("CREATE TABLE t(x)")
        conn.execute("INSERT INTO t VALUES (1)")
        assert not conn.in_transaction
        conn.close()


class TestPrivateFiles:
    def test_new_database_is_private(self, tmp_path: Path, umask_022: None) -> None:
        """Under umask 022, new folders are 0700 and the database with its -wal and -shm 0600."""
        path = tmp_path / "state" / "deeper" / "a.db"
        conn = connect(path, "full")
        conn.execute("CREATE TABLE t(x)")
        for folder in (tmp_path / "state", path.parent):
            assert 0o700 == mode(folder)
        for name in ("a.db", "a.db-wal", "a.db-shm"):
            assert 0o600 == mode(path.parent / name), name
        conn.close()

    def test_older_loose_files_are_tightened(self, tmp_path: Path, umask_022: None) -> None:
        """A state folder and databases an older version left readable by others become private."""
        folder = tmp_path / "state"
        folder.mkdir(mode=0o755)
        path = folder / "a.db"
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE t(x)")
        assert 0o644 == mode(path)
        mine = connect(path, "full")
        assert 0o700 == mode(folder)
        for name in ("a.db", "a.db-wal", "a.db-shm"):
            assert 0o600 == mode(folder / name), name
        mine.close()
        conn.close()

    def test_a_shared_folder_is_left_open(self, tmp_path: Path, umask_022: None) -> None:
        """A database opened directly in a folder everyone shares (sticky, like /tmp) leaves its mode alone."""
        shared = tmp_path / "shared"
        shared.mkdir()
        shared.chmod(0o1777)
        conn = connect(shared / "a.db", "full")
        conn.close()
        assert 0o1777 == mode(shared)
        assert 0o600 == mode(shared / "a.db")


class TestTransaction:
    def test_commits_together(self, tmp_path: Path) -> None:
        """Statements inside one transaction are all there afterwards."""
        conn = connect(tmp_path / "a.db", "normal")
        conn.execute("CREATE TABLE t(x)")
        with transaction(conn):
            conn.execute("INSERT INTO t VALUES (1)")
            conn.execute("INSERT INTO t VALUES (2)")
        assert [(1,), (2,)] == conn.execute("SELECT x FROM t ORDER BY x").fetchall()
        conn.close()

    def test_failure_rolls_back_and_raises(self, tmp_path: Path) -> None:
        """An exception inside undoes every statement and reaches the caller."""
        conn = connect(tmp_path / "a.db", "normal")
        conn.execute("CREATE TABLE t(x)")

        def insert_then_fail() -> None:
            with transaction(conn):
                conn.execute("INSERT INTO t VALUES (1)")
                raise RuntimeError

        with pytest.raises(RuntimeError):
            insert_then_fail()
        assert [] == conn.execute("SELECT x FROM t").fetchall()
        conn.close()

    def test_script_stays_inside(self, tmp_path: Path) -> None:
        """``execute_script`` runs several statements without committing the open transaction."""
        conn = connect(tmp_path / "a.db", "normal")

        def create_then_fail() -> None:
            with transaction(conn):
                execute_script(conn, "CREATE TABLE t(x); -- a comment; with a semicolon\nCREATE TABLE u(y);")
                raise RuntimeError

        with pytest.raises(RuntimeError):
            create_then_fail()
        assert [] == conn.execute("SELECT name FROM sqlite_master").fetchall()
        conn.close()


class TestWaitingForTheLock:
    """A writer waiting for another's write lock takes it as soon as it is free, and no later than its timeout."""

    @staticmethod
    def hold(path: Path, seconds: float, taken: threading.Event, released: list[float]) -> threading.Thread:
        """Another connection holding the write lock for ``seconds``; ``released`` gets the moment it let go."""

        def run() -> None:
            other = connect(path, "normal", threads=True)
            with transaction(other):
                taken.set()
                time.sleep(seconds)
            released.append(time.monotonic())
            other.close()

        thread = threading.Thread(target=run)
        thread.start()
        taken.wait()
        return thread

    def test_a_long_wait_ends_right_after_the_release(self, tmp_path: Path) -> None:
        """SQLite's own busy handler asks every 100 ms once it has waited a third of a second; we ask
        every few ms, so the lock passes on within milliseconds of being freed."""
        path = tmp_path / "a.db"
        conn = connect(path, "normal")
        late = []
        for _ in range(5):
            released: list[float] = []
            holder = self.hold(path, 0.5, threading.Event(), released)
            with transaction(conn):
                took = time.monotonic()
            holder.join()
            late.append(took - released[0])
        assert statistics.median(late) < 0.03, late
        conn.close()

    def test_busy_past_the_timeout_raises_and_keeps_the_timeout(self, tmp_path: Path) -> None:
        path = tmp_path / "a.db"
        conn = connect(path, "normal")
        conn.execute("PRAGMA busy_timeout = 200")
        holder = self.hold(path, 1.0, threading.Event(), [])
        started = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="locked"), transaction(conn):
            pass
        assert 0.15 < time.monotonic() - started < 0.9
        assert not conn.in_transaction
        assert conn.execute("PRAGMA busy_timeout").fetchone() == (200,)
        assert try_write(conn, lambda: 1, 50) is None
        holder.join()
        assert try_write(conn, lambda: 1, 50) == 1
        conn.close()


def m001_one(db: sqlite3.Connection) -> None:
    db.execute("CREATE TABLE one(x)")


def m002_two(db: sqlite3.Connection) -> None:
    db.execute("CREATE TABLE two(x)")


MIGRATIONS = [("m001_one", m001_one), ("m002_two", m002_two)]


class TestMigrate:
    def test_applies_each_once_in_order(self, tmp_path: Path) -> None:
        """A new database gets every migration, recorded with when; a second run applies none."""
        conn = connect(tmp_path / "a.db", "full")
        assert ["m001_one", "m002_two"] == migrate(conn, MIGRATIONS)
        assert [] == migrate(conn, MIGRATIONS)
        rows = conn.execute("SELECT name, applied_at FROM _migrations ORDER BY name").fetchall()
        assert ["m001_one", "m002_two"] == [name for name, _ in rows]
        assert all(isinstance(at, float) for _, at in rows)
        conn.close()

    def test_only_new_ones_apply(self, tmp_path: Path) -> None:
        """A database from before a migration gets just that one."""
        conn = connect(tmp_path / "a.db", "full")
        migrate(conn, MIGRATIONS[:1])
        assert ["m002_two"] == migrate(conn, MIGRATIONS)
        conn.close()

    def test_failed_migration_leaves_nothing(self, tmp_path: Path) -> None:
        """A migration that fails is rolled back with its record, and applies on the next try."""

        def m002_broken(db: sqlite3.Connection) -> None:
            db.execute("CREATE TABLE two(x)")
            raise sqlite3.OperationalError("disk I/O error")

        conn = connect(tmp_path / "a.db", "full")
        with pytest.raises(sqlite3.OperationalError):
            migrate(conn, [MIGRATIONS[0], ("m002_two", m002_broken)])
        assert ["m001_one"] == [r[0] for r in conn.execute("SELECT name FROM _migrations")]
        assert ["m002_two"] == migrate(conn, MIGRATIONS)
        conn.close()

    def test_old_applied_column_is_renamed(self, tmp_path: Path) -> None:
        """The service state's old ``_migrations(name, applied)`` keeps its names under the one shape."""
        old = sqlite3.connect(tmp_path / "a.db", isolation_level=None)
        old.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied REAL NOT NULL)")
        m001_one(old)
        old.execute("INSERT INTO _migrations VALUES ('m001_one', 1.5)")
        old.close()
        conn = connect(tmp_path / "a.db", "full")
        assert ["m002_two"] == migrate(conn, MIGRATIONS)
        assert ("m001_one", 1.5) == conn.execute("SELECT name, applied_at FROM _migrations").fetchone()
        conn.close()


class TestVersion:
    def test_too_old_is_named(self) -> None:
        """An SQLite without the trigram tokenizer is refused with both versions in the message."""
        with pytest.raises(SQLiteTooOld) as raised:
            check_version((3, 33, 0))
        assert "SQLite 3.34.0 or newer" in str(raised.value)
        assert "SQLite 3.33.0" in str(raised.value)

    def test_too_old_is_one_line_at_the_command_line(self, tmp_path: Path) -> None:
        """A command that opens a database on a too-old SQLite says so on one stderr line, exit 1."""
        code = (
            "import sqlite3, sys\n"
            "sqlite3.sqlite_version_info = (3, 33, 0)  # the library an old Python was built with\n"
            "from pbot_watch.cli import main\n"
            "main(sys.argv[1:], prog_name='pbot-watch')\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code, "search", "x", "--archive", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (1, [f"pbot-watch: {SQLiteTooOld('3.33.0')}"]) == (done.returncode, done.stderr.splitlines())

    def test_this_sqlite_is_enough(self) -> None:
        """The SQLite the tests run on passes the check."""
        check_version()
