"""search and read over the archive index, with personal-bot 0.2.3's semantics.

``search_history`` in ``literal`` mode is pbot's ``HistoryService.search``: the query is
trimmed and lower-cased, a node matches when its lower-cased text contains it (exchanges and
*ready* summaries; no query lists the session nodes), ``from``/``to`` keep nodes whose span
intersects the range (``Date.parse(node.to) >= from && Date.parse(node.from) <= to``, so a
node with an unparseable date never appears), hits are ordered newest first by ``to`` then by
id (``localeCompare``), and the snippet is 400 UTF-16 units starting 80 before the hit. The
difference is speed: FTS5 finds the candidates instead of a scan of every record.

``terms`` mode ranks by BM25 over the ranking terms (``terms.py``), then by what the archive
knows around each hit (``ranking.py``).

``read_node`` is pbot's ``read``: text paged in UTF-16 units, never splitting a surrogate pair
(with pbot's exact adjustments), parents and a page of 20 children with previews, and the
source session id and entry ids.

These are the functions the CLI and the MCP server call; they raise ``QueryError`` subclasses
for anything the caller must correct.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pbot_watch.display import record_query
from pbot_watch.history.jstext import (
    collapsed_head,
    js_trim,
    to_well_formed,
    utf16_slice,
)
from pbot_watch.pi.untrusted import has_lone_surrogate
from pbot_watch.search.dates import parse_ms
from pbot_watch.search.errors import Argument, BadRange, QueryError, UnknownNode
from pbot_watch.search.index import SearchIndex, capped_snippet, text_head, text_holds
from pbot_watch.search.literal import MIN_TRIGRAM_CHARS, held_nodes
from pbot_watch.search.models import (
    MatchMode,
    NodeBrief,
    NodePage,
    NodeSource,
    SearchMatch,
    SearchResult,
)
from pbot_watch.search.pages import (
    CHILDREN_PAGE,
    DEFAULT_READ_LIMIT,
    DEFAULT_SEARCH_LIMIT,
    MAX_READ_LIMIT,
    MAX_SEARCH_LIMIT,
)
from pbot_watch.search.pools import node_counts
from pbot_watch.search.ranking import DEFAULT_RANKING, Ranking, drop_time_words, rank
from pbot_watch.search.session_ids import full_session_id
from pbot_watch.search.terms import query_terms
from pbot_watch.search.tokens import fts_any, fts_quote, is_cjk
from pbot_watch.search.when import time_intent

SNIPPET_BEFORE = 80
SNIPPET_LENGTH = 400
PREVIEW_LENGTH = 100


_NODE_COLUMNS = (
    "n.rowid, n.id, n.kind, n.level, node_text(t.text, t.packed), t.text_json, n.from_, n.to_, n.ready, n.completed, "
    "n.entry_ids, n.children, n.parents, n.record, r.session_id, r.name, r.workspace, r.name_json, n.capped, "
    "r.machine, r.user_"
)
CAPPED_HEAD = 1 << 16
"""Characters of a capped text read for a preview (100 units of it with whitespace collapsed)."""
_HEAD_COLUMNS = _NODE_COLUMNS.replace(
    "node_text(t.text, t.packed), t.text_json,",
    "CASE WHEN n.capped THEN NULL ELSE node_text(t.text, t.packed) END, CASE WHEN n.capped THEN NULL ELSE t.text_json END,",
)
"""``_NODE_COLUMNS`` without a capped text (``n.capped``), ``_with_heads`` puts its head in: for
previews and snippets, which must not read a 50 MB pasted log whole (nor SQLite a ``substr``
of it, which loads the value whole)."""


def _with_heads(index: SearchIndex, rows: list[Any]) -> list[Any]:
    """Rows of ``_HEAD_COLUMNS`` with the first ``CAPPED_HEAD`` characters of each capped text."""
    return [
        (*row[:4], text_head(index.conn, row[0], CAPPED_HEAD), *row[5:]) if row[18] else row for row in rows
    ]


_NODE_FROM = "nodes n JOIN records r ON r.rowid = n.record JOIN node_texts t ON t.rowid = n.rowid"

_CAPPED_HOLDING = "SELECT value FROM json_each(:capped)"
"""The searchable capped nodes whose text holds the needle (``_capped_holding``), in SQL."""


CAPPED_NODES = "SELECT rowid FROM nodes WHERE capped AND searchable = 1"
"""The searchable capped nodes. ``WHERE capped`` repeats the partial index ``nodes_capped``'s own
condition, which is what lets SQLite use it: ``capped = 1`` scans every node (19 ms at 100,000
exchanges, on every literal query)."""


def _capped_holding(index: SearchIndex, needle: str) -> list[int]:
    """Searchable capped nodes whose text holds ``needle``: few (only texts over INDEXED_CHARS),
    each read in pieces, once per query (``index.text_holds``).
    """
    return [rowid for (rowid,) in index.conn.execute(CAPPED_NODES) if text_holds(index.conn, rowid, needle)]


WALK_DENSITY = 0.02
"""When at least this share of all nodes match, walking the nodes newest first and checking the
text finds a page sooner than sorting every hit (common words: a page is ~1/density rows away)."""
COMMON_TERM_SHARE = 0.25
"""A query term in more than this share of nodes is dropped when the query has rarer terms."""


def _exact_text(row: Sequence[Any]) -> str:
    text: str = json.loads(row[5]) if row[5] is not None else row[4]
    return text


def _brief(row: Sequence[Any]) -> dict[str, Any]:
    text = _exact_text(row)
    return {
        "id": row[1],
        "kind": row[2],
        "level": row[3],
        "sessionId": row[14],
        "name": json.loads(row[17]) if row[17] is not None else row[15],
        "preview": preview(text),
        "from": row[6],
        "to": row[7],
        "ready": bool(row[8]),
        "completed": bool(row[9]),
        "workspace": row[16],
        "machine": row[19],
        "user": row[20],
    }


def check_page(offset: int, limit: int, maximum: int, what: str) -> None:
    """Pbot's paging bounds (local and team search alike)."""
    if offset < 0:
        raise QueryError(Argument("offset"), f" must be 0 or more (got {offset})")
    if not 1 <= limit <= maximum:
        raise QueryError(f"{what} ", Argument("limit"), f" must be between 1 and {maximum} (got {limit})")


