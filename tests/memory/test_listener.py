"""With the service running, raw memory follows a growing session: a query has nothing left to read."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from pbot_watch.memory.index import MemorySync, refresh_memory
from pbot_watch.search.index import SearchIndex
from tests.memory.test_index import busy_session, copy_of
from tests.support.cli import invoke
from tests.support.service import ServiceProcess, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def big_session(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The bytes of a 20 MB session of tool work."""
    path = tmp_path_factory.mktemp("big") / "s.jsonl"
    busy_session(path, turns=2000, output_lines=350)
    return path.read_bytes()


def memory_offset(db: Path, path: Path) -> int | None:
    """Where raw memory's cursor for ``path`` stands, read straight from SQLite (no refresh)."""
    if not db.exists():
        return None
    with sqlite3.connect(db) as conn:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'mem_files'").fetchone() is None:
            return None
        row = conn.execute("SELECT offset FROM mem_files WHERE path = ?", (str(path),)).fetchone()
    conn.close()
    return row[0] if row else None


class TestTheServiceFollowsRawMemory:
    def test_an_append_costs_the_query_no_session_bytes(self, tmp_path: Path, big_session: bytes) -> None:
        """After an append to a 20 MB session, the service syncs it: a query's refresh reads 0 session bytes."""
        sessions = tmp_path / "sessions"
        path = sessions / "ws" / "s.jsonl"
        w = copy_of(big_session, path)
        where = ("--sessions", str(sessions), "--archive", str(tmp_path / "archive"))
        assert 0 == invoke("memory", "search", "needle", *where).returncode  # raw memory holds the file
        with ServiceProcess([sessions], tmp_path / "archive").start() as service:
            db = service.state_dir / "search.db"
            w.user("the appended needle question", id="late")
            size = path.stat().st_size
            wait_for(lambda: memory_offset(db, path) == size, what="raw memory to follow the append")
            report = MemorySync()
            with SearchIndex(db) as index:
                refresh_memory(index, [sessions], report)
            assert (0, 0) == (report.files_read, report.bytes_read)
            found = json.loads(invoke("memory", "search", "appended needle", "--json", *where).stdout)
            assert 1 == found["total"]
            assert 0 == service.stop()

    def test_a_session_no_query_read_costs_the_service_nothing(self, tmp_path: Path) -> None:
        """Raw memory is not built by the service: a session no query covered has no rows after an append."""
        sessions = tmp_path / "sessions"
        path = sessions / "ws" / "s.jsonl"
        w = busy_session(path, turns=3)
        with ServiceProcess([sessions], tmp_path / "archive").start() as service:
            size = path.stat().st_size
            w.user("one more question", id="late")
            service.wait_status(
                lambda s: s.activity == "idle" and s.listener_backlog == 0 and s.bytes_parsed_total > size,
                "the append to reach the listeners",
            )
            assert memory_offset(service.state_dir / "search.db", path) is None
            assert 0 == service.stop()
