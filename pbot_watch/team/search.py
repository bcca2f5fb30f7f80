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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg

from pbot_watch.history.jstext import js_trim, utf16_len
from pbot_watch.search.errors import BadRange, QueryError, UnknownNode
from pbot_watch.search.models import MatchMode, NodePage, NodeSource, SearchMatch, SearchResult
from pbot_watch.search.pages import (
    CHILDREN_PAGE,
    DEFAULT_READ_LIMIT,
    DEFAULT_SEARCH_LIMIT,
    MAX_READ_LIMIT,
    MAX_SEARCH_LIMIT,
)
from pbot_watch.search.queries import (
    MIN_TRIGRAM_CHARS,
    page_text,
    preview,
    snippet_at,
    time_range,
)
from pbot_watch.search.terms import query_terms
from pbot_watch.search.tokens import is_cjk
from pbot_watch.team.rows import pg_text, tsquery_of

_COLUMNS = (
    "n.record_id, n.id, n.kind, n.level, n.text, n.text_json, n.from_, n.to_, n.ready, n.completed, "
    "n.entry_ids, n.children, n.parents, r.session_id, r.name, r.name_json, r.workspace, r.machine, r.os_user"
)
_FROM = "pbot_nodes n JOIN pbot_records r ON r.record_id = n.record_id"


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

    def page(
        self,
        conn: psycopg.Connection,
        extra: Sequence[str],
        offset: int,
        limit: int,
        order: str = "n.to_ DESC, n.id",
    ) -> list[Any]:
        """A page of rows (``_COLUMNS``) in ``order``; the records joined after the page is cut."""
        inner = order.replace("score", "ts_rank(n.terms, %(q)s::tsquery)")
        score = ", ts_rank(n.terms, %(q)s::tsquery) AS score" if "score" in order else ""
        sql = (
            f"SELECT {_COLUMNS}{', n.score' if score else ''} FROM (SELECT n.*{score} FROM pbot_nodes n "
            f"WHERE {self.sql(*extra)} ORDER BY {inner} LIMIT %(limit)s OFFSET %(offset)s) n "
            f"JOIN pbot_records r ON r.record_id = n.record_id ORDER BY {order}"
        )
        return conn.execute(sql, {**self.params, "limit": limit, "offset": offset}).fetchall()


def _check_page(offset: int, limit: int, maximum: int, what: str) -> None:
    if offset < 0:
        raise QueryError(f"offset must be 0 or more (got {offset})")
    if not 1 <= limit <= maximum:
        raise QueryError(f"{what} limit must be between 1 and {maximum} (got {limit})")


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
    _check_page(offset, limit, MAX_SEARCH_LIMIT, "search")
    after, before = time_range(from_, to)
    where = _Where(session_id, workspace, machine, user, after, before)
    needle = pg_text(js_trim(query).lower())[0]
    if not needle:
        return _listing(conn, query, match, where, offset, limit)
    if match == "terms":
        return _terms(conn, query, where, offset, limit)
    where.params["pattern"] = like_pattern(needle)
    clauses = ["n.searchable", "n.text_lower LIKE %(pattern)s"]
    if len(needle) < MIN_TRIGRAM_CHARS and all(is_cjk(ch) for ch in needle):
        # One or two CJK characters are a term of the vector: it narrows, LIKE decides.
        where.params["token"] = tsquery_of([needle])
        # (Two indexed arms joined in a subquery: an OR of them in the WHERE scans every node.)
        clauses.insert(
            1,
            "(n.record_id, n.id) IN (SELECT record_id, id FROM pbot_nodes WHERE searchable AND "
            "terms @@ %(token)s::tsquery UNION ALL SELECT record_id, id FROM pbot_nodes WHERE capped AND searchable)",
        )
    total = where.count(conn, *clauses)
    rows = where.page(conn, clauses, offset, limit)
    matches = []
    for row in rows:
        text = _exact(row[4], row[5])
        lowered = text.lower()
        found = lowered.find(needle)
        hit = found if found <= 0 else utf16_len(lowered[:found])
        matches.append(_match(conn, row, text, snippet_at(text, hit), None))
    conn.rollback()
    return _result(query, "literal", matches, total, offset, limit)