def time_range(from_: str | None, to: str | None) -> tuple[float, float]:
    """Pbot's range check: both ends parse as ISO dates or times, and from <= to."""
    after = -math.inf if from_ is None else parse_ms(from_)
    before = math.inf if to is None else parse_ms(to)
    if after is None or before is None:
        bad = from_ if after is None else to
        raise BadRange(
            f"invalid time {bad!r}: use an ISO date or time, e.g. 2026-11-29 or 2026-11-29T14:30:00Z"
        )
    if after > before:
        raise BadRange(f"invalid time range: from {from_} is after to {to}")
    return after, before


def _workspace_values(workspace: str | Path) -> list[str]:
    path = Path(workspace).expanduser()
    values = {str(path), str(path.absolute())}
    with contextlib.suppress(OSError):
        values.add(str(path.resolve()))
    return sorted(values)


class _Filter:
    """The WHERE clause every search shares: session, workspace, time range."""

    def __init__(
        self,
        session_id: str | None,
        workspace: str | Path | None,
        after: float,
        before: float,
        folders: Sequence[Path] | None,
    ) -> None:
        # Date.parse gives NaN for these, and NaN compares false with anything.
        self.clauses = ["n.from_ms IS NOT NULL", "n.to_ms IS NOT NULL"]
        self.params: dict[str, Any] = {}
        self.narrowing = False
        if folders is not None:
            names = [f":folder{i}" for i in range(len(folders))]
            self.clauses.append(f"r.folder IN ({', '.join(names)})" if names else "0")
            self.params.update({name[1:]: str(f) for name, f in zip(names, folders, strict=True)})
        self.narrowing = bool(self.params) or session_id is not None or workspace is not None
        self.narrowing = self.narrowing or after != -math.inf or before != math.inf
        if session_id is not None:
            self.clauses.append("r.session_id = :session_id")
            self.params["session_id"] = to_well_formed(session_id)  # as index.py stores ids
        if workspace is not None:
            values = _workspace_values(workspace)
            names = [f":ws{i}" for i in range(len(values))]
            self.clauses.append(f"r.workspace IN ({', '.join(names)})")
            self.params.update({name[1:]: to_well_formed(v) for name, v in zip(names, values, strict=True)})
        if after != -math.inf:
            self.clauses.append("n.to_ms >= :after")
            self.params["after"] = after
        if before != math.inf:
            self.clauses.append("n.from_ms <= :before")
            self.params["before"] = before

    def where(self, *extra: str) -> str:
        return " AND ".join([*self.clauses, *extra])


