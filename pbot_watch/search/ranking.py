"""How ``terms`` search orders hits: BM25, then what the archive knows around each hit.

BM25 over the ranking terms (``terms.py``) finds nodes that share words with the query. The
archive knows more than words, and each of these rules lifts a node the query is about:

- **sides**: the person's side and the answer's side of an exchange are weighed apart;
- **summaries**: a summary that matches lifts the exchanges it covers (it says in other words
  what they are about);
- **neighbours**: an exchange next to a strong hit is lifted a little (a question and the
  answer it got often sit in neighbouring exchanges);
- **session names**: a hit in a session whose name holds query terms is lifted;
- **time**: an exchange inside a time the query names ("in May 2023") is lifted, and for a
  "when" question an exchange that mentions a time;
- **expansion**: the terms that mark the best first hits, weighed below the query's own, find
  exchanges that say the same thing in other words (pseudo-relevance feedback).

Every rule adds to a score normalised so that the best BM25 hit is 1.0; a weight of zero
switches a rule off (``bench/locomo_recall.py`` measures each rule that way). Ties go newest
first, as everywhere else in search. Deterministic and offline: no model, no randomness.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pbot_watch.search.pools import node_counts, term_pool
from pbot_watch.search.terms import STOP_WORDS, stem, terms
from pbot_watch.search.tokens import fts_any, fts_quote, is_cjk
from pbot_watch.search.when import TimeIntent, mentions_time

if TYPE_CHECKING:
    from pbot_watch.search.index import SearchIndex


@dataclass(frozen=True, slots=True)
class Ranking:
    """The weights of the ranking rules (module docstring); zero switches a rule off."""

    question_weight: float = 1.0
    """BM25 column weight of the person's side of an exchange."""
    answer_weight: float = 1.0
    """BM25 column weight of the answer's side."""
    summary_weight: float = 0.7
    """BM25 column weight of summaries: they paraphrase, so they follow unless they match clearly better."""
    summary_lift: float = 0.1
    """Share of a matching summary's score that each exchange under it receives. Small: measured
    with the offline summarizer, whose summaries repeat their exchanges' words, a larger share
    mostly counts those words twice and costs recall; a model's summaries may deserve more."""
    neighbours: float = 0.3
    """Share of the better neighbour's score an exchange receives."""
    session_name: float = 0.3
    """Added when every query term is in the session's name (in proportion when some are)."""
    time_match: float = 0.5
    """Added to an exchange inside a time the query names."""
    when_mentions: float = 0.15
    """Added, for a "when" question, to an exchange that mentions a time."""
    expansion: float = 0.3
    """Weight of the expansion terms' BM25 against the query's own."""
    expansion_docs: int = 3
    """First hits whose terms feed the expansion."""
    expansion_terms: int = 8
    """Expansion terms added to the query."""
    pool: int = 200
    """BM25 hits each rule looks at; rules may add nodes around them."""
    common_term_nodes: int = 1000
    """A term in more nodes than this is scored from its pool of best nodes (``pools.py``)."""
    term_pool: int = 1000
    """Nodes kept in a common term's pool: far more than a page, so the best hits are in it."""


DEFAULT_RANKING = Ranking()

_ALL_COMMON_NODES = 8000
"""Nodes holding every common term of a query that are scored exactly; more cost more than pools
save. Scoring them costs about 1.5 microseconds a node (12 ms at the cap on the 100,000-exchange
bench), and without it a query of three common words kept 1 of the exact first 10 hits."""
_LIFTED_SUMMARIES = 20
"""Summaries in the pool whose exchanges get a lift: the best ones; the rest add little."""
_NEIGHBOURED = 50
"""Exchanges whose neighbours are looked up: the best ones."""
_TIME_CHECKED = 100
"""Exchanges a "when" question looks at for a time: the best ones; a small lift cannot carry
the others into a first page, and reading every candidate's text cost a third of the query."""
_TIME_CHECKED_CHARS = 4000
"""Characters of each such exchange looked at: a time worth finding is rarely deep in a long log."""
_EXPANSION_CANDIDATES = 4
"""Candidate terms looked at per expansion term wanted, the most used in the best hits first."""
_EXPANSION_MIN_DF = 2
"""An expansion term must be in at least this many nodes: one only its own exchange has finds nothing new."""
_EXPANSION_MAX_SHARE = 0.1
"""Nor in more than this share of all nodes (nor a common term, ``Ranking.common_term_nodes``):
a common term cannot tell one topic from another."""


