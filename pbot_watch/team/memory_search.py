"""``search_memory`` and ``recall`` over the team's raw memory (``pbot_memory``, ``memory_push.py``).

The rules are local memory search's (``memory/query.py``), over every machine's pushed
sources (each session's current branch, as its machine's raw memory knows it):

* **literal**: the query trimmed (Python's ``strip``, as local) and lower-cased; a source
  matches when its lower-cased text (``text_lower``, lowered by Python on the pushing machine)
  contains it, so totals are local totals on the same sessions, CJK included. A needle of three
  characters or more is found through the ``pg_trgm`` index; one or two CJK characters through
  the ``terms`` vector (every CJK character and pair is a term), then the same ``LIKE``;
  anything else by a scan. A needle with a newline finds nothing (a line holds none).
* **terms**: the query's ranking terms against the ``terms`` vector, any of them, ranked by
  ``ts_rank``. Local terms search ranks by BM25 over chunks, so scores and order differ.

Hits are ordered as local ones: historical first, then newest first (literal) or best first
(terms); one hit per source, with the line, snippet and section local search would show
(``memory_hit``), and the machine, user and workspace it came from. ``in``, ``leaf`` and a
cursor's snapshot are local notions: a team search takes a session id and pages by offset.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg

from pbot_watch.memory.handles import cursor_key, make_cursor, parse_cursor, parse_handle
from pbot_watch.memory.models import MemorySearchResult, RecallPage
from pbot_watch.memory.query import RECALL_CHARS, BranchSource, memory_hit, read_lines
from pbot_watch.search.errors import Argument, QueryError, UnknownHandle
from pbot_watch.search.literal import MIN_TRIGRAM_CHARS
from pbot_watch.search.models import MatchMode
from pbot_watch.search.pages import MAX_MEMORY_PAGE, MEMORY_PAGE
from pbot_watch.search.terms import query_terms
from pbot_watch.search.tokens import is_cjk
from pbot_watch.team.rows import pg_text, tsquery_of
from pbot_watch.team.search import like_pattern

_COLUMNS = (
    "machine, os_user, workspace, session_id, entry_id, part, kind, timestamp, label, sections, "
    "line_count, context, capped, text, text_json"
)
_NEWEST = 'timestamp COLLATE "C" DESC, machine, session_id, entry_id DESC, part DESC'
_TEAM_SCOPE = ("team",)
"""What a team search's cursor is bound to besides the query (never valid for a local search)."""


def team_memory_search(
    conn: psycopg.Connection,
    query: str = "",
    match: MatchMode = "literal",
    session_id: str | None = None,
    after: str | None = None,
    limit: int = MEMORY_PAGE,
    *,
    machine: str | None = None,
    user: str | None = None,
    workspace: str | Path | None = None,
) -> MemorySearchResult:
    """Search the team's raw memory (the module's docstring says how)."""
    if not 1 <= limit <= MAX_MEMORY_PAGE:
        raise QueryError(
            "memory search ", Argument("limit"), f" must be between 1 and {MAX_MEMORY_PAGE} (got {limit})"
        )
    key = cursor_key(query, match, None, session_id, None, _TEAM_SCOPE)
    offset = parse_cursor(after, key)[0] if after is not None else 0
    clauses, params = _filters(session_id, machine, user, workspace)
    needle = query.strip()
    order = _NEWEST
    score = "NULL::real"
    if needle and match == "literal":
        lowered = needle.lower()
        if "\n" in lowered:
            conn.rollback()
            return _result(query, match, [], 0, key, offset, limit)
        params["pattern"] = like_pattern(pg_text(lowered)[0])
        clauses.append("text_lower LIKE %(pattern)s")
        if len(lowered) < MIN_TRIGRAM_CHARS and all(is_cjk(ch) for ch in lowered):
            # A CJK character or pair is a term of the vector: it narrows, LIKE decides. (Two
            # indexed arms in a union: an OR of them in the WHERE scans every source.)
            params["token"] = tsquery_of([lowered])
            clauses.append(
                "(machine, session_id, entry_id, part) IN (SELECT machine, session_id, entry_id, part "
                "FROM pbot_memory WHERE terms @@ %(token)s::tsquery UNION ALL SELECT machine, session_id, "
                "entry_id, part FROM pbot_memory WHERE capped)"
            )
        order = f"context, {_NEWEST}"
    elif needle:
        wanted = query_terms(needle)
        if not wanted:
            conn.rollback()
            return _result(query, match, [], 0, key, offset, limit)
        params["q"] = tsquery_of(wanted)
        clauses.append("terms @@ %(q)s::tsquery")
        score = "ts_rank(terms, %(q)s::tsquery)"
        order = f"context, score DESC, {_NEWEST}"
    where = " AND ".join(clauses) or "true"
    # The page's keys and the total in one pass over narrow rows; the page's texts after it (a
    # window over whole rows read every hit's text a second time).
    keys = conn.execute(
        f"SELECT machine, session_id, entry_id, part, {score} AS score, count(*) OVER () FROM pbot_memory "
        f"WHERE {where} ORDER BY {order} LIMIT %(limit)s OFFSET %(offset)s",
        {**params, "limit": limit, "offset": offset},
    ).fetchall()
    total = int(keys[0][-1]) if keys else None
    if total is None:
        counted = conn.execute(f"SELECT count(*) FROM pbot_memory WHERE {where}", params).fetchone()
        total = int(counted[0]) if counted else 0
    rows = _page_rows(conn, keys)
    conn.rollback()
    best = max((float(k[4]) for k in keys if k[4] is not None), default=0.0)
    hits = []
    for key_row in keys:
        row = rows.get(tuple(key_row[:4]))
        if row is None:
            continue
        source, text = _source(row)
        scored = round(float(key_row[4]) / best, 4) if key_row[4] is not None and best else None
        hit = memory_hit(source, text, needle, match, scored)
        hit.machine, hit.user, hit.workspace = row[0], row[1], row[2]
        hits.append(hit)
    return _result(query, match, hits, total, key, offset, limit)