# Texts can be megabytes (index.INDEXED_CHARS); the helpers below look only at what they show.
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def _units_before(text: str, end: int) -> int:
    """UTF-16 units of ``text[:end]``: one per character, two for one above U+FFFF (no copy made)."""
    return end if text.isascii() else end + len(_ASTRAL.findall(text, 0, end))


def _utf16_index(haystack: str, needle: str) -> int:
    """``haystack.indexOf(needle)`` in UTF-16 units (0 for an empty needle, -1 when absent)."""
    found = haystack.find(needle)
    return found if found <= 0 else _units_before(haystack, found)


def _utf16_window(text: str, start: int, end: int) -> str:
    """``utf16_slice(text, start, end)``, encoding only the characters around it."""
    if text.isascii():
        return text[start:end]
    first = start // 2  # no character before it starts after unit ``start``
    before = _units_before(text, first)
    return utf16_slice(text[first : end + 1], start - before, end - before)


def preview(text: str) -> str:
    """Pbot's preview: the first 100 UTF-16 units of the text with whitespace collapsed."""
    return collapsed_head(text, PREVIEW_LENGTH)


def snippet_at(text: str, hit: int) -> str:
    """Pbot's snippet: 400 units of the text starting 80 before the hit (a miss counts as -1)."""
    start = max(0, hit - SNIPPET_BEFORE)
    return _utf16_window(text, start, start + SNIPPET_LENGTH)


CoveredRow = tuple[str, int, list[str]]
"""A node as the walk under a summary sees it: id, level, children."""


def covered_exchanges(
    node_id: str, level: int, lookup: Callable[[list[str]], dict[str, CoveredRow]]
) -> list[str]:
    """The exchanges under a summary, in order, walking children level by level.

    ``lookup`` gives the nodes of one layer it finds (by the ids asked for); local and team
    search each read them from their own store.
    """
    if level == 0:
        return [node_id]
    if level < 0:
        return []
    layer = [node_id]
    while True:
        by_id = lookup(layer)
        found = [by_id[i] for i in layer if i in by_id]
        if not found or all(r[1] == 0 for r in found):
            return [r[0] for r in found if r[1] == 0]
        layer = [child for r in found for child in (r[2] if r[1] > 0 else [r[0]])]


def _covered_exchanges(index: SearchIndex, record: int, node_id: str, level: int) -> list[str]:
    def lookup(layer: list[str]) -> dict[str, CoveredRow]:
        stored = to_well_formed(layer)  # children as the record says them; ids as index.py stores them
        rows = index.conn.execute(
            f"SELECT id, level, children FROM nodes WHERE +record = ? AND id IN ({','.join('?' * len(stored))})",
            (record, *stored),
        ).fetchall()
        by_id = {r[0]: (r[0], r[1], json.loads(r[2])) for r in rows}
        return {asked: by_id[key] for asked, key in zip(layer, stored, strict=True) if key in by_id}

    return covered_exchanges(node_id, level, lookup)


def _match(index: SearchIndex, row: Sequence[Any], snippet: str, score: float | None) -> SearchMatch:
    return SearchMatch.model_validate(
        {
            **_brief(row),
            "snippet": snippet,
            "parents": json.loads(row[12]),
            "children": json.loads(row[11]),
            "exchanges": _covered_exchanges(index, row[13], row[1], row[3]),
            "score": score,
        }
    )


