"""Raw memory synced by several processes at once stores each source once (real processes, real SQLite).

The service follows a session's raw memory after each record while `pi serve` and `memory
search` sync the same file for their queries. Each reads the file's cursor, and the one that
gets the write lock second must plan from where the first left the file, or the appended
sources are stored twice and every hit is shown twice until the file is rewritten.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pbot_watch.memory.index import count_sources, ensure_memory_tables, refresh_memory
from pbot_watch.search.index import SearchIndex
from tests.support.pi_sessions import PiSession

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

# Each writer imports first, then waits for the same instant: they all read the cursor before
# any of them commits, which is the race a lone writer never shows.
WRITER = """
import sys, time
from pathlib import Path
from pbot_watch.memory.index import sync_memory_file
from pbot_watch.search.index import SearchIndex
db, session, at = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
with SearchIndex(db) as index:
    index.conn.execute("SELECT 1").fetchone()
    time.sleep(max(0.0, at - time.time()))
    sync_memory_file(index, session)
"""


def append_turns(w: PiSession, start: int, turns: int, output_lines: int) -> int:
    for i in range(start, start + turns):
        w.user(f"question {i}", id=f"u{i}")
        w.assistant(None, calls=[(f"c{i}", "bash", {"command": f"make step{i}"})], id=f"a{i}")
        w.tool_result(
            "".join(f"step {i} line {n}\n" for n in range(output_lines)),
            call_id=f"c{i}",
            name="bash",
            id=f"t{i}",
        )
        w.assistant(f"step {i} done", id=f"r{i}")
    return start + turns


def sync_at_once(db: Path, session: Path, writers: int) -> None:
    at = time.time() + 1.5
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), str(session), str(at)], stderr=subprocess.PIPE
        )
        for _ in range(writers)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert 0 == proc.returncode, err.decode()


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rounds=st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=3),
    writers=st.integers(min_value=2, max_value=3),
)
def test_each_source_is_stored_once(
    tmp_path_factory: pytest.TempPathFactory, rounds: list[int], writers: int
) -> None:
    """Rounds of appends, each synced by several processes at once, hold what one fresh sync holds."""
    base = tmp_path_factory.mktemp("concurrent")
    session = base / "sessions" / "ws" / "s.jsonl"
    w = PiSession("sess-race", file=session)
    with SearchIndex(base / "search.db") as index:
        ensure_memory_tables(index)  # the database exists before the writers race on its rows
    turns = 0
    for added in rounds:
        # Long tool output: each sync parses for a while, so the writers overlap.
        turns = append_turns(w, turns, added, output_lines=400)
        sync_at_once(base / "search.db", session, writers)
    with SearchIndex(base / "search.db") as index:
        stored = count_sources(index)
        doubled = index.conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM mem_sources GROUP BY file, entry_id, part HAVING count(*) > 1)"
        ).fetchone()[0]
    with SearchIndex(base / "fresh.db") as fresh:
        refresh_memory(fresh, [base / "sessions"])
        expected = count_sources(fresh)
    assert (0, expected) == (doubled, stored)
