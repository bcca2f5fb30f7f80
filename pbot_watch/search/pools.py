"""The best nodes of a common term, remembered until the index changes ("champion lists").

BM25 scores every node that holds a query term. For a term in tens of thousands of nodes
("error" in a coding archive) that alone costs more than a search may take. BM25 is a sum over
the query's terms, so a term's part of every score can be computed once: the few hundred
nodes where it weighs most, with its part of their score, are kept in ``term_pools``. A query
then adds up those parts for its common terms and scores its rare terms (few nodes each)
exactly; a node outside a common term's pool gets nothing for that term, which can only move
it among nodes that term barely distinguishes anyway. The pools are tagged with the index's
generation, which triggers on ``node_texts`` bump on every change, so a pool is never stale:
the first query after a change recomputes the pools it needs, and later ones read them.
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING

from pbot_watch.search.tokens import fts_quote
from pbot_watch.sqlite import try_write

if TYPE_CHECKING:
    from pbot_watch.search.index import SearchIndex


def generation(index: SearchIndex) -> int:
    row = index.conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
    return int(row[0]) if row else 0


KEPT_COUNTS = 1000
"""A term in more nodes than this has its count remembered, as its pool is (``term_counts``)."""


def node_counts(index: SearchIndex, terms: list[str], cap: int) -> dict[str, int]:
    """How many nodes hold each term, counting no further than ``cap``.

    FTS5 keeps no count per term: counting walks the term's node list. Capped, the walk costs
    at most ``cap`` steps, and a common term needs no more than "more than ``cap``". A count
    past ``KEPT_COUNTS`` is walked once per index generation and then read back: deciding
    whether a word is in a quarter of all nodes walked 33,000 of them on every query.
    """
    out: dict[str, int] = {}
    for term in terms:
        count = _walk(index, term, min(cap, KEPT_COUNTS + 1))
        if count > KEPT_COUNTS and cap > KEPT_COUNTS + 1:
            count = min(cap, _kept_count(index, term))
        out[term] = count
    return out


def _walk(index: SearchIndex, term: str, cap: int | None) -> int:
    sql = "SELECT count(*) FROM (SELECT 1 FROM nodes_terms WHERE nodes_terms MATCH ? LIMIT ?)"
    return int(index.conn.execute(sql, (fts_quote(term), -1 if cap is None else cap)).fetchone()[0])


def _kept_count(index: SearchIndex, term: str) -> int:
    now = generation(index)
    row = index.conn.execute("SELECT generation, count FROM term_counts WHERE term = ?", (term,)).fetchone()
    if row is not None and row[0] == now:
        return int(row[1])
    count = _walk(index, term, None)
    _remember(index, "INSERT OR REPLACE INTO term_counts VALUES (?, ?, ?)", (term, now, count))
    return count


def _remember(index: SearchIndex, sql: str, values: tuple[object, ...]) -> None:
    """Write what a query learnt, unless the service holds the write lock (a later query will)."""
    try_write(index.conn, lambda: index.conn.execute(sql, values), 0)


def term_pool(
    index: SearchIndex, term: str, weights: tuple[float, float, float], size: int
) -> dict[int, float]:
    """The ``size`` nodes where ``term`` weighs most, and its part of their BM25 score.

    ``weights`` are the BM25 column weights (question, answer, summary): a pool is kept per
    term, weights and size.
    """
    key = f"{term}\x00{weights[0]:g},{weights[1]:g},{weights[2]:g}\x00{size}"
    now = generation(index)
    row = index.conn.execute(
        "SELECT generation, rowids, scores FROM term_pools WHERE key = ?", (key,)
    ).fetchone()
    if row is not None and row[0] == now:
        rowids, scores = array("q"), array("d")
        rowids.frombytes(row[1])
        scores.frombytes(row[2])
        return dict(zip(rowids, scores, strict=True))
    found = index.conn.execute(
        "SELECT rowid, -bm25(nodes_terms, ?, ?, ?) FROM nodes_terms WHERE nodes_terms MATCH ? "
        "ORDER BY bm25(nodes_terms, ?, ?, ?) LIMIT ?",
        (*weights, fts_quote(term), *weights, size),
    ).fetchall()
    values = (
        key,
        now,
        array("q", [r for r, _ in found]).tobytes(),
        array("d", [s for _, s in found]).tobytes(),
    )
    # A search never waits for the service's write lock just to remember a pool.
    _remember(index, "INSERT OR REPLACE INTO term_pools VALUES (?, ?, ?, ?)", values)
    return dict(found)