def search_history(
    index: SearchIndex,
    query: str = "",
    match: MatchMode = "literal",
    session_id: str | None = None,
    workspace: str | Path | None = None,
    from_: str | None = None,
    to: str | None = None,
    offset: int = 0,
    limit: int = DEFAULT_SEARCH_LIMIT,
    folders: Sequence[Path] | None = None,
    ranking: Ranking = DEFAULT_RANKING,
    now: datetime | None = None,
) -> SearchResult:
    """Search exchanges and ready summaries (or list sessions when ``query`` is empty).

    ``folders`` limits the search to records from these record folders (None: all indexed).
    ``ranking`` weighs the rules of ``terms`` ranking; ``now`` anchors relative times in a
    ``terms`` query ("last May"; default: the clock).
    """
    check_page(offset, limit, MAX_SEARCH_LIMIT, "search")
    after, before = time_range(from_, to)
    if folders is not None and _covers_index(index, folders):
        folders = None  # the common case: every indexed record is in scope, so no filter
    session_id = full_session_id(index.conn, "records", session_id)
    filt = _Filter(session_id, workspace, after, before, folders)
    needle = js_trim(record_query(query) if match == "literal" else query).lower()
    if not needle:
        return _sessions(index, query, match, filt, offset, limit)
    if match == "terms":
        return _terms(index, query, filt, offset, limit, ranking, now)
    if has_lone_surrogate(needle):
        # Half a character: SQLite cannot take it, and the index holds U+FFFD in its place.
        return _scan(index, query, filt, offset, limit, needle)
    if len(needle) < MIN_TRIGRAM_CHARS and not all(is_cjk(ch) for ch in needle):
        return _scan(index, query, filt, offset, limit, needle)
    # A capped node (index.INDEXED_CHARS) is not wholly in the FTS tables: its text is tested.
    capped = _capped_holding(index, needle)
    filt.params["capped"] = json.dumps(capped)
    if len(needle) >= MIN_TRIGRAM_CHARS:
        held = held_nodes(index, needle)
        filt.params.update(held.params)
        member = held.probe if held.count >= WALK_DENSITY * _node_count(index) else held.among
        fts = f"({member} OR n.rowid IN ({_CAPPED_HOLDING}))"
        total = _count(index, filt, ["n.searchable = 1", fts]) if filt.narrowing else held.count + len(capped)
        return _page(index, query, match, filt, ["n.searchable = 1", fts], offset, limit, needle, total)
    # A CJK character or pair is itself a token of the terms index: exact, and fast.
    filt.params["fts"] = fts_quote(needle)
    fts = f"(n.rowid IN (SELECT rowid FROM nodes_terms WHERE nodes_terms MATCH :fts) OR n.rowid IN ({_CAPPED_HOLDING}))"
    if filt.narrowing:
        total = _count(index, filt, ["n.searchable = 1", fts])
    else:
        # Only searchable nodes are in the FTS tables, and the match is exact: count there.
        # (The terms index holds a capped node's head: count such a node once.)
        total = index.conn.execute(
            "SELECT (SELECT count(*) FROM nodes_terms WHERE nodes_terms MATCH :fts) + (SELECT count(*) FROM "
            f"({_CAPPED_HOLDING}) h WHERE NOT EXISTS (SELECT 1 FROM nodes_terms WHERE nodes_terms MATCH :fts AND rowid = h.value))",
            {"fts": filt.params["fts"], "capped": filt.params["capped"]},
        ).fetchone()[0]
    if total >= WALK_DENSITY * _node_count(index):
        return _walk(index, query, filt, offset, limit, needle, total, set(capped))
    return _page(index, query, match, filt, ["n.searchable = 1", fts], offset, limit, needle, total)


# A record's session node is the node with the record's own id (pbot's indexHistory makes exactly
# one per record, and the index keeps one node per id and record). The partial index
# nodes_sessions holds just those nodes, newest first, with the columns the list filters on: the
# list reads 300 index entries for 300 sessions (0.21 ms), where one lookup per record from the
# records side took 0.66 ms and asking every node for its kind would read the whole table.
_SESSIONS_FROM = "nodes n JOIN records r ON r.rowid = n.record AND r.id = n.id"


def _sessions(
    index: SearchIndex, query: str, match: MatchMode, filt: _Filter, offset: int, limit: int
) -> SearchResult:
    """The session list (no query): every record's session node with parseable dates, newest first.

    The page and the total come from one pass (a window count): a separate count walked the
    records a second time, half the time of the list. A page past the end has no row to carry
    the total, so only then is it counted on its own.
    """
    where = filt.where("n.kind = 'session'")
    page = index.conn.execute(
        f"SELECT n.rowid, count(*) OVER () FROM {_SESSIONS_FROM} WHERE {where} "
        "ORDER BY n.to_key DESC, n.id_key LIMIT :limit OFFSET :offset",
        {**filt.params, "limit": limit, "offset": offset},
    ).fetchall()
    if page:
        total = int(page[0][1])
    else:
        sql = f"SELECT count(*) FROM {_SESSIONS_FROM} WHERE {where}"
        total = int(index.conn.execute(sql, filt.params).fetchone()[0])
    ids = [rowid for rowid, _ in page]
    return _result(index, query, match, _rows(index, ids), "", total, offset, limit)


