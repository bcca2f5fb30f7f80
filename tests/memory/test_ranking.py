"""The terms search's BM25 without positions: FTS5's own BM25 wherever every term frequency is 1."""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from pbot_watch.memory.ranking import MIN_IDF, chunk_score, idf, score_sql

WORDS = [f"w{n}" for n in range(12)]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=10, unique=True), min_size=1, max_size=40),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=3, unique=True),
)
def test_scores_equal_fts5_bm25_when_each_term_occurs_once_per_row(
    rows: list[list[str]], query: list[str]
) -> None:
    """On rows where no word repeats, FTS5's ``bm25()`` (with positions) and the score computed
    from a positionless index (row counts, each row's length) are the same number, in Python
    and as the SQL the query runs.
    """
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    conn.executemany(
        "INSERT INTO t(rowid, body) VALUES (?, ?)", [(n, " ".join(r)) for n, r in enumerate(rows)]
    )
    match = " OR ".join(query)
    expected = dict(conn.execute("SELECT rowid, -bm25(t) FROM t WHERE t MATCH ?", (match,)))
    average = sum(map(len, rows)) / len(rows)
    weights = {word: idf(len(rows), sum(word in r for r in rows)) for word in query}
    for rowid, score in expected.items():
        held = sum(weights[word] for word in query if word in rows[rowid])
        ours = chunk_score(held, len(rows[rowid]), average)
        assert abs(ours - score) <= 1e-9 * max(1.0, abs(score))
        (in_sql,) = conn.execute(
            f"SELECT {score_sql('?', '?', average)}", (held, len(rows[rowid]))
        ).fetchone()
        assert abs(in_sql - score) <= 1e-9 * max(1.0, abs(score))


def test_a_term_in_half_the_rows_or_more_weighs_what_fts5_gives_it() -> None:
    assert idf(10, 5) == MIN_IDF
    assert idf(10, 9) == MIN_IDF
    assert idf(10, 1) > idf(10, 2) > MIN_IDF


def test_a_shorter_chunk_holding_a_term_scores_higher() -> None:
    assert chunk_score(1.0, 5, 20.0) > chunk_score(1.0, 20, 20.0) > chunk_score(1.0, 80, 20.0)
