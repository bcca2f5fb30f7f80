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