def _covers_index(index: SearchIndex, folders: Sequence[Path]) -> bool:
    wanted = {str(f) for f in folders}
    return all(folder in wanted for (folder,) in index.conn.execute("SELECT DISTINCT folder FROM records"))


def _node_count(index: SearchIndex) -> int:
    # max(rowid) is instant and close enough to decide between two plans.
    return int(index.conn.execute("SELECT coalesce(max(rowid), 0) FROM nodes").fetchone()[0])


def _count(index: SearchIndex, filt: _Filter, extra: list[str]) -> int:
    sql = f"SELECT count(*) FROM nodes n JOIN records r ON r.rowid = n.record WHERE {filt.where(*extra)}"
    return int(index.conn.execute(sql, filt.params).fetchone()[0])


def _result(
    index: SearchIndex,
    query: str,
    match: MatchMode,
    rows: list[Any],
    needle: str,
    total: int,
    offset: int,
    limit: int,
) -> SearchResult:
    matches = []
    for row in rows:
        snippet = (
            capped_snippet(index.conn, row[0], needle, SNIPPET_BEFORE, SNIPPET_LENGTH) if row[18] else None
        )
        if snippet is None:
            text = _exact_text(_rows(index, [row[0]])[0]) if row[18] else _exact_text(row)
            snippet = snippet_at(text, _utf16_index(text.lower(), needle))
        matches.append(_match(index, row, snippet, None))
    return search_result(query, match, matches, total, offset, limit)


def search_result(
    query: str, match: MatchMode, matches: list[SearchMatch], total: int, offset: int, limit: int
) -> SearchResult:
    """A page of hits with pbot's ``nextOffset`` (local and team search alike)."""
    return SearchResult(
        query=query,
        match=match,
        matches=matches,
        total=total,
        next_offset=offset + limit if offset + limit < total else None,
    )


def _walk(
    index: SearchIndex,
    query: str,
    filt: _Filter,
    offset: int,
    limit: int,
    needle: str,
    total: int,
    capped: set[int],
) -> SearchResult:
    """Common needles: read nodes newest first and keep those whose text has the needle.

    A capped node's text is not read here: ``capped`` says which of them hold the needle.
    """
    rows = index.conn.execute(
        "SELECT n.rowid, n.capped, CASE WHEN n.capped THEN '' ELSE node_text(t.text, t.packed) END, "
        f"CASE WHEN n.capped THEN NULL ELSE t.text_json END FROM {_NODE_FROM} "
        f"WHERE {filt.where('n.searchable = 1')} ORDER BY n.to_key DESC, n.id_key",
        filt.params,
    )
    page: list[int] = []
    seen = 0
    for rowid, is_capped, text, text_json in rows:
        if rowid in capped if is_capped else needle in (json.loads(text_json) if text_json else text).lower():
            if seen >= offset:
                page.append(rowid)
                if len(page) == limit:
                    break
            seen += 1
    return _result(index, query, "literal", _rows(index, page, heads=True), needle, total, offset, limit)


def _page(
    index: SearchIndex,
    query: str,
    match: MatchMode,
    filt: _Filter,
    extra: list[str],
    offset: int,
    limit: int,
    needle: str,
    total: int | None = None,
) -> SearchResult:
    """Rare needles: sort every hit, read one page."""
    where = filt.where(*extra)
    if total is None:
        total = _count(index, filt, extra)
    # Order and page on the narrow rows first; only the page's texts are read.
    ids = [
        rowid
        for (rowid,) in index.conn.execute(
            f"SELECT n.rowid FROM nodes n JOIN records r ON r.rowid = n.record WHERE {where} "
            "ORDER BY n.to_key DESC, n.id_key LIMIT :limit OFFSET :offset",
            {**filt.params, "limit": limit, "offset": offset},
        )
    ]
    return _result(index, query, match, _rows(index, ids, heads=True), needle, total, offset, limit)


