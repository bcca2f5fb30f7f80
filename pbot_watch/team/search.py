"""Search and read over the team index, with the semantics of local search (``search/queries.py``).

Literal: the query is trimmed and lower-cased as pbot does, a node matches when its lower-cased
text (``text_lower``, lowered by Python exactly as local search lowers it) contains it; only
exchanges and ready summaries with parseable dates are searched (``searchable``); no query lists
the sessions. A needle of three characters or more is found through the trigram index
(``pg_trgm``, a GIN index answering ``LIKE '%needle%'``); a one- or two-character CJK needle is
a token of the ``terms`` vector, which narrows the candidates before the same ``LIKE`` decides;
anything shorter is a scan. So totals are local search's totals on the same records.

Terms: the query's ranking terms (``terms.py``) against the ``terms`` vector, any of them,
ranked by ``ts_rank`` (question terms weigh more than answer terms, summaries least), newest
first among equals. Every hit says which machine, user and workspace (a name) it came from.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg

from pbot_watch.history.jstext import js_trim, utf16_len
from pbot_watch.search.errors import BadRange, QueryError, UnknownNode
from pbot_watch.search.literal import MIN_TRIGRAM_CHARS
from pbot_watch.search.models import MatchMode, NodePage, NodeSource, SearchMatch, SearchResult
from pbot_watch.search.pages import (
    CHILDREN_PAGE,
    DEFAULT_READ_LIMIT,
    DEFAULT_SEARCH_LIMIT,
    MAX_READ_LIMIT,
    MAX_SEARCH_LIMIT,
)
from pbot_watch.search.queries import (
    CoveredRow,
    check_page,
    covered_exchanges,
    page_text,
    preview,
    search_result,
    snippet_at,
    time_range,
)
from pbot_watch.search.terms import query_terms
from pbot_watch.search.tokens import is_cjk
from pbot_watch.team.rows import pg_text, tsquery_of
from pbot_watch.team.tallies import TALLY_MIN, Tally

_COLUMNS = (
    "n.record_id, n.id, n.kind, n.level, n.text, n.text_json, n.from_, n.to_, n.ready, n.completed, "
    "n.entry_ids, n.children, n.parents, r.session_id, r.name, r.name_json, r.workspace, r.machine, r.os_user"
)
_FROM = "pbot_nodes n JOIN pbot_records r ON r.record_id = n.record_id"
DENSE_HITS = 20_000
"""Hits from which a page is found by walking the newest-first index rather than sorting hits."""
TERMS_POOL = 2_000
"""Matches a ``terms`` query ranks: its newest ones (all of them when fewer match)."""


def like_pattern(needle: str) -> str:
    """``%needle%`` with LIKE's own characters escaped (the default escape is the backslash)."""
    escaped = needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _exact(text: str, text_json: str | None) -> str:
    value: str = json.loads(text_json) if text_json is not None else text
    return value


def _brief(row: Sequence[Any], text: str | None = None) -> dict[str, Any]:
    body = _exact(row[4], row[5]) if text is None else text
    return {
        "id": row[1],
        "kind": row[2],
        "level": row[3],
        "sessionId": row[13],
        "name": _exact(row[14], row[15]),
        "preview": preview(body),
        "from": row[6],
        "to": row[7],
        "ready": row[8],
        "completed": row[9],
        "workspace": row[16],
        "machine": row[17],
        "user": row[18],
    }


