"""The index a long-lived process holds follows the file: replaced, it is reopened; damaged, started afresh."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from pbot_watch.search.held import HeldIndex
from pbot_watch.search.index import SearchIndex
from pbot_watch.sqlite import remove


def folders(state: Path) -> list[str]:
    with sqlite3.connect(state / "search.db") as conn:
        rows = [row[0] for row in conn.execute("SELECT path FROM folders ORDER BY path")]
    conn.close()
    return rows


def add_folder(name: str) -> Callable[[SearchIndex], None]:
    def work(index: SearchIndex) -> None:
        with index.transaction():
            index.conn.execute("INSERT INTO folders(path) VALUES (?)", (name,))

    return work


class TestHeldIndex:
    def test_a_replaced_file_is_followed(self, tmp_path: Path) -> None:
        """After another process deleted the index (a rebuild), writes go to the new file, not the deleted one."""
        held = HeldIndex(tmp_path)
        held.use(add_folder("/a"))
        remove(tmp_path / "search.db")
        SearchIndex(tmp_path / "search.db").close()  # the other process's fresh index
        held.use(add_folder("/b"))
        held.close()
        assert ["/b"] == folders(tmp_path)

    def test_damage_met_while_writing_starts_afresh(self, tmp_path: Path) -> None:
        """A write that meets a damaged page resets the index and is made on the fresh one."""
        held = HeldIndex(tmp_path)
        held.use(add_folder("/a"))
        calls: list[int] = []

        def damaged_once(index: SearchIndex) -> None:
            """The first time, the table's root page points past the file, as a torn write can leave it."""
            calls.append(1)
            if len(calls) == 1:
                index.conn.execute("PRAGMA writable_schema = ON")
                index.conn.execute("UPDATE sqlite_master SET rootpage = 9999 WHERE name = 'folders'")
                index.conn.close()
                index.conn = sqlite3.connect(index.path, isolation_level=None)
            add_folder("/b")(index)

        held.use(damaged_once)
        held.close()
        assert (2, ["/b"]) == (len(calls), folders(tmp_path))