def _rows(index: SearchIndex, rowids: list[int], *, heads: bool = False) -> list[Any]:
    """Full rows for these node row ids, in the given order (``heads``: see ``_HEAD_COLUMNS``)."""
    if not rowids:
        return []
    marks = ",".join("?" * len(rowids))
    columns = _HEAD_COLUMNS if heads else _NODE_COLUMNS
    rows = index.conn.execute(
        f"SELECT {columns} FROM {_NODE_FROM} WHERE n.rowid IN ({marks})", rowids
    ).fetchall()
    found = {row[0]: row for row in (_with_heads(index, rows) if heads else rows)}
    return [found[r] for r in rowids if r in found]


def _scan(
    index: SearchIndex, query: str, filt: _Filter, offset: int, limit: int, needle: str
) -> SearchResult:
    """One or two characters that are not CJK: no index can narrow them, so read the texts."""
    rows = index.conn.execute(
        f"SELECT n.rowid, node_text(t.text, t.packed), t.text_json FROM {_NODE_FROM} "
        f"WHERE {filt.where('n.searchable = 1')} ORDER BY n.to_key DESC, n.id_key",
        filt.params,
    )
    hits = [
        rowid
        for rowid, text, text_json in rows
        if needle in (json.loads(text_json) if text_json else text).lower()
    ]
    return _result(
        index,
        query,
        "literal",
        _rows(index, hits[offset : offset + limit], heads=True),
        needle,
        len(hits),
        offset,
        limit,
    )


def _drop_common(index: SearchIndex, terms: list[str], filt: _Filter) -> list[str]:
    """Terms found in more than ``COMMON_TERM_SHARE`` of all nodes, dropped when rarer ones remain.

    Such a term adds almost nothing to BM25 (its IDF is near zero) but makes FTS5 score most
    of the index; the query's rarer terms decide the ranking anyway. A query made only of
    common terms keeps them all.
    """
    if len(terms) < 2:  # nothing to weigh a single term against
        return terms
    if filt.narrowing:
        # Common within what is searched: a name in every turn of one conversation is noise
        # there even if the rest of the archive never mentions it.
        limit = COMMON_TERM_SHARE * _count(index, filt, ["n.searchable = 1"])
        counts = {}
        for t in terms:
            fts = "n.rowid IN (SELECT rowid FROM nodes_terms WHERE nodes_terms MATCH :term)"
            counts[t] = _count(index, _with(filt, term=fts_quote(t)), ["n.searchable = 1", fts])
    else:
        limit = COMMON_TERM_SHARE * _node_count(index)
        # Only "over the limit or not" matters: counting stops there (a common term's walk is long).
        counts = node_counts(index, terms, int(limit) + 1)
    # A term no node has weighs nothing either way: it must not make the others look common.
    rare = [t for t in terms if 0 < counts[t] <= limit]
    return rare or terms


def _with(filt: _Filter, **params: Any) -> _Filter:
    copy = _Filter.__new__(_Filter)
    copy.clauses, copy.params, copy.narrowing = list(filt.clauses), {**filt.params, **params}, filt.narrowing
    return copy


def _terms(
    index: SearchIndex,
    query: str,
    filt: _Filter,
    offset: int,
    limit: int,
    ranking: Ranking,
    now: datetime | None,
) -> SearchResult:
    intent = time_intent(query, now or datetime.now(UTC))
    terms = query_terms(query, index.rules)
    if ranking.time_match > 0:
        terms = drop_time_words(terms, intent)
    terms = _drop_common(index, terms, filt)
    if not terms:
        return SearchResult(query=query, match="terms", matches=[], total=0, next_offset=None)
    where = filt.where("n.searchable = 1") if filt.narrowing else ""
    ranked = rank(index, terms, intent, where, filt.params, ranking, offset + limit)
    if filt.narrowing:
        fts = "n.rowid IN (SELECT rowid FROM nodes_terms WHERE nodes_terms MATCH :fts)"
        matching = _count(index, _with(filt, fts=fts_any(terms)), ["n.searchable = 1", fts])
    else:
        matching = index.conn.execute(
            "SELECT count(*) FROM nodes_terms WHERE nodes_terms MATCH ?", (fts_any(terms),)
        ).fetchone()[0]
    # The ranking looks at the best BM25 hits (at least offset + limit of them) and the nodes
    # its rules add around them: the total is what matches the words, or more when rules add.
    total = max(len(ranked), matching)
    page = ranked[offset : offset + limit]
    scores = dict(page)
    words = [w.lower() for w in query.split() if w.strip()]
    matches = []
    for row in _rows(index, [r for r, _ in page]):
        text = _exact_text(row)
        lowered = text.lower()
        hits = [h for h in (_utf16_index(lowered, t) for t in [*terms, *words]) if h >= 0]
        matches.append(
            _match(index, row, snippet_at(text, min(hits) if hits else 0), round(scores[row[0]], 6))
        )
    return search_result(query, "terms", matches, total, offset, limit)