@dataclass
class Candidate:
    """A node the ranking considers, with the parts of its score."""

    rowid: int
    bm25: float = 0.0
    score: float = 0.0


def _bm25(
    index: SearchIndex, query_terms: list[str], where: str, params: dict[str, Any], ranking: Ranking, n: int
) -> dict[int, float]:
    """The ``n`` best nodes in scope for ``query_terms`` and their BM25 (higher is better).

    Common terms are scored from their pools (``pools.py``), the others exactly; a scope the
    pools barely reach (a small workspace) is scored exactly, which is cheap for it anyway.
    """
    if not query_terms:
        return {}
    weights = (ranking.question_weight, ranking.answer_weight, ranking.summary_weight)
    counts = node_counts(index, query_terms, ranking.common_term_nodes + 1)
    common = [t for t in query_terms if counts[t] > ranking.common_term_nodes]
    if not common:
        return _exact_bm25(index, query_terms, where, params, weights, n)
    rare = [t for t in query_terms if 0 < counts[t] <= ranking.common_term_nodes]
    rare_scores = _exact_bm25(index, rare, "", {}, weights, None) if rare else {}
    scores = dict(rare_scores)
    for term in common:
        for rowid, part in term_pool(index, term, weights, ranking.term_pool).items():
            scores[rowid] = scores.get(rowid, 0.0) + part
    if len(common) > 1 and _holding_all(index, common, _ALL_COMMON_NODES) <= _ALL_COMMON_NODES:
        # A node with every common term, each moderately often, can be in no term's pool and
        # still be the best hit: the nodes holding them all get their exact common part, when
        # they are few enough to score quickly. The best of them are kept, ties at that cut
        # (far below a page) as FTS5 meets them: ordering them newest first would cost a join.
        for rowid, part in _best_holding_all(index, common, weights, ranking.term_pool):
            scores[rowid] = rare_scores.get(rowid, 0.0) + part
    if where:
        scores = {r: scores[r] for r in _in_scope(index, list(scores), where, params)}
        if len(scores) < n:
            return _exact_bm25(index, query_terms, where, params, weights, n)
    return _best_of(index, scores, n)


def _exact_bm25(
    index: SearchIndex,
    query_terms: list[str],
    where: str,
    params: dict[str, Any],
    weights: tuple[float, float, float],
    n: int | None,
) -> dict[int, float]:
    """FTS5's BM25 of the nodes in scope holding a query term: the best ``n`` (None: all)."""
    values: dict[str, Any] = {
        "fts": fts_any(query_terms),
        "wq": weights[0],
        "wa": weights[1],
        "ws": weights[2],
        "n": -1 if n is None else n,
    }
    score = "-bm25(nodes_terms, :wq, :wa, :ws)"
    if not where:
        if n is None:
            sql = f"SELECT rowid, {score} FROM nodes_terms WHERE nodes_terms MATCH :fts"
            return dict(index.conn.execute(sql, values).fetchall())
        # The whole index: FTS5 ranks on its own, without reading node rows. One more row than
        # wanted tells whether ties run past the cut; then the cut would be arbitrary, and the
        # query below orders the ties newest first, as with a filter.
        found = index.conn.execute(
            f"SELECT rowid, {score} FROM nodes_terms WHERE nodes_terms MATCH :fts "
            "ORDER BY bm25(nodes_terms, :wq, :wa, :ws) LIMIT :n + 1",
            values,
        ).fetchall()
        if len(found) <= n or found[n - 1][1] != found[n][1]:
            return dict(found[:n])
        where = "1"
    sql = (
        f"SELECT n.rowid, {score} AS score FROM nodes_terms JOIN nodes n ON n.rowid = nodes_terms.rowid "
        f"JOIN records r ON r.rowid = n.record WHERE nodes_terms MATCH :fts AND {where} "
        "ORDER BY score DESC, n.to_key DESC, n.id_key LIMIT :n"
    )
    return dict(index.conn.execute(sql, {**params, **values}).fetchall())


