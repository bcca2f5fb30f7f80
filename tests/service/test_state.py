"""The service's SQLite state: numbered migrations and cursor rows, on a real database file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pbot_watch.pi.cursor import Cursor
from pbot_watch.service.state import MIGRATIONS, STATE_FILE, FileState, StateStore


class TestMigrations:
    def test_fresh_state_applies_all_in_order(self, tmp_path: Path) -> None:
        """A new state file gets every migration, recorded by name in ``_migrations``."""
        store = StateStore(tmp_path)
        names = [name for name, _ in MIGRATIONS]
        assert store.applied == names
        assert names == sorted(names)
        recorded = [row[0] for row in store.db.execute("SELECT name FROM _migrations ORDER BY name")]
        assert recorded == names
        store.close()

    def test_reopening_applies_nothing(self, tmp_path: Path) -> None:
        """Migrations run once; a second open finds them recorded."""
        StateStore(tmp_path).close()
        store = StateStore(tmp_path)
        assert store.applied == []
        store.close()

    def test_old_state_is_upgraded_in_place(self, tmp_path: Path) -> None:
        """A state file from before m002 keeps its cursors and gains the new column."""
        db = sqlite3.connect(tmp_path / STATE_FILE, isolation_level=None)
        db.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied REAL NOT NULL)")
        MIGRATIONS[0][1](db)
        db.execute("INSERT INTO _migrations VALUES ('m001_files', 0)")
        db.execute("INSERT INTO files VALUES ('/s.jsonl', 1, 2, 3, 'h', 't', 'sid', '/w', 0)")
        db.close()
        store = StateStore(tmp_path)
        assert store.applied == ["m002_files_skipped", "m003_files_whole"]
        assert list(store.files()) == [
            FileState(Path("/s.jsonl"), Cursor(1, 2, 3, "h", "t"), "sid", "/w", False)
        ]
        store.close()


class TestCursors:
    def test_round_trip_and_forget(self, tmp_path: Path) -> None:
        """Saved cursors come back after reopening; forgotten ones do not."""
        store = StateStore(tmp_path)
        one = FileState(tmp_path / "a.jsonl", Cursor(1, 10, 100, "head", "tail"), "s1", "/ws", False)
        two = FileState(tmp_path / "b.jsonl", Cursor(1, 11, 0, "h", "t"), None, None, True)
        store.save([one, two])
        store.close()
        store = StateStore(tmp_path)
        assert sorted(store.files(), key=lambda s: s.path) == [one, two]
        store.forget([one.path])
        assert list(store.files()) == [two]
        store.close()

    def test_save_replaces_a_path(self, tmp_path: Path) -> None:
        """A later cursor for the same path replaces the earlier one."""
        store = StateStore(tmp_path)
        path = tmp_path / "a.jsonl"
        store.save([FileState(path, Cursor(1, 10, 100, "h", "t"), "s1", "/ws")])
        store.save([FileState(path, Cursor(1, 10, 200, "h", "t2"), "s1", "/ws")])
        assert [s.cursor.offset for s in store.files()] == [200]
        store.close()


def cursor_state(path: Path, offset: int = 100) -> FileState:
    return FileState(path, Cursor(1, 10, offset, "h", "t", 5, "w"), "s1", "/ws")


class TestDegraded:
    """A state database that fails never raises: cursors wait in memory and are retried."""

    def test_locked_database_keeps_cursors_in_memory(self, tmp_path: Path) -> None:
        """Another process holding the write lock: the save waits, then says why; the retry writes."""
        store = StateStore(tmp_path, retry_seconds=(0.0,))
        assert store.db is not None
        store.db.execute("PRAGMA busy_timeout = 100")  # the test's patience, not the service's
        other = sqlite3.connect(tmp_path / STATE_FILE, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        store.save([cursor_state(tmp_path / "a.jsonl")])
        assert (1, True) == (store.unsaved, "database is locked" in (store.error or ""))
        other.execute("ROLLBACK")
        other.close()
        store.retry()
        assert (0, None) == (store.unsaved, store.error)
        store.close()
        assert [cursor_state(tmp_path / "a.jsonl")] == list(StateStore(tmp_path).files())

    def test_unopenable_database_starts_empty_and_retries(self, tmp_path: Path) -> None:
        """A state file that cannot be opened: no cursors, saves wait, and the open is retried."""
        (tmp_path / STATE_FILE).mkdir()
        errors: list[str] = []
        store = StateStore(tmp_path, on_error=errors.append, retry_seconds=(0.0,))
        assert ([], None) == (list(store.files()), store.db)
        store.save([cursor_state(tmp_path / "a.jsonl")])
        store.forget([tmp_path / "gone.jsonl"])
        assert 2 == store.unsaved
        assert 1 == len(errors)
        assert "unable to open database file; cursors are kept in memory" in errors[0]
        (tmp_path / STATE_FILE).rmdir()
        store.retry()
        assert (0, None) == (store.unsaved, store.error)
        store.close()
        assert [cursor_state(tmp_path / "a.jsonl")] == list(StateStore(tmp_path).files())

    def test_corrupt_database_is_set_aside(self, tmp_path: Path) -> None:
        """A state file that is not SQLite is kept aside and a fresh one used, with a warning."""
        (tmp_path / STATE_FILE).write_bytes(b"this is not a database" * 100)
        store = StateStore(tmp_path)
        assert (None, 1) == (store.error, len(store.warnings))
        assert "state.sqlite3.corrupt" in store.warnings[0]
        assert b"this is not a database" * 100 == (tmp_path / "state.sqlite3.corrupt").read_bytes()
        store.save([cursor_state(tmp_path / "a.jsonl")])
        store.close()
        assert [cursor_state(tmp_path / "a.jsonl")] == list(StateStore(tmp_path).files())

    def test_later_saves_of_a_path_win(self, tmp_path: Path) -> None:
        """Cursors saved while degraded keep only the last one per path, and a forget wins over a save."""
        store = StateStore(tmp_path, retry_seconds=(3600.0,))
        assert store.db is not None
        store.db.execute("PRAGMA busy_timeout = 100")
        other = sqlite3.connect(tmp_path / STATE_FILE, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
        store.save([cursor_state(a, 1), cursor_state(b, 1)])
        store.save([cursor_state(a, 2)])
        store.forget([b])
        other.execute("ROLLBACK")
        other.close()
        assert 2 == store.unsaved
        store.close()  # the last attempt at closing writes what waits
        assert [cursor_state(a, 2)] == list(StateStore(tmp_path).files())
