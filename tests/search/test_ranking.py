"""The rules of ``terms`` ranking, one behaviour each, on real record files and a real index."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pbot_watch.search.index import RecordFolder, SearchIndex
from pbot_watch.search.pools import KEPT_COUNTS, node_counts
from pbot_watch.search.queries import search_history
from pbot_watch.search.ranking import Ranking
from pbot_watch.search.terms import TermRules
from pbot_watch.search.when import time_intent
from tests.search.archive import exchange, write_record

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def qa(question: str, answer: str) -> str:
    return f"用户：\n{question}\n\n助手：\n{answer}"


FILLER = [
    qa(f"Note {i} about the weather", f"Weather note {i}: cloudy, then sun in the {part}")
    for i, part in enumerate(["morning", "evening"] * 15)
]
"""Unrelated exchanges, so that a term of two exchanges is a rare one, as in a real archive."""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "archive"


@pytest.fixture
def index(tmp_path: Path) -> Iterator[SearchIndex]:
    with SearchIndex(tmp_path / "state" / "search.db") as opened:
        yield opened


def session(
    folder: Path, name: str, texts: list[str], day: str = "2026-11-02", **extra: Any
) -> dict[str, Any]:
    branch = [exchange(f"{name}{i}", text, f"{day}T10:{i:02d}:00.000Z") for i, text in enumerate(texts)]
    return write_record(folder, f"session-{name}", extra.pop("title", name), [branch], **extra)


def ids(index: SearchIndex, folder: Path, query: str, **options: Any) -> list[str]:
    index.update_from_archive([RecordFolder(folder, None)])
    result = search_history(index, query, match="terms", limit=50, now=NOW, **options)
    return [m.id for m in result.matches if m.kind == "exchange"]


def exchange_id(record: dict[str, Any], position: int) -> str:
    """The id of the exchange ``session`` wrote at ``position``."""
    name = record["sessionId"].removeprefix("session-")
    return f"{record['id']}:0:{name}{position}"


class TestWords:
    def test_stemmed_form_finds_exchange(self, index: SearchIndex, folder: Path) -> None:
        """A query word finds an exchange that has another form of it ("stemming" finds "stems")."""
        record = session(folder, "a", [qa("Why does the stemmer cut words?", "It stems them to roots.")])
        assert [exchange_id(record, 0)] == ids(index, folder, "stemming")

    def test_stop_words_alone_find_nothing(self, index: SearchIndex, folder: Path) -> None:
        """A query made only of function words finds nothing rather than everything."""
        session(folder, "a", [qa("What was it that we did there?", "It was what you did.")])
        assert [] == ids(index, folder, "what was it")


class TestSides:
    def test_sides_are_columns_of_their_own(self, index: SearchIndex, folder: Path) -> None:
        """The answer's words are in the answer column, the person's in the question column."""
        session(folder, "a", [qa("Why is the parser slow?", "Backtracking.")])
        index.update_from_archive([RecordFolder(folder, None)])
        found = [column_hits(index, "question:parser"), column_hits(index, "answer:backtrack")]
        assert [1, 1] == found

    def test_sides_off_is_one_column(self, tmp_path: Path, folder: Path) -> None:
        """With the sides rule off, a whole exchange is the first column and the answer's is empty."""
        session(folder, "a", [qa("Why is the parser slow?", "Backtracking.")])
        with SearchIndex(tmp_path / "one.db", TermRules(sides=False)) as one:
            one.update_from_archive([RecordFolder(folder, None)])
            found = [column_hits(one, "question:backtrack"), column_hits(one, "answer:backtrack")]
        assert [1, 0] == found


def column_hits(index: SearchIndex, fts: str) -> int:
    return int(
        index.conn.execute("SELECT count(*) FROM nodes_terms WHERE nodes_terms MATCH ?", (fts,)).fetchone()[0]
    )