class _Where:
    """The filters every team query shares: session, workspace name, machine, user, time range.

    Every clause is on the node row (the record's own filters as a semi-join), so a count
    reads only the nodes, and a page joins its records for its twenty rows alone.
    """

    def __init__(
        self,
        session_id: str | None,
        workspace: str | Path | None,
        machine: str | None,
        user: str | None,
        after: float,
        before: float,
    ) -> None:
        self.clauses = ["n.from_ms IS NOT NULL", "n.to_ms IS NOT NULL"]
        self.params: dict[str, Any] = {}
        records: list[str] = []
        if session_id is not None:
            records.append("session_id = %(session_id)s")
            self.params["session_id"] = pg_text(session_id)[0]
        if workspace is not None:
            # The team knows workspaces by name: a path given here means its folder's name.
            records.append("workspace = %(workspace)s")
            self.params["workspace"] = Path(str(workspace).rstrip("/\\")).name or str(workspace)
        if machine is not None:
            records.append("machine = %(machine)s")
            self.params["machine"] = machine
        if user is not None:
            records.append("os_user = %(user)s")
            self.params["user"] = user
        if records:
            self.clauses.append(
                f"n.record_id IN (SELECT record_id FROM pbot_records WHERE {' AND '.join(records)})"
            )
        self.narrowing = bool(records) or after != -math.inf or before != math.inf
        """Whether any filter is set: tallies count the whole index only."""
        if after != -math.inf:
            self.clauses.append("n.to_ms >= %(after)s")
            self.params["after"] = after
        if before != math.inf:
            self.clauses.append("n.from_ms <= %(before)s")
            self.params["before"] = before

    def sql(self, *extra: str) -> str:
        return " AND ".join([*self.clauses, *extra])

    def count(self, conn: psycopg.Connection, *extra: str) -> int:
        return int(_one(conn, f"SELECT count(*) FROM pbot_nodes n WHERE {self.sql(*extra)}", self.params))

    def keys(
        self, conn: psycopg.Connection, extra: Sequence[str], offset: int, limit: int, *, counted: bool
    ) -> tuple[list[tuple[str, str]], int | None]:
        """A page of hits' ``(record_id, id)``, newest first, and the total when ``counted``.

        The total comes from the same pass (a window count over the narrow rows): a count of
        its own would test every candidate's text a second time. A page past the end has no
        row to carry it: then it is ``None``.
        """
        window = ", count(*) OVER ()" if counted else ""
        rows = conn.execute(
            f"SELECT n.record_id, n.id{window} FROM pbot_nodes n WHERE {self.sql(*extra)} "
            "ORDER BY n.to_ DESC, n.id LIMIT %(limit)s OFFSET %(offset)s",
            {**self.params, "limit": limit, "offset": offset},
        ).fetchall()
        total = int(rows[0][2]) if counted and rows else None
        return [(row[0], row[1]) for row in rows], total


def _rows(conn: psycopg.Connection, keys: Sequence[tuple[str, str]]) -> list[Any]:
    """The full rows (``_COLUMNS``) of these nodes, in this order."""
    if not keys:
        return []
    found = {
        (row[0], row[1]): row
        for row in conn.execute(
            f"SELECT {_COLUMNS} FROM {_FROM} WHERE (n.record_id, n.id) IN "
            "(SELECT * FROM unnest(%s::text[], %s::text[]))",
            ([k[0] for k in keys], [k[1] for k in keys]),
        )
    }
    return [found[key] for key in keys if key in found]


def team_search(
    conn: psycopg.Connection,
    query: str = "",
    match: MatchMode = "literal",
    session_id: str | None = None,
    workspace: str | Path | None = None,
    from_: str | None = None,
    to: str | None = None,
    offset: int = 0,
    limit: int = DEFAULT_SEARCH_LIMIT,
    machine: str | None = None,
    user: str | None = None,
) -> SearchResult:
    """``search_history`` over the team index (see the module's docstring for the rules)."""
    check_page(offset, limit, MAX_SEARCH_LIMIT, "search")
    after, before = time_range(from_, to)
    where = _Where(session_id, workspace, machine, user, after, before)
    needle = pg_text(js_trim(query).lower())[0]
    if not needle:
        return _listing(conn, query, match, where, offset, limit)
    if match == "terms":
        return _terms(conn, query, where, offset, limit)
    where.params["pattern"] = like_pattern(needle)
    matching = ["n.searchable", "n.text_lower LIKE %(pattern)s"]
    narrowed = list(matching)
    if session_id is None and len(needle) < MIN_TRIGRAM_CHARS and all(is_cjk(ch) for ch in needle):
        # One or two CJK characters are a term of the vector: it narrows, LIKE decides. (Not
        # within one session: its own nodes are fewer than a common character's, 0.9 s instead
        # of tens of ms at 100,000 exchanges.)
        where.params["token"] = tsquery_of([needle])
        # (Two indexed arms joined in a subquery: an OR of them in the WHERE scans every node.)
        narrowed.insert(
            1,
            "(n.record_id, n.id) IN (SELECT record_id, id FROM pbot_nodes WHERE searchable AND "
            "terms @@ %(token)s::tsquery UNION ALL SELECT record_id, id FROM pbot_nodes WHERE capped AND searchable)",
        )
    tally = None if where.narrowing else Tally("literal", where.params["pattern"])
    total = tally.total(conn) if tally is not None else None
    # The tally's count tests LIKE alone: a CJK token's narrowing, a saving for a rare needle,
    # costs more than it saves for one in most nodes (at 1 M exchanges a plain count of "数据"
    # took 2.5 s; its first search, narrowed in both counts, almost eight minutes).
    total, tried = _tally_first(conn, where, tally, total, narrowed, lambda c: where.count(c, *matching))
    tallied = total is not None
    dense = total is not None and _dense(conn, total)
    clauses = matching if dense else narrowed
    keys, counted = where.keys(conn, clauses, offset, limit, counted=not tallied)
    if total is None:
        total = counted if counted is not None else where.count(conn, *clauses)
    matches = []
    rows = _rows(conn, keys)
    covered = _covers(conn, rows)
    for row in rows:
        text = _exact(row[4], row[5])
        lowered = text.lower()
        found = lowered.find(needle)
        hit = found if found <= 0 else utf16_len(lowered[:found])
        matches.append(_match(row, text, snippet_at(text, hit), None, covered(row)))
    conn.rollback()
    _keep_tally(conn, None if tried else tally, tallied, total, lambda c: where.count(c, *matching))
    return search_result(query, "literal", matches, total, offset, limit)