def _best_holding_all(
    index: SearchIndex, query_terms: list[str], weights: tuple[float, float, float], n: int
) -> list[tuple[int, float]]:
    """The ``n`` best nodes holding every one of ``query_terms``, by their BM25 for them.

    BM25 adds up per term, so a node's score is the same whether the terms are joined by AND
    or by OR: these are exact scores.
    """
    score = "bm25(nodes_terms, ?, ?, ?)"
    return index.conn.execute(
        f"SELECT rowid, -{score} FROM nodes_terms WHERE nodes_terms MATCH ? ORDER BY {score} LIMIT ?",
        (*weights, " AND ".join(map(fts_quote, query_terms)), *weights, n),
    ).fetchall()


def _holding_all(index: SearchIndex, query_terms: list[str], cap: int) -> int:
    """How many nodes hold every one of ``query_terms``, counting no further than ``cap + 1``."""
    row = index.conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM nodes_terms WHERE nodes_terms MATCH ? LIMIT ?)",
        (" AND ".join(map(fts_quote, query_terms)), cap + 1),
    ).fetchone()
    return int(row[0])


def _in_scope(index: SearchIndex, rowids: list[int], where: str, params: dict[str, Any]) -> set[int]:
    out: set[int] = set()
    for start in range(0, len(rowids), 500):
        chunk = {f"r{i}": rowid for i, rowid in enumerate(rowids[start : start + 500])}
        marks = ",".join(f":{name}" for name in chunk)
        out.update(
            r
            for (r,) in index.conn.execute(
                f"SELECT n.rowid FROM nodes n JOIN records r ON r.rowid = n.record "
                f"WHERE n.rowid IN ({marks}) AND {where}",
                {**params, **chunk},
            )
        )
    return out


def _best_of(index: SearchIndex, scores: dict[int, float], n: int) -> dict[int, float]:
    """The ``n`` best of ``scores``; ties at the cut go newest first, as everywhere in search."""
    ordered = sorted(scores.items(), key=lambda item: -item[1])
    if len(ordered) <= n:
        return dict(ordered)
    edge = ordered[n - 1][1]
    head = [item for item in ordered if item[1] > edge]
    tied = [item for item in ordered if item[1] == edge]
    rows = _node_rows(index, [rowid for rowid, _ in tied])
    tied.sort(key=lambda item: rows[item[0]].id_key)
    tied.sort(key=lambda item: rows[item[0]].to_key, reverse=True)
    return dict(head + tied[: n - len(head)])


def _normalised(scores: dict[int, float]) -> dict[int, float]:
    top = max(scores.values(), default=0.0)
    return {rowid: s / top for rowid, s in scores.items()} if top > 0 else {}


def rank(
    index: SearchIndex,
    query_terms: list[str],
    intent: TimeIntent,
    where: str,
    params: dict[str, Any],
    ranking: Ranking,
    want: int,
) -> list[tuple[int, float]]:
    """Nodes in scope for the query, best first, with their scores: at least ``want`` when there are.

    ``where`` and ``params`` are the scope (session, workspace, time range) as SQL over ``n``
    (nodes) and ``r`` (records); an empty ``where`` means the whole index.
    """
    pool = max(ranking.pool, want)
    base = _normalised(_bm25(index, query_terms, where, params, ranking, pool))
    if not base:
        return []
    cands = {rowid: Candidate(rowid, s, s) for rowid, s in base.items()}
    rows = _node_rows(index, list(cands))
    if ranking.expansion > 0:
        extra = expansion_terms(index, query_terms, _best(cands, rows, ranking.expansion_docs), ranking)
        for rowid, s in _normalised(_bm25(index, extra, where, params, ranking, pool)).items():
            cands.setdefault(rowid, Candidate(rowid)).score += ranking.expansion * s
        rows = _node_rows(index, list(cands), rows)
    if ranking.summary_lift > 0:
        _lift_summaries(index, cands, rows, ranking.summary_lift, where, params)
    rows = _node_rows(index, list(cands), rows)
    if ranking.session_name > 0:
        _lift_names(index, cands, rows, query_terms, ranking.session_name)
    if ranking.time_match > 0 and intent.ranges:
        for c in cands.values():
            row = rows[c.rowid]
            if any(row.to_ms >= lo and row.from_ms < hi for lo, hi in intent.ranges):
                c.score += ranking.time_match
    if ranking.when_mentions > 0 and intent.asks_when:
        exchanges = sorted((c for c in cands.values() if rows[c.rowid].level == 0), key=lambda c: -c.score)
        texts = _texts(index, [c.rowid for c in exchanges[:_TIME_CHECKED]])
        for rowid, text in texts.items():
            if mentions_time(text[:_TIME_CHECKED_CHARS]):
                cands[rowid].score += ranking.when_mentions
    if ranking.neighbours > 0:
        _lift_neighbours(index, cands, rows, ranking.neighbours, where, params)
        rows = _node_rows(index, list(cands), rows)
    ordered = sorted(cands.values(), key=lambda c: rows[c.rowid].id_key)
    ordered.sort(key=lambda c: rows[c.rowid].to_key, reverse=True)
    ordered.sort(key=lambda c: c.score, reverse=True)
    return [(c.rowid, c.score) for c in ordered]