def _one(conn: psycopg.Connection, sql: str, params: dict[str, Any]) -> Any:
    row = conn.execute(sql, params).fetchone()
    assert row is not None
    return row[0]


def _result(
    query: str, match: MatchMode, matches: list[SearchMatch], total: int, offset: int, limit: int
) -> SearchResult:
    return SearchResult(
        query=query,
        match=match,
        matches=matches,
        total=total,
        next_offset=offset + limit if offset + limit < total else None,
    )


def _listing(
    conn: psycopg.Connection, query: str, match: MatchMode, where: _Where, offset: int, limit: int
) -> SearchResult:
    """No query: the session nodes, newest first (a record's session node has the record's id)."""
    clauses = ["n.kind = 'session'", "n.id = n.record_id"]
    total = where.count(conn, *clauses)
    rows = where.page(conn, clauses, offset, limit)
    matches = [_match(conn, row, _exact(row[4], row[5]), "", None) for row in rows]
    conn.rollback()
    return _result(query, match, matches, total, offset, limit)


def _terms(conn: psycopg.Connection, query: str, where: _Where, offset: int, limit: int) -> SearchResult:
    wanted = query_terms(query)
    if not wanted:
        return _result(query, "terms", [], 0, offset, limit)
    where.params["q"] = tsquery_of(wanted)
    clauses = ["n.searchable", "n.terms @@ %(q)s::tsquery"]
    total = where.count(conn, *clauses)
    rows = where.page(conn, clauses, offset, limit, order="score DESC, n.to_ DESC, n.id")
    best = rows[0][-1] if rows and offset == 0 else None
    if best is None and rows:
        best = _one(
            conn,
            f"SELECT max(ts_rank(n.terms, %(q)s::tsquery)) FROM pbot_nodes n WHERE {where.sql(*clauses)}",
            where.params,
        )
    matches = []
    for row in rows:
        text = _exact(row[4], row[5])
        lowered = text.lower()
        hits = [lowered.find(term) for term in wanted if lowered.find(term) >= 0]
        first = min(hits) if hits else -1
        hit = first if first <= 0 else utf16_len(lowered[:first])
        score = float(row[-1]) / float(best) if best else 0.0
        matches.append(_match(conn, row, text, snippet_at(text, hit), round(score, 4)))
    conn.rollback()
    return _result(query, "terms", matches, total, offset, limit)


def _match(
    conn: psycopg.Connection, row: Sequence[Any], text: str, snippet: str, score: float | None
) -> SearchMatch:
    return SearchMatch.model_validate(
        {
            **_brief(row, text),
            "snippet": snippet,
            "parents": row[12],
            "children": row[11],
            "exchanges": _covered(conn, row[0], row[1], row[3]),
            "score": score,
        }
    )


def _covered(conn: psycopg.Connection, record_id: str, node_id: str, level: int) -> list[str]:
    """The exchanges under a summary, in order, walking its children level by level."""
    if level == 0:
        return [node_id]
    if level < 0:
        return []
    layer = [node_id]
    while True:
        found = {
            row[0]: row
            for row in conn.execute(
                "SELECT id, level, children FROM pbot_nodes WHERE record_id = %s AND id = ANY(%s)",
                (record_id, layer),
            )
        }
        rows = [found[i] for i in layer if i in found]
        if not rows or all(r[1] == 0 for r in rows):
            return [r[0] for r in rows if r[1] == 0]
        layer = [child for r in rows for child in (r[2] if r[1] > 0 else [r[0]])]


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
    _check_page(offset, limit, MAX_READ_LIMIT, "read")
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