def _dense(conn: psycopg.Connection, total: int) -> bool:
    """For a query with many hits, walk the newest-first index and test each node until a page is full.

    The planner cannot tell how common a substring is; the tally can. A bitmap of a common
    needle's candidates means testing and sorting every hit to keep twenty.
    """
    if total < DENSE_HITS:
        return False
    conn.execute("SET LOCAL enable_bitmapscan = off")
    return True


def _tally_first(
    conn: psycopg.Connection,
    where: _Where,
    tally: Tally | None,
    total: int | None,
    clauses: Sequence[str],
    count: Callable[[psycopg.Connection], int],
) -> tuple[int | None, bool]:
    """For a query not tallied yet with ``TALLY_MIN`` hits or more: its tally registered now, and
    its total (``None`` when the role may not register one); and whether registering was tried.

    Whether it has that many is a count that stops there. The registration's own count is the
    search's total: the search counting every hit and the registration counting them all again
    was two full counts (minutes at a million exchanges) for a common query's first search.
    """
    if tally is None or total is not None:
        return total, False
    probe = _one(
        conn,
        f"SELECT count(*) FROM (SELECT 1 FROM pbot_nodes n WHERE {where.sql(*clauses)} LIMIT %(upto)s) hits",
        {**where.params, "upto": TALLY_MIN},
    )
    conn.rollback()
    if int(probe) < TALLY_MIN:
        return None, False
    return tally.register(conn, count), True


def _keep_tally(
    conn: psycopg.Connection,
    tally: Tally | None,
    tallied: bool,
    total: int,
    count: Callable[[psycopg.Connection], int],
) -> None:
    """After a search: keep its tally up, or tally it when it had many hits."""
    if tally is None:
        return
    if tallied:
        tally.keep_up(conn)
    elif total >= TALLY_MIN:
        tally.register(conn, count)
    conn.rollback()


def _one(conn: psycopg.Connection, sql: str, params: dict[str, Any]) -> Any:
    row = conn.execute(sql, params).fetchone()
    assert row is not None
    return row[0]


def _listing(
    conn: psycopg.Connection, query: str, match: MatchMode, where: _Where, offset: int, limit: int
) -> SearchResult:
    """No query: the session nodes, newest first (a record's session node has the record's id)."""
    clauses = ["n.kind = 'session'", "n.id = n.record_id"]
    keys, total = where.keys(conn, clauses, offset, limit, counted=True)
    if total is None:
        total = where.count(conn, *clauses)
    rows = _rows(conn, keys)
    covered = _covers(conn, rows)
    matches = [_match(row, _exact(row[4], row[5]), "", None, covered(row)) for row in rows]
    conn.rollback()
    return search_result(query, match, matches, total, offset, limit)