@dataclass(frozen=True, slots=True)
class _Row:
    record: int
    level: int
    seq: int
    from_ms: float
    to_ms: float
    to_key: bytes
    id_key: bytes
    children: str


def _node_rows(
    index: SearchIndex, rowids: list[int], known: dict[int, _Row] | None = None
) -> dict[int, _Row]:
    out = dict(known or {})
    missing = [r for r in rowids if r not in out]
    for start in range(0, len(missing), 500):
        chunk = missing[start : start + 500]
        for rowid, *values in index.conn.execute(
            "SELECT rowid, record, level, seq, from_ms, to_ms, to_key, id_key, children FROM nodes "
            f"WHERE rowid IN ({','.join('?' * len(chunk))})",
            chunk,
        ):
            out[rowid] = _Row(*values)
    return out


def _texts(index: SearchIndex, rowids: Sequence[int]) -> dict[int, str]:
    out: dict[int, str] = {}
    for start in range(0, len(rowids), 500):
        chunk = list(rowids[start : start + 500])
        out.update(
            index.conn.execute(
                f"SELECT rowid, node_text(text, packed) FROM node_texts WHERE rowid IN ({','.join('?' * len(chunk))})",
                chunk,
            ).fetchall()
        )
    return out


def _best(cands: dict[int, Candidate], rows: dict[int, _Row], n: int) -> list[int]:
    """The ``n`` best exchanges by BM25 (ties newest first)."""
    exchanges = [c for c in cands.values() if rows[c.rowid].level == 0]
    exchanges.sort(key=lambda c: rows[c.rowid].id_key)
    exchanges.sort(key=lambda c: rows[c.rowid].to_key, reverse=True)
    exchanges.sort(key=lambda c: c.bm25, reverse=True)
    return [c.rowid for c in exchanges[:n]]


def expansion_terms(
    index: SearchIndex, query_terms: list[str], best: list[int], ranking: Ranking
) -> list[str]:
    """Terms that mark the best first hits, by tf-idf over them, the query's own left out.

    A term counts in proportion to how often each of the best exchanges uses it (relative to
    its length), times its inverse document frequency over the index; terms too rare to find
    anything new or too common to tell topics apart are skipped.
    """
    if not best or ranking.expansion_terms <= 0:
        return []
    weights: dict[str, float] = {}
    for text in _texts(index, best).values():
        words = [t for t in terms(text, index.rules) if t not in STOP_WORDS]
        for term, count in Counter(words).items():
            weights[term] = weights.get(term, 0.0) + count / len(words)
    own = set(query_terms)
    total = max(1, int(index.conn.execute("SELECT coalesce(max(rowid), 0) FROM nodes").fetchone()[0]))
    most = min(int(_EXPANSION_MAX_SHARE * total), ranking.common_term_nodes)
    scored: list[tuple[float, str]] = []
    ordered = sorted(weights.items(), key=lambda item: (-item[1], item[0]))
    # Numbers, single CJK characters and two-letter words ("ok", "go") name no topic.
    candidates = [
        (term, weight)
        for term, weight in ordered
        if term not in own and not term.isdigit() and len(term) >= (2 if is_cjk(term[0]) else 3)
    ]
    # Counting a term's nodes walks its node list: only the most used candidates are counted.
    for term, weight in candidates[: _EXPANSION_CANDIDATES * ranking.expansion_terms]:
        df = node_counts(index, [term], most + 1)[term]
        if df < _EXPANSION_MIN_DF or df > most:
            continue
        scored.append((weight * math.log(total / df), term))
    scored.sort(key=lambda x: (-x[0], x[1]))
    return [term for _, term in scored[: ranking.expansion_terms]]


