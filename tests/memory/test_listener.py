"""The service builds raw memory as it catches up and follows every growing session: a query has nothing left to read."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from pbot_watch.memory.index import MemorySync, refresh_memory
from pbot_watch.search.index import SearchIndex
from tests.memory.test_index import busy_session, copy_of
from tests.support.cli import invoke
from tests.support.pi_sessions import PiSession
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

    def test_the_service_builds_raw_memory_from_what_it_parses(self, tmp_path: Path) -> None:
        """A session no query read is in raw memory once caught up, and an append reaches it with no second read."""
        sessions = tmp_path / "sessions"
        path = sessions / "ws" / "s.jsonl"
        w = busy_session(path, turns=3)
        with ServiceProcess([sessions], tmp_path / "archive").start(wait=False) as service:
            db = service.state_dir / "search.db"
            status = service.wait_status(
                lambda s: s.catch_up is not None and s.catch_up.finished is not None, "the catch-up"
            )
            assert path.stat().st_size == memory_offset(db, path)  # caught up means searchable
            seen = [status.extensions["memory"]]
            for n in range(2):  # the file is dropped from memory once caught up, then held as it grows
                w.user(f"question {n} after the catch-up", id=f"late{n}")
                size = path.stat().st_size
                status = service.wait_status(
                    lambda s: memory_offset(db, path) == size and s.extensions["memory"] != seen[-1],  # noqa: B023
                    "raw memory to hold the append",
                )
                seen.append(status.extensions["memory"])
            # The second append was decoded once, for the record and raw memory both.
            assert (seen[1]["reads_fed"] + 1, seen[1]["bytes_read_itself"]) == (
                seen[2]["reads_fed"],
                seen[2]["bytes_read_itself"],
            )
            report = MemorySync()
            with SearchIndex(db) as index:
                refresh_memory(index, [sessions], report)
            assert (0, 0) == (report.files_read, report.bytes_read)
            assert 0 == service.stop()

    def test_raw_memory_missing_at_start_is_caught_up(self, tmp_path: Path) -> None:
        """Records current, raw memory gone (a first start after an upgrade): the catch-up builds it, newest first."""
        sessions = tmp_path / "sessions"
        old, new = sessions / "ws" / "old.jsonl", sessions / "ws" / "new.jsonl"
        busy_session(old, turns=3)
        PiSession("sess-new", file=new).user("the newest question", id="n1")
        os.utime(old, ns=(10**18, 10**18))
        os.utime(new, ns=(2 * 10**18, 2 * 10**18))
        state = tmp_path / "state"
        with ServiceProcess([sessions], tmp_path / "archive", state_dir=state).start() as service:
            assert 0 == service.stop()
        (state / "search.db").unlink()
        with ServiceProcess([sessions], tmp_path / "archive", state_dir=state).start(wait=False) as service:
            status = service.wait_status(
                lambda s: s.catch_up is not None and s.catch_up.finished is not None, "the catch-up"
            )
            assert status.catch_up is not None
            assert (2, 2, 2) == (
                status.catch_up.files_total,
                status.catch_up.memory_files_total,
                status.catch_up.memory_files_done,
            )
            db = state / "search.db"
            assert (old.stat().st_size, new.stat().st_size) == (
                memory_offset(db, old),
                memory_offset(db, new),
            )
            assert 0 == service.stop()
