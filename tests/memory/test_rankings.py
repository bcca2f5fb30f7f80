"""A kept terms ranking answers exactly what ranking again would, through any change to raw memory.

An unscoped terms search keeps its ranking in the index (``memory/rankings.py``) and later ones
read their page of it. These tests drive session files through appends, ``/tree`` moves,
compactions, forks, rewrites and truncations (``test_kept_scope.Corpus``) and compare every
search answered from a kept ranking with the same search ranked afresh.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings

from pbot_watch.memory import rankings
from pbot_watch.memory.index import refresh_memory
from pbot_watch.memory.query import search_memory
from pbot_watch.search.index import SearchIndex
from pbot_watch.search.tallies import version
from tests.memory.test_kept_scope import STEPS, Corpus, Step
from tests.support.pi_sessions import PiSession


def answer(
    index: SearchIndex, query: str, **options: Any
) -> tuple[int, list[tuple[str, str, float | None, int]]]:
    result = search_memory(index, query, match="terms", **options)
    return result.total, [(h.handle, h.context, h.score, h.line) for h in result.hits]


def kept(index: SearchIndex) -> int:
    return int(index.conn.execute("SELECT count(*) FROM mem_rankings").fetchone()[0])


def afresh(
    index: SearchIndex, query: str, **options: Any
) -> tuple[int, list[tuple[str, str, float | None, int]]]:
    index.conn.execute("DELETE FROM mem_rankings")
    return answer(index, query, **options)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_a_kept_ranking_equals_ranking_again_after_any_changes(
    tmp_path_factory: Any, steps: list[Step]
) -> None:
    root = tmp_path_factory.mktemp("rankings")
    corpus = Corpus(root / "sessions")
    with SearchIndex(root / "search.db") as index:

        def same() -> None:
            # The ranking kept at the last check (or none), read after whatever changed since.
            first = [answer(index, query, limit=2) for query in ("npm test", "retry econnreset")]
            assert first == [afresh(index, query, limit=2) for query in ("npm test", "retry econnreset")]
            ranked = answer(index, "npm test", limit=2)  # kept now
            assert kept(index) >= 1
            assert ranked == answer(index, "npm test", limit=2)

        corpus.play(index, steps, same)


def history(root: Path) -> PiSession:
    session = PiSession("01a228f5-0000-7000-8000-000000000001", file=root / "0001_s.jsonl")
    for n in range(30):
        session.user(f"question {n}: why does the cursor offset drift")
        session.assistant(
            f"answer {n}: the cursor moves, the offset stays" if n % 3 else f"answer {n}: see the log"
        )
    return session


class TestKeptRanking:
    def test_every_page_of_a_kept_ranking_is_the_page_ranked_afresh(self, tmp_path: Path) -> None:
        history(tmp_path / "sessions")
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [tmp_path / "sessions"])
            first = search_memory(index, "cursor offset", match="terms", limit=7)
            assert kept(index) == 1
            pages = [first]
            while pages[-1].next_cursor:
                pages.append(
                    search_memory(index, "cursor offset", match="terms", limit=7, after=pages[-1].next_cursor)
                )
            index.conn.execute("DELETE FROM mem_rankings")
            again = [search_memory(index, "cursor offset", match="terms", limit=7)]
            while again[-1].next_cursor:
                again.append(
                    search_memory(index, "cursor offset", match="terms", limit=7, after=again[-1].next_cursor)
                )
            assert [p.model_dump() for p in pages] == [p.model_dump() for p in again]
            assert sum(len(p.hits) for p in pages) == first.total == 50

    def test_another_process_reads_the_ranking_one_kept(self, tmp_path: Path) -> None:
        history(tmp_path / "sessions")
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [tmp_path / "sessions"])
            ranked = answer(index, "cursor offset")
        with SearchIndex(tmp_path / "search.db") as other:
            assert kept(other) == 1
            assert answer(other, "cursor offset") == ranked
            assert kept(other) == 1  # read, not ranked and kept again

    def test_an_append_empties_the_kept_rankings_and_the_next_search_has_it(self, tmp_path: Path) -> None:
        session = history(tmp_path / "sessions")
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [tmp_path / "sessions"])
            before = answer(index, "cursor offset")
            session.user("the cursor offset is fixed now")
            refresh_memory(index, [tmp_path / "sessions"])
            assert kept(index) == 0
            after = answer(index, "cursor offset")
            assert after[0] == before[0] + 1
            assert after == afresh(index, "cursor offset")

    def test_at_most_kept_rankings_the_oldest_going_first(self, tmp_path: Path) -> None:
        history(tmp_path / "sessions")
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [tmp_path / "sessions"])
            queries = [f"cursor q{n}" for n in range(rankings.KEPT + 2)]
            for query in queries:
                answer(index, query)
            keys = [k for (k,) in index.conn.execute("SELECT key FROM mem_rankings ORDER BY id")]
            assert len(keys) == rankings.KEPT
            assert all(query.split()[1] in key for query, key in zip(queries[2:], keys, strict=True))

    def test_a_ranking_from_before_a_commit_is_not_kept(self, tmp_path: Path) -> None:
        history(tmp_path / "sessions")
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [tmp_path / "sessions"])
            seen = version(index.conn)
            writer = sqlite3.connect(tmp_path / "search.db")
            writer.execute("INSERT INTO meta(key, value) VALUES ('unrelated', '1')")
            writer.commit()
            writer.close()
            assert not rankings.keep(
                index.conn, rankings.ranking_key(1, ["cursor"]), [(1, -1.0, 0, 1, 1)], seen
            )
            assert kept(index) == 0

    def test_a_search_answers_while_another_process_holds_the_write_lock(self, tmp_path: Path) -> None:
        history(tmp_path / "sessions")
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [tmp_path / "sessions"])
            writer = sqlite3.connect(tmp_path / "search.db", isolation_level=None)
            writer.execute("BEGIN IMMEDIATE")
            try:
                locked = answer(index, "cursor offset")
                assert kept(index) == 0
            finally:
                writer.execute("ROLLBACK")
                writer.close()
            assert locked == answer(index, "cursor offset")
            assert kept(index) == 1