def _lift_summaries(
    index: SearchIndex,
    cands: dict[int, Candidate],
    rows: dict[int, _Row],
    share: float,
    where: str,
    params: dict[str, Any],
) -> None:
    """Each exchange under a matching summary gains ``share`` of the summary's score."""
    summaries = sorted(
        (c for c in cands.values() if rows[c.rowid].level > 0), key=lambda c: c.bm25, reverse=True
    )[:_LIFTED_SUMMARIES]
    for summary in summaries:
        lift = share * summary.bm25
        for rowid in _covered(index, rows[summary.rowid], where, params):
            candidate = cands.setdefault(rowid, Candidate(rowid))
            candidate.score += lift


def _covered(index: SearchIndex, summary: _Row, where: str, params: dict[str, Any]) -> list[int]:
    """Row ids of the exchanges (in scope) under a summary, walking its children down."""
    layer: list[str] = json.loads(summary.children)
    found: list[int] = []
    scope = f" AND {where}" if where else ""
    while layer:
        names = {f"c{i}": child for i, child in enumerate(layer)}
        marks = ",".join(f":c{i}" for i in range(len(layer)))
        layer = []
        for rowid, level, children in index.conn.execute(
            "SELECT n.rowid, n.level, n.children FROM nodes n JOIN records r ON r.rowid = n.record "
            f"WHERE +n.record = :record AND n.id IN ({marks}) AND n.searchable = 1{scope}",
            {**params, **names, "record": summary.record},
        ):
            if level == 0:
                found.append(rowid)
            else:
                layer.extend(json.loads(children))
    return found


def _lift_names(
    index: SearchIndex,
    cands: dict[int, Candidate],
    rows: dict[int, _Row],
    query_terms: list[str],
    weight: float,
) -> None:
    """Hits in a session whose name holds query terms gain ``weight`` times the share it holds."""
    shares: dict[int, float] = {}
    for term in query_terms:
        for (record,) in index.conn.execute(
            "SELECT rowid FROM records_terms WHERE records_terms MATCH ?", (fts_quote(term),)
        ):
            shares[record] = shares.get(record, 0.0) + 1 / len(query_terms)
    if shares:
        for c in cands.values():
            c.score += weight * shares.get(rows[c.rowid].record, 0.0)


def _lift_neighbours(
    index: SearchIndex,
    cands: dict[int, Candidate],
    rows: dict[int, _Row],
    share: float,
    where: str,
    params: dict[str, Any],
) -> None:
    """Each exchange next to one of the best hits gains ``share`` of the better neighbour's score."""
    best = sorted(
        (c for c in cands.values() if rows[c.rowid].level == 0), key=lambda c: c.score, reverse=True
    )
    best = best[:_NEIGHBOURED]
    scope = f" AND {where}" if where else ""
    gains: dict[int, float] = {}
    for c in best:
        row = rows[c.rowid]
        for rowid in (
            r
            for (r,) in index.conn.execute(
                "SELECT n.rowid FROM nodes n JOIN records r ON r.rowid = n.record WHERE n.record = :record "
                f"AND n.seq IN (:before, :after) AND n.level = 0 AND n.searchable = 1{scope}",
                {**params, "record": row.record, "before": row.seq - 1, "after": row.seq + 1},
            )
        ):
            gains[rowid] = max(gains.get(rowid, 0.0), share * c.score)
    for rowid, gain in gains.items():
        cands.setdefault(rowid, Candidate(rowid)).score += gain


def drop_time_words(query_terms: list[str], intent: TimeIntent) -> list[str]:
    """The query's terms without those that only named a time, when other terms remain."""
    if not intent.words:
        return query_terms
    timing = {stem(w) for w in intent.words} | intent.words
    rest = [t for t in query_terms if t not in timing]
    return rest or query_terms