def _page_rows(conn: psycopg.Connection, keys: Sequence[Any]) -> dict[tuple[Any, ...], Any]:
    """The whole rows (``_COLUMNS``) of a page's sources, by ``(machine, session_id, entry_id, part)``."""
    if not keys:
        return {}
    found = conn.execute(
        f"SELECT {_COLUMNS} FROM pbot_memory WHERE (machine, session_id, entry_id, part) IN "
        "(SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::int[]))",
        ([k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys], [k[3] for k in keys]),
    )
    return {(row[0], row[3], row[4], row[5]): row for row in found}


def team_recall(
    conn: psycopg.Connection, handle: str, from_line: int = 1, machine: str | None = None
) -> RecallPage:
    """``recall`` of a handle from a team memory search: the source's lines from ``from_line``.

    A handle names a session's source; the same session pushed by two machines (a copied
    session file) has the source twice: ``machine`` chooses, else the first machine by name.
    """
    session_id, entry_id, part = parse_handle(handle)
    if session_id is None:
        raise UnknownHandle(handle)  # a short handle names a source inside the caller's session only
    clauses = ["session_id = %s", "entry_id = %s", "part = %s"]
    params: list[Any] = [pg_text(session_id)[0], pg_text(entry_id)[0], part]
    if machine is not None:
        clauses.append("machine = %s")
        params.append(machine)
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM pbot_memory WHERE {' AND '.join(clauses)} ORDER BY machine LIMIT 1", params
    ).fetchone()
    conn.rollback()
    if row is None:
        raise UnknownHandle(handle)
    source, text = _source(row)
    return read_lines(handle, source, text, from_line, RECALL_CHARS)


def _filters(
    session_id: str | None, machine: str | None, user: str | None, workspace: str | Path | None
) -> tuple[list[str], dict[str, Any]]:
    clauses: list[str] = []
    params: dict[str, Any] = {}
    if session_id is not None:
        clauses.append("session_id = %(session_id)s")
        params["session_id"] = pg_text(session_id)[0]
    if machine is not None:
        clauses.append("machine = %(machine)s")
        params["machine"] = machine
    if user is not None:
        clauses.append("os_user = %(user)s")
        params["user"] = user
    if workspace is not None:
        # The team knows workspaces by name: a path given here means its folder's name.
        clauses.append("workspace = %(workspace)s")
        params["workspace"] = Path(str(workspace).rstrip("/\\")).name or str(workspace)
    return clauses, params


def _source(row: Sequence[Any]) -> tuple[BranchSource, str]:
    text: str = json.loads(row[14]) if row[14] is not None else row[13]
    sections = [(str(title), int(first), int(last)) for title, first, last in row[9]]
    source = BranchSource(
        0, row[3], row[4], row[5], row[6], row[7], row[8], sections, row[10], bool(row[12]), row[11]
    )
    return source, text


def _result(
    query: str, match: MatchMode, hits: list[Any], total: int, key: str, offset: int, limit: int
) -> MemorySearchResult:
    following = offset + limit if offset + limit < total else None
    return MemorySearchResult(
        query=query,
        match=match,
        hits=hits,
        total=total,
        next_cursor=make_cursor(key, following, 0) if following is not None else None,
        scope=list(dict.fromkeys(hit.session_id for hit in hits)),
    )
