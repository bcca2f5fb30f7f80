"""Raw memory's tables: created on first use, rebuilt from the session files when of another version."""

from __future__ import annotations

from pathlib import Path

from pbot_watch.memory.index import MEMORY_SCHEMA_VERSION, count_sources, refresh_memory
from pbot_watch.memory.query import search_memory
from pbot_watch.search.index import SearchIndex
from tests.support.pi_sessions import PiSession


def session(root: Path) -> None:
    w = PiSession("sess-1", file=root / "ws" / "s.jsonl")
    w.user("run the tests", id="u1")
    w.assistant(None, calls=[("c1", "bash", {"command": "npm test"})], id="a1")
    w.tool_result("3 failed: budget over limit\n", call_id="c1", name="bash", error=True, id="t1")


class TestMemoryTables:
    def test_a_fresh_index_answers_without_a_refresh(self, tmp_path: Path) -> None:
        """A query on an index that never saw raw memory finds nothing instead of failing."""
        with SearchIndex(tmp_path / "search.db") as index:
            assert 0 == search_memory(index, "budget").total

    def test_another_version_is_rebuilt_with_the_same_handles(self, tmp_path: Path) -> None:
        """Tables of another memory version are dropped and refilled; handles stay the same."""
        session(tmp_path / "sessions")
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [tmp_path / "sessions"])
            before = [h.handle for h in search_memory(index).hits]
            index.conn.execute(
                "UPDATE meta SET value = ? WHERE key = 'memory_schema_version'",
                (str(MEMORY_SCHEMA_VERSION - 1),),
            )
        with SearchIndex(tmp_path / "search.db") as index:
            assert 0 == count_sources(index)
            refresh_memory(index, [tmp_path / "sessions"])
            assert before == [h.handle for h in search_memory(index).hits]
            assert len(before) == count_sources(index)