# ---- read ------------------------------------------------------------------------------


def _unit(units: bytes, i: int) -> int:
    return int.from_bytes(units[2 * i : 2 * i + 2], "little") if 0 <= 2 * i < len(units) else -1


def page_text(text: str, offset: int, limit: int) -> tuple[str, int, int | None]:
    """Pbot's text page: (slice, length, nextOffset), moving the ends off a surrogate pair's middle.

    An offset on a low surrogate steps back one unit; an end just after a high surrogate steps
    back one unit, or forward one when the page would otherwise be a single unit.
    """
    units = text.encode("utf-16-le", "surrogatepass")
    length = len(units) // 2
    if offset > length:
        raise BadRange(f"offset {offset} is past the end of the text ({length} UTF-16 units)")
    if offset and 0xDC00 <= _unit(units, offset) <= 0xDFFF:
        offset -= 1
    end = min(length, offset + limit)
    if end < length and 0xD800 <= _unit(units, end - 1) <= 0xDBFF:
        end += 1 if end - offset == 1 else -1
    piece = units[2 * offset : 2 * end].decode("utf-16-le", "surrogatepass")
    return piece, length, end if end < length else None


def _node_row(index: SearchIndex, node_id: str) -> Sequence[Any]:
    row = index.conn.execute(
        f"SELECT {_NODE_COLUMNS} FROM {_NODE_FROM} WHERE n.id = ? ORDER BY r.rowid LIMIT 1",
        (to_well_formed(node_id),),
    ).fetchone()
    if row is None:
        raise UnknownNode(node_id)
    return row  # type: ignore[no-any-return]


def _briefs(index: SearchIndex, record: int, ids: list[str]) -> list[NodeBrief]:
    if not ids:
        return []
    ids = to_well_formed(ids)  # as index.py stores node ids
    placeholders = ",".join("?" * len(ids))
    rows = index.conn.execute(
        f"SELECT {_HEAD_COLUMNS} FROM {_NODE_FROM} WHERE +n.record = ? AND n.id IN ({placeholders})",
        (record, *ids),
    ).fetchall()
    rows = _with_heads(index, rows)
    by_id: dict[str, Sequence[Any]] = {}
    for row in rows:
        by_id.setdefault(row[1], row)
    return [NodeBrief.model_validate(_brief(by_id[i])) for i in ids if i in by_id]


def read_node(
    index: SearchIndex,
    node_id: str,
    offset: int = 0,
    limit: int = DEFAULT_READ_LIMIT,
    children_offset: int = 0,
) -> NodePage:
    """A page of one node's text with its parents and a page of its children."""
    check_page(offset, limit, MAX_READ_LIMIT, "read")
    if children_offset < 0:
        raise QueryError(Argument("childrenOffset"), f" must be 0 or more (got {children_offset})")
    row = _node_row(index, node_id)
    text = _exact_text(row)
    try:
        piece, length, next_offset = page_text(text, offset, limit)
    except BadRange as error:
        raise BadRange(f"{error} of node {node_id}") from None
    children: list[str] = json.loads(row[11])
    child_page = children[children_offset : children_offset + CHILDREN_PAGE]
    next_children = (
        children_offset + CHILDREN_PAGE if children_offset + CHILDREN_PAGE < len(children) else None
    )
    return NodePage.model_validate(
        {
            **_brief(row),
            "text": piece,
            "totalLength": length,
            "nextOffset": next_offset,
            "parents": _briefs(index, row[13], json.loads(row[12])),
            "children": _briefs(index, row[13], child_page),
            "nextChildrenOffset": next_children,
            "source": NodeSource(session_id=row[14], entry_ids=json.loads(row[10])),
        }
    )