def _terms(conn: psycopg.Connection, query: str, where: _Where, offset: int, limit: int) -> SearchResult:
    wanted = query_terms(query)
    if not wanted:
        return search_result(query, "terms", [], 0, offset, limit)
    where.params["q"] = tsquery_of(wanted)
    clauses = ["n.searchable", "n.terms @@ %(q)s::tsquery"]
    tally = None if where.narrowing else Tally("terms", where.params["q"])
    total = tally.total(conn) if tally is not None else None
    total, tried = _tally_first(conn, where, tally, total, clauses, lambda c: where.count(c, *clauses))
    tallied = total is not None
    if total is None:
        total = where.count(conn, *clauses)
    _dense(conn, total)
    # Rank the newest matches (TERMS_POOL): ts_rank of every node holding a common word is
    # most of a second at a million exchanges; the best score among them is the 1.0 of scores.
    ranked = conn.execute(
        "SELECT record_id, id, score, max(score) OVER () FROM (SELECT n.record_id, n.id, n.to_, "
        "ts_rank(n.terms, %(q)s::tsquery) AS score FROM (SELECT n.record_id, n.id, n.to_, n.terms "
        f"FROM pbot_nodes n WHERE {where.sql(*clauses)} ORDER BY n.to_ DESC, n.id LIMIT %(pool)s) n) n "
        "ORDER BY score DESC, to_ DESC, id LIMIT %(limit)s OFFSET %(offset)s",
        {**where.params, "pool": max(TERMS_POOL, offset + limit), "limit": limit, "offset": offset},
    ).fetchall()
    scores = {(row[0], row[1]): float(row[2]) / float(row[3]) if row[3] else 0.0 for row in ranked}
    matches = []
    rows = _rows(conn, [(r[0], r[1]) for r in ranked])
    covered = _covers(conn, rows)
    for row in rows:
        text = _exact(row[4], row[5])
        lowered = text.lower()
        hits = [lowered.find(term) for term in wanted if lowered.find(term) >= 0]
        first = min(hits) if hits else -1
        hit = first if first <= 0 else utf16_len(lowered[:first])
        score = round(scores[row[0], row[1]], 4)
        matches.append(_match(row, text, snippet_at(text, hit), score, covered(row)))
    conn.rollback()
    _keep_tally(conn, None if tried else tally, tallied, total, lambda c: where.count(c, *clauses))
    return search_result(query, "terms", matches, total, offset, limit)


def _match(
    row: Sequence[Any], text: str, snippet: str, score: float | None, exchanges: list[str]
) -> SearchMatch:
    return SearchMatch.model_validate(
        {
            **_brief(row, text),
            "snippet": snippet,
            "parents": row[12],
            "children": row[11],
            "exchanges": exchanges,
            "score": score,
        }
    )


def _covers(conn: psycopg.Connection, rows: Sequence[Any]) -> Callable[[Any], list[str]]:
    """The exchanges under each hit of a page (``covered_exchanges``), from one read of their records.

    A walk per summary cost a round trip per level: most of a search's time on a busy server.
    """
    records = sorted({row[0] for row in rows if row[3] > 0})
    nodes: dict[str, dict[str, CoveredRow]] = {record: {} for record in records}
    if records:
        for record_id, node_id, level, children in conn.execute(
            "SELECT record_id, id, level, children FROM pbot_nodes WHERE record_id = ANY(%s) AND level >= 0",
            (records,),
        ):
            nodes[record_id][node_id] = (node_id, level, children)

    def covered(row: Any) -> list[str]:
        known = nodes.get(row[0], {})
        return covered_exchanges(row[1], row[3], lambda layer: {i: known[i] for i in layer if i in known})

    return covered


def _briefs(conn: psycopg.Connection, record_id: str, ids: list[str]) -> list[dict[str, Any]]:
    if not ids:
        return []
    found = {
        row[1]: row
        for row in conn.execute(
            f"SELECT {_COLUMNS} FROM {_FROM} WHERE n.record_id = %s AND n.id = ANY(%s)", (record_id, ids)
        )
    }
    return [_brief(found[i]) for i in ids if i in found]


def team_read(
    conn: psycopg.Connection,
    node_id: str,
    offset: int = 0,
    limit: int = DEFAULT_READ_LIMIT,
    children_offset: int = 0,
) -> NodePage:
    """``read_node`` on a team node: a page of its text, its parents and a page of its children."""
    check_page(offset, limit, MAX_READ_LIMIT, "read")
    if children_offset < 0:
        raise QueryError(f"children offset must be 0 or more (got {children_offset})")
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM {_FROM} WHERE n.id = %s ORDER BY n.record_id LIMIT 1", (pg_text(node_id)[0],)
    ).fetchone()
    if row is None:
        conn.rollback()
        raise UnknownNode(f"no node {node_id!r} in the team index")
    text = _exact(row[4], row[5])
    try:
        piece, length, next_offset = page_text(text, offset, limit)
    except BadRange as error:
        conn.rollback()
        raise BadRange(f"{error} of node {node_id}") from None
    children: list[str] = row[11]
    child_page = children[children_offset : children_offset + CHILDREN_PAGE]
    next_children = (
        children_offset + CHILDREN_PAGE if children_offset + CHILDREN_PAGE < len(children) else None
    )
    page = NodePage.model_validate(
        {
            **_brief(row, text),
            "text": piece,
            "totalLength": length,
            "nextOffset": next_offset,
            "parents": _briefs(conn, row[0], row[12]),
            "children": _briefs(conn, row[0], child_page),
            "nextChildrenOffset": next_children,
            "source": NodeSource(session_id=row[13], entry_ids=row[10]),
        }
    )
    conn.rollback()
    return page