class TestTime:
    def test_date_in_query_prefers_exchanges_of_that_date(self, index: SearchIndex, folder: Path) -> None:
        """Of two exchanges with the same words, the one inside the month the query names comes first."""
        text = qa("We deployed the billing service", "Deployment done.")
        may = session(folder, "may", [text], day="2025-05-14")
        session(folder, "june", [text], day="2025-06-20")
        assert exchange_id(may, 0) == ids(index, folder, "billing deploy in May 2025")[0]

    def test_relative_month_is_the_last_one_before_now(self) -> None:
        """ "last May" asked in November 2026 is May 2026."""
        intent = time_intent("what did we fix last May", NOW)
        start = datetime(2026, 5, 1, tzinfo=UTC).timestamp() * 1000
        end = datetime(2026, 6, 1, tzinfo=UTC).timestamp() * 1000
        assert ((start, end),) == intent.ranges

    def test_when_question_prefers_exchange_that_mentions_a_time(
        self, index: SearchIndex, folder: Path
    ) -> None:
        """A "when" question puts an exchange that mentions a time before one that does not."""
        dated = session(folder, "a", [qa("I renewed the TLS certificate yesterday", "Good.")])
        session(folder, "b", [qa("The TLS certificate renewal is automated", "Good.")], day="2026-11-03")
        assert exchange_id(dated, 0) == ids(index, folder, "When did I renew the TLS certificate?")[0]


class TestStructure:
    def test_matching_summary_lifts_its_exchanges(self, index: SearchIndex, folder: Path) -> None:
        """An exchange under a summary that matches the query comes before an equal one that is not."""
        under = session(
            folder,
            "a",
            [qa("Check the database", "Checked."), *FILLER[:3]],
            summaries={1: "Database migration to the new cluster"},
        )
        session(folder, "b", [qa("Check the database", "Checked.")], day="2026-11-03")
        session(folder, "c", FILLER, day="2026-11-04")
        assert exchange_id(under, 0) == ids(index, folder, "database migration")[0]

    def test_neighbour_of_strong_hit_is_found(self, index: SearchIndex, folder: Path) -> None:
        """The exchange after a strong hit is a hit too, though it shares no word with the query."""
        record = session(
            folder,
            "a",
            [
                qa("Which city in Ireland for my semester abroad?", "Pick one with music."),
                qa("Then I will stay in Galway.", "Great choice."),
            ],
        )
        assert exchange_id(record, 1) in ids(index, folder, "Ireland semester city")

    def test_neighbours_off_finds_only_the_words(self, index: SearchIndex, folder: Path) -> None:
        """With the neighbour weight at zero only the exchange with the words is a hit."""
        record = session(
            folder,
            "a",
            [
                qa("Which city in Ireland for my semester abroad?", "Pick one with music."),
                qa("Then I will stay in Galway.", "Great choice."),
            ],
        )
        ranking = Ranking(neighbours=0.0, expansion=0.0)
        assert [exchange_id(record, 0)] == ids(index, folder, "Ireland semester city", ranking=ranking)

    def test_session_name_lifts_its_hits(self, index: SearchIndex, folder: Path) -> None:
        """Of two equal hits, the one in a session named after the query's words comes first."""
        named = session(folder, "a", [qa("Fix the flaky test", "Fixed.")], title="Payment gateway flaky test")
        session(folder, "b", [qa("Fix the flaky test", "Fixed.")], day="2026-11-03", title="Misc")
        assert exchange_id(named, 0) == ids(index, folder, "payment flaky test")[0]


class TestExpansion:
    def test_words_of_best_hits_find_exchange_in_other_words(self, index: SearchIndex, folder: Path) -> None:
        """An exchange sharing the best hit's distinctive words is found without the query's word."""
        session(folder, "a", [qa("Set up kubernetes", "Installed the helm chart into the staging cluster.")])
        other = session(
            folder, "b", [qa("Where are the chart values?", "The helm values live beside the staging chart.")]
        )
        session(folder, "c", FILLER, day="2026-11-04")
        assert exchange_id(other, 0) in ids(index, folder, "kubernetes")

    def test_expansion_off_finds_only_the_word(self, index: SearchIndex, folder: Path) -> None:
        """With the expansion weight at zero the other exchange is not found."""
        first = session(
            folder, "a", [qa("Set up kubernetes", "Installed the helm chart into the staging cluster.")]
        )
        session(
            folder, "b", [qa("Where are the chart values?", "The helm values live beside the staging chart.")]
        )
        session(folder, "c", FILLER, day="2026-11-04")
        ranking = Ranking(expansion=0.0)
        assert [exchange_id(first, 0)] == ids(index, folder, "kubernetes", ranking=ranking)


POOLED = Ranking(common_term_nodes=1, term_pool=10_000)
"""Every term counts as common, and its pool holds every node."""
EXACT = Ranking(common_term_nodes=10**9)
"""No term counts as common: every node is scored by FTS5."""


class TestPools:
    def test_pooled_scores_equal_exact_scores(self, index: SearchIndex, folder: Path) -> None:
        """Scores added up from whole term pools are the scores FTS5 gives the whole query."""
        session(folder, "a", FILLER[:12])
        session(folder, "b", FILLER[12:], day="2026-11-03")
        index.update_from_archive([RecordFolder(folder, None)])

        def ranked(ranking: Ranking) -> list[tuple[str, float]]:
            result = search_history(index, "weather morning sun", match="terms", limit=50, ranking=ranking)
            return [(m.id, round(m.score or 0.0, 4)) for m in result.matches]

        assert ranked(EXACT) == ranked(POOLED)

    def test_pool_is_recomputed_after_the_index_changes(self, index: SearchIndex, folder: Path) -> None:
        """A node written after a pool was kept is found by the next query."""
        session(folder, "a", FILLER[:12])
        assert ids(index, folder, "weather", ranking=POOLED)
        newer = session(folder, "b", [qa("Weather weather weather", "Weather.")], day="2026-11-03")
        assert exchange_id(newer, 0) == ids(index, folder, "weather", ranking=POOLED)[0]

    def test_kept_count_follows_the_index(self, index: SearchIndex, folder: Path) -> None:
        """A common term's count is remembered, and the count after a change is the new one."""
        many = KEPT_COUNTS + 5
        stamps = [f"2026-11-02T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}.000Z" for i in range(many)]
        branch = [exchange(f"a{i}", qa(f"Weather {i}", "Sun."), stamp) for i, stamp in enumerate(stamps)]
        write_record(folder, "session-a", "a", [branch])
        index.update_from_archive([RecordFolder(folder, None)])
        first = [node_counts(index, ["weather"], 10**6), node_counts(index, ["weather"], 10**6)]
        kept = index.conn.execute("SELECT count FROM term_counts WHERE term = 'weather'").fetchone()
        assert (many,) == kept
        session(folder, "b", [qa("Weather again", "Rain.")], day="2026-11-03")
        index.update_from_archive([RecordFolder(folder, None)])
        assert [{"weather": many}, {"weather": many}, {"weather": many + 1}] == [
            *first,
            node_counts(index, ["weather"], 10**6),
        ]

    def test_a_count_is_not_kept_while_the_lock_is_held(self, index: SearchIndex, folder: Path) -> None:
        """With another connection holding search.db's write lock (the service writing), the count
        is walked and answered at once, not waited for, and kept by a later query."""
        import sqlite3
        import time

        many = KEPT_COUNTS + 5
        stamps = [f"2026-11-02T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}.000Z" for i in range(many)]
        branch = [exchange(f"a{i}", qa(f"Weather {i}", "Sun."), stamp) for i, stamp in enumerate(stamps)]
        write_record(folder, "session-a", "a", [branch])
        index.update_from_archive([RecordFolder(folder, None)])
        writer = sqlite3.connect(index.path, isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")
        try:
            started = time.monotonic()
            assert {"weather": many} == node_counts(index, ["weather"], 10**6)
            assert time.monotonic() - started < 1.0
            assert (
                index.conn.execute("SELECT count FROM term_counts WHERE term = 'weather'").fetchone() is None
            )
        finally:
            writer.execute("ROLLBACK")
            writer.close()
        assert {"weather": many} == node_counts(index, ["weather"], 10**6)
        assert (many,) == index.conn.execute(
            "SELECT count FROM term_counts WHERE term = 'weather'"
        ).fetchone()
