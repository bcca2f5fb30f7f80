"""Raw memory's two queries: ``search_memory`` (pi-echo's search) and ``recall`` (its read).

Scope is pi-echo's: the entries on the path from a leaf to the root of one session file (by
default its current leaf, the last entry in file order). Sources anchored elsewhere — an
abandoned branch — are never candidates, whatever the query. A caller that knows which session
is asking (the Pi extension) pins that session's branch with a ``MemoryScope``; the arguments
can then only narrow it. The tables are ``index.py``'s; the indexes only narrow the candidates
of a literal search, and every hit is confirmed on the source's exact text here.

An unscoped literal search (MCP, the CLI: every session's current branch) must give an exact
total however common its needle is, in milliseconds. Its candidates are each confirmed once,
and then SQLite counts and pages the visible sources of the texts that hold the needle
(``_kept_literal_page``): a big page is walked newest first on ``mem_visible_newest`` until it is
full, never sorted whole. A needle with many candidates keeps a tally (``tally.py``), so its next
search confirms nothing: its total is kept, its texts listed.
"""

from __future__ import annotations

import re
import sqlite3
import weakref
from collections.abc import Container, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pbot_watch.memory import stamps
from pbot_watch.memory.branch import HISTORICAL, RETAINED, boundary_at, context_labels
from pbot_watch.memory.extract import EntryLink, current_leaf_id, path_to_root
from pbot_watch.memory.handles import cursor_key, make_cursor, make_handle, parse_cursor, parse_handle
from pbot_watch.memory.index import (
    NAMED,
    ensure_memory_tables,
    read_sections,
    shown_label,
    source_lines,
    source_texts,
    terms_stats,
    text_bytes,
    text_codec,
    text_lines,
)
from pbot_watch.memory.models import MemoryContext, MemoryHit, MemorySearchResult, MemorySection, RecallPage
from pbot_watch.memory.ranking import idf, score_sql
from pbot_watch.memory.rankings import Ranked, keep, kept_page, ranking_key
from pbot_watch.memory.tally import register, tallied
from pbot_watch.memory.texts import LINE_OF_CHUNK, TEXT_OF_CHUNK, indexed_lines
from pbot_watch.pi.entries import v1_entry_id
from pbot_watch.search.errors import Argument, BadRange, NotReady, QueryError, UnknownHandle
from pbot_watch.search.index import SearchIndex
from pbot_watch.search.literal import MIN_TRIGRAM_CHARS, literal_match
from pbot_watch.search.models import MatchMode
from pbot_watch.search.pages import MAX_MEMORY_PAGE, MEMORY_PAGE
from pbot_watch.search.session_ids import full_session_id
from pbot_watch.search.tallies import TALLY_MIN, holds, id_list, version
from pbot_watch.search.tokens import fts_quote, is_cjk, query_terms, tokens
from pbot_watch.shorten import shorten
from pbot_watch.sqlite import transaction

SNIPPET_CONTEXT = 2
"""Lines shown before and after a hit line (within its section)."""
SNIPPET_LINE_CHARS = 300
RECALL_CHARS = 12_000
"""Recall returns whole lines up to about this many characters (always at least one line)."""
_CONTEXT_ORDER = {HISTORICAL: 0, RETAINED: 1}
_V1_ID = re.compile("[0-9a-f]{8}")
"""The shape of ``v1_entry_id``: only such an entry id can name an entry Pi renamed."""


class UnknownEntry(QueryError):
    """A --leaf that is not an entry of the session."""


class AmbiguousHandle(QueryError):
    """A short handle given outside a session's scope that more than one session's source has."""


@dataclass(frozen=True)
class MemoryScope:
    """A branch the caller pins, out of the model's reach: pi-echo's "the calling session's branch".

    One session, named by its file (as the caller knows it), its id, or both; the branch from
    ``leaf`` (default: the file's last entry) to the root. Arguments only narrow it: another
    ``sessionId`` is refused, a ``leaf`` off the branch is unknown, and a handle of a source off
    the branch is unknown, in search and in recall alike.
    """

    session_file: Path | None = None
    session_id: str | None = None
    leaf: str | None = None
    read_at_most: int | None = None
    """New bytes of ``session_file`` a query may read first (``None``: all): the Pi child builds
    a big file's raw memory ahead, and a query meanwhile answers from what is built."""

    def __post_init__(self) -> None:
        if self.session_file is None and self.session_id is None:
            raise ValueError("a memory scope names a session file or a session id")

    def key(self) -> tuple[str | None, str | None, str | None]:
        """What a cursor made in this scope is bound to."""
        path = str(self.session_file) if self.session_file is not None else None
        return (path, self.session_id, self.leaf)


# ---- scope ------------------------------------------------------------------------------


@dataclass
class _Row:
    rowid: int
    session_id: str
    entry_id: str
    part: int
    kind: str
    timestamp: str
    label: str
    sections: list[tuple[str, int, int]]
    line_count: int
    capped: bool = False
    """Longer than the indexes see (a pasted log): read line by line, never whole, to search or show."""
    text: str | None = None
    """The whole text, once ``_with_texts`` loaded it (only rows that are shown or confirmed)."""
    shown: tuple[int, list[str]] | None = None
    """Instead of ``text`` for a capped row on a page: the first line number and lines shown."""

    @property
    def lines(self) -> list[str]:
        assert self.text is not None, "load the text first (_with_texts)"
        return self.text.split("\n")

    def between(self, first: int, last: int) -> list[str]:
        """Lines ``first`` to ``last`` (1-based, inclusive) of the text or of what is ``shown``."""
        if self.text is None and self.shown is not None:
            start, lines = self.shown
            return lines[first - start : last - start + 1]
        return self.lines[first - 1 : last]

    @property
    def handle(self) -> str:
        return make_handle(self.session_id, self.entry_id, self.part)

    def section_of(self, line: int) -> MemorySection | None:
        for title, first, last in self.sections:
            if first <= line <= last:
                return MemorySection(title=title, first_line=first, last_line=last)
        return None


_ROW_COLUMNS = "s.rowid, f.session_id, s.entry_id, s.part, s.kind, s.stamp, s.stamp_text, s.label, s.sections, t.lines, t.capped"
_ROW_TABLES = "mem_sources s JOIN mem_files f ON f.id = s.file JOIN mem_texts t ON t.rowid = s.text"


def _row(values: Any) -> _Row:
    """A row of ``_ROW_COLUMNS``; a label the index does not keep is ``""`` until ``_load`` derives it."""
    rowid, session_id, entry_id, part, kind, stamp, stamp_text, label, sections, line_count, capped = values
    return _Row(
        rowid,
        session_id,
        entry_id,
        part,
        kind,
        stamps.decode(stamp, stamp_text),
        label if label is not None and not label.startswith(NAMED) else "",
        read_sections(kind, sections, line_count),
        line_count,
        bool(capped),
    )


TEXT_BATCH = 200
"""Source texts read at once: confirming many candidates holds only this many in memory."""


def _with_texts(index: SearchIndex, rows: Iterable[_Row]) -> Iterator[_Row]:
    """``rows`` with their texts loaded, a batch at a time (a caller that drops them keeps memory flat)."""
    batch: list[_Row] = []
    for row in rows:
        batch.append(row)
        if len(batch) == TEXT_BATCH:
            yield from _load_texts(index, batch)
            batch = []
    yield from _load_texts(index, batch)


def _load_texts(index: SearchIndex, rows: list[_Row]) -> list[_Row]:
    missing = [row.rowid for row in rows if row.text is None]
    if missing:
        texts = source_texts(index.conn, missing)
        for row in rows:
            if row.text is None:
                row.text = texts[row.rowid]
    return rows


class _KeptLabels(dict[int, MemoryContext]):
    """The context labels of the sources on each file's current branch, read as they are asked for.

    Every file's branch is kept in the index as entries arrive (``index.py``'s ``mem_visible``,
    each source with its entry's position on it), so an unscoped query labels only its hits:
    a source is historical when it is before its branch's boundary as of ``snapshot``.
    """

    def __init__(self, conn: sqlite3.Connection, snapshot: int) -> None:
        super().__init__()
        self.conn = conn
        self.snapshot = snapshot
        self.boundaries: dict[int, int | None] = {}
        self.all_boundaries = False
        """``load_boundaries`` ran: a branch not in ``boundaries`` has no compaction."""
        self.off: set[int] = set()
        """Row ids asked for that are on no current branch."""

    def load(self, rowids: Iterable[int]) -> None:
        """Label these sources (a batched read of their places; the hits of one query)."""
        wanted = [r for r in dict.fromkeys(rowids) if not dict.__contains__(self, r) and r not in self.off]
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            placed = self.conn.execute(
                f"SELECT rowid, branch, pos FROM mem_visible WHERE rowid IN ({','.join('?' * len(part))})",
                part,
            ).fetchall()
            for rowid, branch, pos in placed:
                boundary = self._boundary(branch)
                self[rowid] = HISTORICAL if boundary is not None and pos < boundary else RETAINED
            self.off.update(set(part) - {rowid for rowid, _b, _p in placed})

    def place(self, rowid: int, branch: int, pos: int) -> MemoryContext:
        """Label a source whose place on its branch the caller read already (with its candidates)."""
        boundary = self._boundary(branch)
        label = self[rowid] = HISTORICAL if boundary is not None and pos < boundary else RETAINED
        return label

    def load_boundaries(self) -> None:
        """Every branch's boundary in one read, for a query that labels sources of most branches.

        A branch's own read (``_boundary``) costs a query each: 300 of them for one unscoped
        search of 300 sessions. This reads the compactions on every current branch at once.
        """
        latest: dict[int, tuple[int, int | None]] = {}
        for branch, at, kept_at in self.conn.execute(
            "SELECT p.branch, p.pos, (SELECT k.pos FROM mem_path k WHERE k.branch = p.branch AND k.entry_id = e.kept) "
            "FROM mem_entries e JOIN mem_branches b ON b.file = e.file "
            "JOIN mem_path p ON p.branch = b.id AND p.entry_id = e.entry_id WHERE e.kept IS NOT NULL AND EXISTS ("
            "SELECT 1 FROM mem_sources s WHERE s.file = e.file AND s.seq = e.seq AND s.entry_id = e.entry_id "
            "AND s.kind = 'compaction' AND s.rowid <= ?)",
            (self.snapshot,),
        ):
            if branch not in latest or at > latest[branch][0]:
                latest[branch] = (at, kept_at)
        for branch, (at, kept_at) in latest.items():
            self.boundaries[branch] = boundary_at(at, kept_at)
        self.all_boundaries = True

    def _boundary(self, branch: int) -> int | None:
        """Where what the branch's latest compaction (as of the snapshot) kept starts; ``None``: none."""
        if branch not in self.boundaries and self.all_boundaries:
            return None
        if branch not in self.boundaries:
            latest = self.conn.execute(
                "SELECT p.pos, e.kept FROM mem_branches b JOIN mem_entries e ON e.file = b.file AND e.kept IS NOT NULL "
                "JOIN mem_path p ON p.branch = b.id AND p.entry_id = e.entry_id WHERE b.id = ? AND EXISTS ("
                "SELECT 1 FROM mem_sources s WHERE s.file = e.file AND s.seq = e.seq AND s.entry_id = e.entry_id "
                "AND s.kind = 'compaction' AND s.rowid <= ?) ORDER BY p.pos DESC LIMIT 1",
                (branch, self.snapshot),
            ).fetchone()
            boundary = None
            if latest is not None:
                at, kept = latest
                kept_at = self.conn.execute(
                    "SELECT pos FROM mem_path WHERE branch = ? AND entry_id = ?", (branch, kept)
                ).fetchone()
                boundary = boundary_at(at, None if kept_at is None else int(kept_at[0]))
            self.boundaries[branch] = boundary
        return self.boundaries[branch]

    def __missing__(self, rowid: int) -> MemoryContext:
        self.load([rowid])
        if dict.__contains__(self, rowid):
            return dict.__getitem__(self, rowid)
        raise KeyError(rowid)

    def __contains__(self, rowid: object) -> bool:
        if isinstance(rowid, int):
            self.load([rowid])
        return dict.__contains__(self, rowid)


@dataclass
class _Scope:
    labels: dict[int, MemoryContext]
    """Each visible source's context label on its branch (a ``_KeptLabels`` reads them as asked)."""
    sessions: list[str]
    """The session ids searched."""
    snapshot: int
    kept: bool = False
    """The sources in scope are the index's current branches (``mem_visible``), not ``temp.mem_scope``."""

    def within(self, column: str) -> str:
        """An SQL condition: ``column`` is the row id of a source in scope (up to the snapshot)."""
        if self.kept:
            # A bare "IN (SELECT rowid FROM t)" probes t's b-tree; a WHERE in it would copy t first.
            return f"{column} IN (SELECT rowid FROM mem_visible) AND {column} <= {int(self.snapshot)}"
        return f"{column} IN (SELECT rowid FROM temp.mem_scope)"


def _kept_scope(index: SearchIndex, snapshot: int) -> _Scope:
    """Every session file's current branch, as the index keeps it: no walk, whatever the corpus."""
    sessions = [
        sid
        for (sid,) in index.conn.execute(
            "SELECT f.session_id FROM mem_files f JOIN mem_branches b ON b.file = f.id WHERE b.length > 0 "
            "ORDER BY f.path"
        )
    ]
    return _Scope(_KeptLabels(index.conn, snapshot), list(dict.fromkeys(sessions)), snapshot, kept=True)


def _scope(
    index: SearchIndex,
    session_id: str | None,
    leaf: str | None,
    snapshot: int,
    pinned: MemoryScope | None = None,
) -> _Scope:
    """The sources in reach of each session file's leaf, labelled as of ``snapshot``.

    Only compactions whose source row existed at ``snapshot`` count: a cursor then labels,
    and so orders, its later pages as its first page was, whatever was compacted since.
    Unscoped, the index's branches are the scope (``_kept_scope``); a session, a leaf or a
    pinned branch is walked here and filled in ``temp.mem_scope`` (``_walked_scope``).
    """
    if pinned is None and session_id is None and leaf is None:
        return _kept_scope(index, snapshot)
    rowids, scope = _walked_scope(index, session_id, leaf, snapshot, pinned)
    _fill_scope(index, [r for r in rowids if r <= snapshot])
    return scope


def _walked_scope(
    index: SearchIndex,
    session_id: str | None,
    leaf: str | None,
    snapshot: int,
    pinned: MemoryScope | None = None,
) -> tuple[list[int], _Scope]:
    """``_scope`` by walking each file's branch from its entries: the row ids in scope, and the scope."""
    conn = index.conn
    if pinned is not None:
        files = _pinned_files(index, pinned, session_id)
    elif session_id is not None:
        session_id = full_session_id(conn, "mem_files", session_id)
        files = conn.execute(
            "SELECT id, session_id FROM mem_files WHERE session_id = ? ORDER BY path", (session_id,)
        ).fetchall()
        if not files:
            raise QueryError(
                f"unknown session {session_id!r}: no session file with this id under the session roots"
            )
    else:
        files = conn.execute("SELECT id, session_id FROM mem_files ORDER BY path").fetchall()
    scope = _Scope({}, [], snapshot)
    rowids: list[int] = []
    sessions: dict[str, None] = {}
    leaf_found = False
    pinned_found = False
    for file, sid in files:
        links = [
            EntryLink(seq, entry_id, parent)
            for seq, entry_id, parent in conn.execute(
                "SELECT seq, entry_id, parent_id FROM mem_entries WHERE file = ? ORDER BY seq", (file,)
            )
        ]
        tip = current_leaf_id(links)
        if tip is None:
            continue
        reach: Container[str] | None = None  # the entries a --leaf may name; None: all of the file's
        if pinned is not None:
            if pinned.leaf is not None:
                if not any(link.entry_id == pinned.leaf for link in links):
                    continue
                tip = pinned.leaf
            pinned_found = True
            reach = set(path_to_root(links, tip))
        if leaf is not None:
            known = leaf in reach if reach is not None else any(link.entry_id == leaf for link in links)
            if not known:
                continue
            tip, leaf_found = leaf, True
        branch = path_to_root(links, tip)[::-1]
        compactions = dict(
            conn.execute(
                "SELECT e.entry_id, e.kept FROM mem_entries e JOIN mem_sources s "
                "ON s.file = e.file AND s.entry_id = e.entry_id AND s.kind = 'compaction' "
                "WHERE e.file = ? AND e.kept IS NOT NULL AND s.rowid <= ?",
                (file, snapshot),
            )
        )
        on_path = dict(zip(branch, context_labels(branch, compactions), strict=True))
        sessions.setdefault(sid, None)
        for rowid, entry_id in conn.execute(
            "SELECT rowid, entry_id FROM mem_sources WHERE file = ?", (file,)
        ):
            label = on_path.get(entry_id)
            if label is not None:
                rowids.append(rowid)
                scope.labels[rowid] = label
    if pinned is not None and pinned.leaf is not None and files and not pinned_found:
        # The caller's session is indexed but not up to its current entry: not the model's
        # arguments, and not "no match" either.
        raise NotReady(f"the current entry {pinned.leaf!r} of this session is not in its session file yet")
    if leaf is not None and not leaf_found:
        where = " on this session's branch" if pinned else f" in session {session_id}" if session_id else ""
        raise UnknownEntry(f"unknown leaf entry {leaf!r}{where}")
    scope.sessions = list(sessions)
    return rowids, scope


def _pinned_files(index: SearchIndex, pinned: MemoryScope, session_id: str | None) -> list[tuple[int, str]]:
    """The pinned session's files, ``(mem_files.id, session id)`` (none while it is not indexed);
    another ``session_id`` is refused.
    """
    clauses, params = [], []
    if pinned.session_file is not None:
        clauses.append("path = ?")
        params.append(str(pinned.session_file))
    if pinned.session_id is not None:
        clauses.append("session_id = ?")
        params.append(pinned.session_id)
    files: list[tuple[int, str]] = index.conn.execute(
        f"SELECT id, session_id FROM mem_files WHERE {' AND '.join(clauses)} ORDER BY path", params
    ).fetchall()
    if session_id is not None and files and all(sid != session_id for _file, sid in files):
        raise QueryError(f"unknown session {session_id!r}: this memory search sees only the current session")
    return files


def _max_rowid(index: SearchIndex) -> int:
    return int(index.conn.execute("SELECT coalesce(max(rowid), 0) FROM mem_sources").fetchone()[0])


def _fill_scope(index: SearchIndex, rowids: list[int]) -> None:
    """The sources in scope, as a temp table the queries join.

    Filled in one transaction: in autocommit every row was a commit of its own, which cost a
    second for 60,000 sources once the temp file existed, so on every query of a long-lived
    process (Pi's child, MCP) after its first.
    """
    conn = index.conn
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS mem_scope(rowid INTEGER PRIMARY KEY)")
    with transaction(conn, immediate=False):
        conn.execute("DELETE FROM temp.mem_scope")
        conn.executemany("INSERT OR IGNORE INTO temp.mem_scope(rowid) VALUES (?)", ((r,) for r in rowids))


# ---- search -----------------------------------------------------------------------------


def _snippet(row: _Row, line: int) -> tuple[str, tuple[int, int]]:
    section = row.section_of(line)
    lo = max(section.first_line if section else 1, line - SNIPPET_CONTEXT)
    hi = min(section.last_line if section else row.line_count, line + SNIPPET_CONTEXT)
    shown = [shorten(text, SNIPPET_LINE_CHARS) for text in row.between(lo, hi)]
    return "\n".join(shown), (lo, hi)


def _hit(row: _Row, line: int | None, score: float | None, context: MemoryContext) -> MemoryHit:
    if line is None:
        snippet, lines, section = "\n".join(row.between(1, 1 + 2 * SNIPPET_CONTEXT)), None, None
    else:
        snippet, span = _snippet(row, line)
        lines, section = span, row.section_of(line)
    return MemoryHit(
        handle=row.handle,
        kind=row.kind,  # type: ignore[arg-type]
        session_id=row.session_id,
        entry_id=row.entry_id,
        timestamp=row.timestamp,
        label=row.label,
        total_lines=row.line_count,
        line=line,
        snippet=snippet,
        snippet_lines=lines,
        section=section,
        score=score,
        context=context,
    )


def search_memory(
    index: SearchIndex,
    query: str = "",
    match: MatchMode = "literal",
    in_: str | None = None,
    session_id: str | None = None,
    leaf: str | None = None,
    after: str | None = None,
    limit: int = MEMORY_PAGE,
    pinned: MemoryScope | None = None,
) -> MemorySearchResult:
    """Search raw memory along one leaf-to-root path per session file (pi-echo's search_memory).

    literal: case-insensitive substring per line, newest source first, one hit per source (per
    line with ``in_``); terms: BM25, best source first; no query and no ``in_``: list sources.
    Every hit says whether it left the model's context at a compaction (``context``); for a
    query, historical hits come first, then retained, each group in that order.
    ``pinned``: the caller's scope (see ``MemoryScope``), which the other arguments only narrow.
    """
    if not 1 <= limit <= MAX_MEMORY_PAGE:
        raise QueryError(
            "memory search ", Argument("limit"), f" must be between 1 and {MAX_MEMORY_PAGE} (got {limit})"
        )
    ensure_memory_tables(index)
    key = cursor_key(query, match, in_, session_id, leaf, pinned.key() if pinned else ())
    conn = index.conn
    if after is not None:
        offset, snapshot = parse_cursor(after, key)
    else:
        offset = 0
        snapshot = _max_rowid(index)
    scope = _scope(index, session_id, leaf, snapshot, pinned)
    if in_ is not None:
        target = _find_handle(index, in_, scope.labels if pinned else None)
        if target not in scope.labels:
            raise UnknownHandle(in_)
        _fill_scope(index, [target] if target <= snapshot else [])
        scope.kept = False
    needle = query.strip()
    if in_ is None and needle and match == "literal":
        page, total = _literal_page(index, needle.lower(), scope, offset, limit)
        _show(index, page)
        return _result(query, match, page, total, scope, key, offset, limit)
    if in_ is None and needle:
        page, total = _terms_page(index, needle, scope, offset, limit)
        return _result(query, match, page, total, scope, key, offset, limit)
    if not needle:
        listed = _listing(conn, scope)
        rows = _load(index, listed[offset : offset + limit])
        page = [(rows[rowid], None, None) for rowid in listed[offset : offset + limit]]
        if isinstance(scope.labels, _KeptLabels):
            scope.labels.load(rows)
        _show(index, page)
        return _result(query, match, page, len(listed), scope, key, offset, limit)
    # --in: every hit line of one source.
    hits = (
        _terms_hits(index, needle, scope)
        if match == "terms"
        else _literal_hits(index, needle.lower(), scope, per_line=True)
    )
    # pi-echo's order: what the model can no longer see first (a stable sort keeps each
    # group in the order of its match mode).
    hits.sort(key=lambda hit: _CONTEXT_ORDER[scope.labels[hit[0].rowid]])
    page = hits[offset : offset + limit]
    if match == "terms":
        _load_texts(index, [row for row, _line, _score in page])
    else:
        _show(index, page)
    return _result(query, match, page, len(hits), scope, key, offset, limit)


def _result(
    query: str,
    match: MatchMode,
    page: list[tuple[_Row, int | None, float | None]],
    total: int,
    scope: _Scope,
    key: str,
    offset: int,
    limit: int,
) -> MemorySearchResult:
    next_offset = offset + limit if offset + limit < total else None
    cursor = make_cursor(key, next_offset, scope.snapshot) if next_offset is not None else None
    return MemorySearchResult(
        query=query,
        match=match,
        hits=[_hit(r, line, score, scope.labels[r.rowid]) for r, line, score in page],
        total=total,
        next_cursor=cursor,
        scope=scope.sessions,
    )


def _load(index: SearchIndex, rowids: Iterable[int]) -> dict[int, _Row]:
    """Rows of these sources, without their texts but for those whose label the text gives."""
    ids = list(rowids)
    out: dict[int, _Row] = {}
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        marks = ",".join("?" * len(part))
        derived: list[tuple[_Row, str | None]] = []
        for values in index.conn.execute(
            f"SELECT {_ROW_COLUMNS} FROM {_ROW_TABLES} WHERE s.rowid IN ({marks})", part
        ):
            row = _row(values)
            out[row.rowid] = row
            stored = values[7]  # the label (_ROW_COLUMNS)
            if stored is None or stored.startswith(NAMED):
                derived.append((row, stored))
        _load_texts(index, [row for row, _stored in derived])
        for row, stored in derived:
            assert row.text is not None
            row.label = shown_label(row.kind, row.text, row.sections, stored)
    return out


def _literal_candidates(index: SearchIndex, needle: str, scope: _Scope) -> list[int]:
    """Sources in scope that may hold ``needle``: a superset, narrowed by an index when one can."""
    conn = index.conn
    if "\n" in needle:
        return []  # a line never holds a newline
    texts, params, _exact = _literal_plan(needle)
    if texts is None:
        return [
            rowid for (rowid,) in conn.execute(f"SELECT rowid FROM mem_sources WHERE {scope.within('rowid')}")
        ]
    return [
        rowid
        for (rowid,) in conn.execute(
            f"SELECT rowid FROM mem_sources WHERE text IN ({texts}) AND {scope.within('rowid')} ORDER BY rowid",
            params,
        )
    ]


def _lines_with(text: str, needle: str, *, every: bool) -> list[int]:
    """1-based numbers of the lines of ``text`` whose lower-cased form holds ``needle`` (just the
    first unless ``every``). Lower-casing the whole text lower-cases each line (a newline stops
    the one rule that looks at neighbours, final sigma), and ``needle`` has no newline.
    """
    low = text.lower()
    found: list[int] = []
    at = low.find(needle)
    line, counted = 1, 0
    while at >= 0:
        line += low.count("\n", counted, at)
        counted = at
        if not found or found[-1] != line:
            found.append(line)
            if not every:
                break
        end = low.find("\n", at)
        if end < 0:
            break
        at = low.find(needle, end)
    return found


def _streamed_lines_with(lines: Iterable[str], needle: str, *, every: bool) -> list[int]:
    """``_lines_with`` on a stored text read line by line (``source_lines``): for capped ones."""
    found: list[int] = []
    for number, line in enumerate(lines, 1):
        if needle in line.lower():
            found.append(number)
            if not every:
                break
    return found


def _show(index: SearchIndex, page: list[tuple[_Row, int | None, float | None]]) -> None:
    """Load what the page's hits show: whole texts, but only the lines shown of a capped source."""
    _load_texts(index, [row for row, _line, _score in page if not row.capped])
    for row, line, _score in page:
        if row.capped and row.text is None:
            first = 1 if line is None else max(1, line - SNIPPET_CONTEXT)
            last = first + 2 * SNIPPET_CONTEXT if line is None else line + SNIPPET_CONTEXT
            shown = []
            for number, text in enumerate(source_lines(index.conn, row.rowid), 1):
                if number > last:
                    break
                if number >= first:
                    shown.append(text)
            row.shown = (first, shown)


def _literal_hits(
    index: SearchIndex, needle: str, scope: _Scope, *, per_line: bool
) -> list[tuple[_Row, int | None, float | None]]:
    rows = _load(index, _literal_candidates(index, needle, scope))
    hits: list[tuple[_Row, int | None, float | None]] = []
    for row in rows.values():
        if row.capped:
            lines = _streamed_lines_with(source_lines(index.conn, row.rowid), needle, every=per_line)
            hits.extend((row, line, None) for line in (lines if per_line else lines[:1]))
    for row in _with_texts(index, [row for row in rows.values() if not row.capped]):
        # Confirm on the exact text (the index stores U+FFFD for lone surrogates, and is a filter).
        assert row.text is not None
        lines = _lines_with(row.text, needle, every=per_line)
        row.text = None  # read again for the rows shown
        if per_line:
            hits.extend((row, line, None) for line in lines)
        elif lines:
            hits.append((row, lines[0], None))
    hits.sort(key=lambda h: (_desc(h[0].timestamp), -h[0].rowid, h[1] or 0))
    return hits


def _listing(conn: sqlite3.Connection, scope: _Scope) -> list[int]:
    """Every source in scope as a query without a needle lists them: by timestamp newest first (as
    SQLite orders their texts: a timestamp after the longer ones it begins), then entry and part.

    The stored keys order so when every timestamp is of Pi's form (``stamps.py``); any other
    one has its text, and then the texts are sorted here, ties kept in SQLite's order.
    """
    rows = conn.execute(
        f"SELECT s.rowid, s.stamp, s.stamp_text, s.seq, s.part FROM mem_sources s WHERE {scope.within('s.rowid')} "
        "ORDER BY s.stamp DESC, s.seq DESC, s.part DESC"
    ).fetchall()
    if any(text is not None for _rowid, _stamp, text, _seq, _part in rows):
        rows.sort(
            key=lambda r: (stamps.decode(r[1], r[2]).encode("utf-8", "surrogatepass"), r[3], r[4]),
            reverse=True,
        )
    return [rowid for rowid, *_rest in rows]


_NEWEST_FIRST = stamps.NEWEST_FIRST.format(t="s") + ", s.rowid DESC"
"""The literal order in SQL: newest first, a timestamp before the longer ones it begins (as
``_desc`` sorts it: the byte 0xFF is in no UTF-8 text, so it sorts after every character;
``stamps.py``'s key orders so), then the later row first."""


_NEWEST_VISIBLE = stamps.NEWEST_FIRST.format(t="v") + ", v.rowid DESC"

_BRANCH_READS = 8
"""Hits on more branches than this have every branch's boundary read at once (``load_boundaries``)."""


def _in_order(
    index: SearchIndex, scope: _Scope, candidates: str | None, params: tuple[Any, ...]
) -> list[tuple[int, int]]:
    """``(rowid, text)`` of the sources in scope whose text is among ``candidates`` (an SQL query
    of ``mem_texts`` row ids; ``None``: all), in the order of a literal search's hits: historical
    first, each group newest first.

    Sorted by SQLite and labelled from the places read with them, so a query with 60,000
    candidates makes no Python object per candidate beyond this pair.
    """
    among = f"s.text IN ({candidates}) AND " if candidates is not None else ""
    groups: tuple[list[tuple[int, int]], list[tuple[int, int]]] = ([], [])
    labels = scope.labels
    if isinstance(labels, _KeptLabels):
        # The current branches' own table has what filters and orders: no source row is read.
        placed = index.conn.execute(
            f"SELECT v.rowid, v.text, v.branch, v.pos FROM mem_visible v WHERE {among.replace('s.text', 'v.text', 1)}"
            f"v.rowid <= ? ORDER BY {_NEWEST_VISIBLE}",
            (*params, scope.snapshot),
        ).fetchall()
        if len({branch for _rowid, _text, branch, _pos in placed}) > _BRANCH_READS:
            labels.load_boundaries()
        for rowid, text, branch, pos in placed:
            groups[_CONTEXT_ORDER[labels.place(rowid, branch, pos)]].append((rowid, text))
    else:
        for rowid, text in index.conn.execute(
            f"SELECT s.rowid, s.text FROM mem_sources s WHERE {among}{scope.within('s.rowid')} ORDER BY {_NEWEST_FIRST}",
            params,
        ):
            groups[_CONTEXT_ORDER[labels[rowid]]].append((rowid, text))
    return groups[0] + groups[1]


GROUPED_TEXTS = (
    "SELECT t.rowid FROM mem_texts t WHERE t.grp IN (SELECT rowid FROM mem_literal WHERE mem_literal MATCH ?)"
)
"""The texts of the literal groups (``texts.group_slot``) matching an FTS5 query (``?``)."""


def _literal_plan(needle: str) -> tuple[str | None, tuple[Any, ...], bool]:
    """The candidate texts of ``needle`` as an SQL query of ``mem_texts`` row ids (``None``: every text), its
    parameters, and whether every candidate that is not capped holds the needle (the index is
    exact for it, so only a page's hits are read).

    Exact: one or two CJK characters, which are themselves a token of the terms index
    (``tokens.py``: every character and every neighbouring pair of a CJK run; CJK has no case).
    Not a needle of three characters or more: a literal row holds a group of texts, so a group
    holding a trigram says one of its texts may. A capped source is only partly indexed, or not
    at all: it is always a candidate, and always read.
    """
    capped = "SELECT rowid FROM mem_texts WHERE capped"
    if len(needle) >= MIN_TRIGRAM_CHARS:
        return f"{GROUPED_TEXTS} UNION ALL {capped}", (literal_match(needle),), False
    if all(is_cjk(ch) for ch in needle):
        text = TEXT_OF_CHUNK.format(row="mem_terms.rowid")
        terms = f"SELECT {text} FROM mem_terms WHERE mem_terms MATCH ?"
        return f"{terms} UNION ALL {capped}", (fts_quote(needle),), True
    return None, (), False


def _capped_texts(index: SearchIndex) -> set[int]:
    """The ``mem_texts`` row ids of capped texts (a pasted log: a handful, read by a partial index)."""
    return {text for (text,) in index.conn.execute("SELECT rowid FROM mem_texts WHERE capped")}


def _confirmed(index: SearchIndex, needle: str, texts: Iterable[int], capped: Container[int]) -> set[int]:
    """The ``texts`` (``mem_texts`` row ids) that hold ``needle``, each read once, ``TEXT_BATCH`` at a time."""
    encoded = needle.encode("utf-8", "surrogatepass")
    wanted = list(dict.fromkeys(texts))
    held: set[int] = set()
    for text in wanted:
        if text in capped and _streamed_lines_with(text_lines(index.conn, text), needle, every=False):
            held.add(text)
    indexed = [text for text in wanted if text not in capped]
    for start in range(0, len(indexed), TEXT_BATCH):
        for text, raw in text_bytes(index.conn, indexed[start : start + TEXT_BATCH]).items():
            if holds(raw, needle, encoded):
                held.add(text)
    return held


def _literal_page(
    index: SearchIndex, needle: str, scope: _Scope, offset: int, limit: int
) -> tuple[list[tuple[_Row, int | None, float | None]], int]:
    """One page of a literal search's hits (one per source) and their total, reading as few texts as
    the index allows: only the page's when it is exact for ``needle`` (``_literal_plan``), else
    every candidate text once, tested as bytes (``_holds``).
    """
    if "\n" in needle:
        return [], 0  # a line never holds a newline
    candidates, params, exact = _literal_plan(needle)
    if scope.kept and candidates is not None:
        found = _kept_literal_page(index, needle, scope, (candidates, params, exact), offset, limit)
        if found is not None:
            return found
    order = _in_order(index, scope, candidates, params)
    capped = _capped_texts(index)
    if exact:
        held = _confirmed(index, needle, (text for _rowid, text in order if text in capped), capped)
        hits = [rowid for rowid, text in order if text not in capped or text in held]
        page = _first_lines(index, needle, hits[offset : offset + limit])
        if page is not None:
            return page, len(hits)
        # The index and a text disagree (it cannot, unless damaged): trust the texts, all of them.
    held = _confirmed(index, needle, (text for _rowid, text in order), capped)
    hits = [rowid for rowid, text in order if text in held]
    page = _first_lines(index, needle, hits[offset : offset + limit])
    assert page is not None, "confirmed hits hold the needle"
    return page, len(hits)


def _kept_literal_page(
    index: SearchIndex,
    needle: str,
    scope: _Scope,
    plan: tuple[str, tuple[Any, ...], bool],
    offset: int,
    limit: int,
) -> tuple[list[tuple[_Row, int | None, float | None]], int] | None:
    """``_literal_page`` of an unscoped search, counted and paged by SQLite on the current branches'
    rows (``mem_visible``): no Python object per hit but the page's. ``None``: the index and a text
    disagree.

    A tallied needle (``tally.py``) has its total kept and its texts listed: nothing is matched or
    read but the page. Otherwise every visible candidate text is tested once (only the capped ones
    when the index is exact for the needle), and a needle with many of them gets a tally for the
    next search.
    """
    conn = index.conn
    candidates, params, exact = plan
    found = tallied(conn, needle)
    if found is None:
        # Every visible text up to the newest source when the version is read, not only up to the
        # snapshot: a source committed in between is then in the tally too (the page and the total
        # stay the snapshot's, which ``_kept_page`` counts).
        seen = version(conn)
        first = _tested(index, needle, (candidates, params), _max_rowid(index), exact=exact)
        if not first.held:
            return [], 0
        if first.count >= TALLY_MIN and register(
            conn,
            needle,
            first.held,
            seen,
            lambda: _tested_again(index, needle, (candidates, params), first, exact=exact),
        ):
            found = tallied(conn, needle)
        if found is None:
            _fill_held(index, first.held)
            return _kept_page(index, needle, scope, ("temp.mem_held", "1", ()), None, offset, limit)
    # The kept total counts every visible source: it is this search's when none came since its snapshot.
    total = found.total if found.newest <= scope.snapshot else None
    return _kept_page(
        index, needle, scope, ("mem_tally_texts", "h.tally = ?", (found.ident,)), total, offset, limit
    )


def _visible_candidates(sql: str) -> str:
    """SQL of the visible sources' texts among the candidate texts ``sql``, up to a source row id (``?``)."""
    return f"SELECT v.text FROM mem_visible v WHERE v.text IN ({sql}) AND v.rowid <= ?"


@dataclass(frozen=True)
class _Tested:
    """What testing a needle's visible candidate texts found."""

    held: set[int]
    """The texts that hold the needle."""
    count: int
    """How many candidates there were."""
    keys: dict[int, int]
    """The ``mem_texts.key`` of each text read to test it, by id (none when the index is exact): an
    id with the same key later is the same text (``tally.py``), whose answer stands."""


def _tested(
    index: SearchIndex, needle: str, candidates: tuple[str, tuple[Any, ...]], newest: int, *, exact: bool
) -> _Tested:
    """The visible candidate texts of ``needle`` (of the sources up to ``newest``) that hold it.

    One statement, its rows streamed (a text at a time in memory); a capped text is read line by
    line (``text_lines``), never whole. ``exact``: the index is exact for the needle
    (``_literal_plan``), so only the capped texts are read.
    """
    conn = index.conn
    sql, params = candidates
    visible = _visible_candidates(sql)
    if exact:
        texts = {text for (text,) in conn.execute(visible, (*params, newest))}
        capped = texts & _capped_texts(index)
        return _Tested(texts - capped | _confirmed(index, needle, capped, capped), len(texts), {})
    encoded = needle.encode("utf-8", "surrogatepass")
    codec = text_codec(conn)
    held: set[int] = set()
    keys: dict[int, int] = {}
    for text, key, is_capped, data, packed in conn.execute(
        "SELECT t.rowid, t.key, t.capped, CASE WHEN t.capped THEN NULL ELSE t.data END, t.packed FROM mem_texts t "
        f"WHERE t.rowid IN ({visible})",
        (*params, newest),
    ):
        keys[text] = key
        if is_capped:
            found = bool(_streamed_lines_with(text_lines(conn, text), needle, every=False))
        else:
            found = holds(codec.unpacked_bytes(data, packed), needle, encoded)
        if found:
            held.add(text)
    return _Tested(held, len(keys), keys)


def _tested_again(
    index: SearchIndex, needle: str, candidates: tuple[str, tuple[Any, ...]], first: _Tested, *, exact: bool
) -> set[int]:
    """``_tested`` of every visible source now, in the write transaction that registers a tally after
    something was committed since ``first``: only the texts ``first`` did not read are read.

    A text ``first`` read answers the same under the same id and key; a text that became visible
    since, or an id that names another text now, is read and tested. Where the index is exact only
    capped texts are read anyway, so that test is just made again.
    """
    if exact:
        return _tested(index, needle, candidates, _max_rowid(index), exact=True).held
    sql, params = candidates
    now = index.conn.execute(
        f"SELECT t.rowid, t.key FROM mem_texts t WHERE t.rowid IN ({_visible_candidates(sql)})",
        (*params, _max_rowid(index)),
    ).fetchall()
    fresh = [text for text, key in now if first.keys.get(text) != key]
    kept = {text for text, key in now if first.keys.get(text) == key and text in first.held}
    return kept | _confirmed(index, needle, fresh, _capped_texts(index))


def _fill_held(index: SearchIndex, held: Iterable[int]) -> None:
    """The texts that hold this search's needle, as a temp table the page's SQL reads (one transaction)."""
    conn = index.conn
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS mem_held(text INTEGER PRIMARY KEY)")
    with transaction(conn, immediate=False):
        conn.execute("DELETE FROM temp.mem_held")
        conn.execute("INSERT INTO temp.mem_held(text) SELECT value FROM json_each(?)", (id_list(held),))


_BOUNDS: weakref.WeakKeyDictionary[SearchIndex, tuple[tuple[int, int, int], dict[int, int | None]]] = (
    weakref.WeakKeyDictionary()
)
"""Per open index: the boundaries ``temp.mem_bounds`` holds, and the database's ``version`` and the
snapshot they were read at (a long-lived process, MCP or Pi's child, reads them again only after
a commit)."""


def _fill_bounds(index: SearchIndex, labels: _KeptLabels) -> None:
    """Every current branch's compaction boundary as of the snapshot, as a temp table: SQLite then
    orders historical hits first itself.

    Read again only when something was committed since the last read on this connection (by any
    process: ``tally.version``) or the snapshot differs: the read costs milliseconds, a fifth of a
    tallied search.
    """
    conn = index.conn
    held = _BOUNDS.get(index)
    if held is not None and held[0] == (*version(conn), labels.snapshot):
        labels.boundaries.update(held[1])
        labels.all_boundaries = True
        return
    labels.load_boundaries()
    conn.execute(
        "CREATE TEMP TABLE IF NOT EXISTS mem_bounds(branch INTEGER PRIMARY KEY, boundary INTEGER NOT NULL)"
    )
    with transaction(conn, immediate=False):
        conn.execute("DELETE FROM temp.mem_bounds")
        conn.executemany(
            "INSERT INTO temp.mem_bounds(branch, boundary) VALUES (?, ?)",
            ((branch, at) for branch, at in labels.boundaries.items() if at is not None),
        )
    _BOUNDS[index] = ((*version(conn), labels.snapshot), dict(labels.boundaries))


WALK_FROM = 1_000
"""Hits from which an unscoped literal page is found by walking the current branches' sources newest
first (``mem_visible_newest``) until it is full, rather than by sorting every hit."""


def _kept_page(
    index: SearchIndex,
    needle: str,
    scope: _Scope,
    texts: tuple[str, str, tuple[Any, ...]],
    total: int | None,
    offset: int,
    limit: int,
) -> tuple[list[tuple[_Row, int | None, float | None]], int] | None:
    """The total (unless known) and one page of the visible sources whose text is one of ``texts``
    (a table ``h`` with a ``text`` column, a condition on it and its parameters): historical first,
    each group newest first (``_in_order``'s order). ``None`` when a page's text does not hold ``needle``.

    Few hits are read and ordered whole. Many are walked newest first, one group and then the
    other, until the page is full: a common word is found within its first rows, where sorting
    its tens of thousands of hits cost hundreds of milliseconds.
    """
    conn = index.conn
    labels = scope.labels
    assert isinstance(labels, _KeptLabels)
    table, condition, params = texts
    joined = f"{table} h CROSS JOIN mem_visible v ON v.text = h.text WHERE {condition} AND v.rowid <= ?"
    args: tuple[Any, ...] = (*params, scope.snapshot)
    if total is None:
        (total,) = conn.execute(f"SELECT count(*) FROM {joined}", args).fetchone()
    if not total or offset >= total:
        return [], int(total)
    wanted = offset + limit
    if total < WALK_FROM:
        placed = conn.execute(
            f"SELECT v.rowid, v.branch, v.pos FROM {joined} ORDER BY {_NEWEST_VISIBLE}", args
        ).fetchall()
        if len({branch for _rowid, branch, _pos in placed}) > _BRANCH_READS:
            _fill_bounds(index, labels)
        groups: tuple[list[int], list[int]] = ([], [])
        for rowid, branch, pos in placed:
            groups[_CONTEXT_ORDER[labels.place(rowid, branch, pos)]].append(rowid)
        shown = (groups[0] + groups[1])[offset:wanted]
    else:
        _fill_bounds(index, labels)
        walk = (
            "SELECT v.rowid, v.branch, v.pos FROM mem_visible v INDEXED BY mem_visible_newest "
            "LEFT JOIN temp.mem_bounds b ON b.branch = v.branch WHERE v.rowid <= ? AND coalesce(v.pos < b.boundary, 0) = ? "
            f"AND EXISTS (SELECT 1 FROM {table} h WHERE {condition} AND h.text = v.text) ORDER BY {_NEWEST_VISIBLE} LIMIT ?"
        )
        found = conn.execute(walk, (scope.snapshot, 1, *params, wanted)).fetchall()
        if len(found) < wanted:
            found += conn.execute(walk, (scope.snapshot, 0, *params, wanted - len(found))).fetchall()
        for rowid, branch, pos in found:
            labels.place(rowid, branch, pos)
        shown = [rowid for rowid, _branch, _pos in found[offset:wanted]]
    page = _first_lines(index, needle, shown)
    return None if page is None else (page, int(total))


def _first_lines(
    index: SearchIndex, needle: str, rowids: list[int]
) -> list[tuple[_Row, int | None, float | None]] | None:
    """These hits with their first line holding ``needle``, texts loaded; ``None`` if one holds none."""
    rows = _load(index, rowids)
    _load_texts(index, [row for row in rows.values() if not row.capped])
    page: list[tuple[_Row, int | None, float | None]] = []
    for rowid in rowids:
        row = rows[rowid]
        if row.capped:
            lines = _streamed_lines_with(source_lines(index.conn, rowid), needle, every=False)
        else:
            assert row.text is not None
            lines = _lines_with(row.text, needle, every=False)
        if not lines:
            return None
        page.append((row, lines[0], None))
    return page


def _desc(text: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in text)


def _best_chunks(
    index: SearchIndex,
    terms: list[str],
    scope: _Scope,
    places: dict[int, tuple[tuple[int, str | None], int, int]] | None = None,
) -> dict[int, tuple[float, int]]:
    """Each source in scope holding any of ``terms``: its best chunk's BM25 score (``ranking.py``,
    higher is better) and first line, the first such chunk in the index's order when several tie.

    ``places``, unscoped: filled with each source's timestamp, branch and position, read with its
    chunks from the current branches' row the query joins anyway (not a read of tens of thousands
    of rows again).
    """
    conn = index.conn
    rows, tokens = terms_stats(conn)
    weighted: list[tuple[str, float]] = []
    for term in terms:
        phrase = fts_quote(term)
        having = conn.execute("SELECT count(*) FROM mem_terms WHERE mem_terms MATCH ?", (phrase,)).fetchone()[
            0
        ]
        if having:
            weighted.append((phrase, idf(rows, having)))
    if not weighted:
        return {}
    # Each chunk holding a term, with the sum of its terms' IDFs (the index says which chunks hold
    # a term, not how often: a chunk is asked of each term's rows), scored by SQLite. The index
    # has each text once: every source in scope with a matching text has its chunks. Unscoped,
    # the current branches' table has the texts of the sources in scope.
    holding = "(CASE WHEN mem_terms.rowid IN (SELECT rowid FROM mem_terms WHERE mem_terms MATCH ?) THEN ? ELSE 0 END)"
    weights = " + ".join(holding for _ in weighted) if len(weighted) > 1 else "?"
    text = TEXT_OF_CHUNK.format(row="mem_terms.rowid")
    sources = (
        f"mem_visible s ON s.text = {text} WHERE s.rowid <= {int(scope.snapshot)} AND "
        if scope.kept
        else f"mem_sources s ON s.text = {text} WHERE {scope.within('s.rowid')} AND "
    )
    placing = places is not None and scope.kept
    where = ", s.stamp, s.stamp_text, s.branch, s.pos" if placing else ""  # mem_visible's columns
    score = score_sql(weights, "c.tokens", tokens / rows if rows else 0.0)
    params = (
        [v for phrase, weight in weighted for v in (phrase, weight)]
        if len(weighted) > 1
        else [weighted[0][1]]
    )
    scored: dict[int, tuple[float, int, int]] = {}
    for chunk, source, line, found, *place in conn.execute(
        f"SELECT mem_terms.rowid, s.rowid, {LINE_OF_CHUNK.format(row='mem_terms.rowid')}, {score}{where} "
        f"FROM mem_terms JOIN mem_chunk_tokens c ON c.rowid = mem_terms.rowid JOIN {sources}mem_terms MATCH ?",
        [*params, " OR ".join(phrase for phrase, _weight in weighted)],
    ):
        best = scored.get(source)
        if best is None:
            scored[source] = (found, line, chunk)
            if places is not None and placing:
                places[source] = ((place[0], place[1]), place[2], place[3])
        elif found > best[0] or (found == best[0] and chunk < best[2]):
            scored[source] = (found, line, chunk)
    return {source: (found, line) for source, (found, line, _chunk) in scored.items()}


def _terms_hits(index: SearchIndex, query: str, scope: _Scope) -> list[tuple[_Row, int | None, float | None]]:
    """Every line of the sources in scope (``--in``: one) holding a query term, best first."""
    terms = query_terms(query)
    if not terms:
        return []
    scored = _best_chunks(index, terms, scope)
    hits: list[tuple[_Row, int | None, float | None]] = []
    for row in _with_texts(index, _load(index, scored).values()):
        score, _first = scored[row.rowid]
        line_scores = _term_lines(row, set(terms))
        row.text = None
        hits.extend(
            (row, number, round(score, 6))
            for _found, number in sorted(line_scores, key=lambda x: (-x[0], x[1]))
        )
    hits.sort(key=lambda h: (-(h[2] or 0), _desc(h[0].timestamp), h[1] or 0))
    return hits


def _terms_page(
    index: SearchIndex, query: str, scope: _Scope, offset: int, limit: int
) -> tuple[list[tuple[_Row, int | None, float | None]], int]:
    """One page of a terms search (one hit per source, ranked by its best chunk) and the total.

    Historical first, then by score, newest first, the best chunk's first line and the row id.
    Only the page's sources become rows and have their texts read: which line to show is found
    for them only (``best_term_line``); tokenising every line of every matching source took
    seconds on a 20 MB session, for hits nobody looks at.
    """
    terms = query_terms(query)
    if not terms:
        return [], 0
    labels = scope.labels
    key = ranking_key(scope.snapshot, terms) if scope.kept else None
    kept = kept_page(index.conn, key, offset, limit) if key is not None else None
    if kept is None:
        seen = version(index.conn)
        ranked = _ranked(index, terms, scope)
        if key is not None:
            keep(index.conn, key, ranked, seen)
        shown, total = ranked[offset : offset + limit], len(ranked)
    else:
        shown, total = kept
    if isinstance(labels, _KeptLabels):  # the page's labels, as ranking placed them
        for group, _minus, _stamp, _line, rowid in shown:
            dict.__setitem__(labels, rowid, HISTORICAL if group == 0 else RETAINED)
    rows = _load(index, [rowid for *_key, rowid in shown])
    _load_texts(index, list(rows.values()))
    page: list[tuple[_Row, int | None, float | None]] = [
        (rows[rowid], best_term_line(rows[rowid], query, line or 1), -minus)
        for _group, minus, _stamp, line, rowid in shown
    ]
    return page, total


def _ranked(index: SearchIndex, terms: list[str], scope: _Scope) -> list[Ranked]:
    """Every source in scope holding a query term, as its sort key: context group, minus its score
    (rounded as shown), its place newest first, its best chunk's first line and its row id.
    """
    labels = scope.labels
    places: dict[int, tuple[tuple[int, str | None], int, int]] = {}
    scored = _best_chunks(index, terms, scope, places)
    ids = list(scored)
    placed: list[tuple[int, tuple[int, str | None], int, int]] = []
    if scope.kept:
        placed = [(rowid, *places[rowid]) for rowid in ids]
    for start in range(0, 0 if scope.kept else len(ids), 500):
        part = ids[start : start + 500]
        marks = ",".join("?" * len(part))
        if isinstance(labels, _KeptLabels):
            placed.extend(
                (rowid, (stamp, stamp_text), branch, pos)
                for rowid, stamp, stamp_text, branch, pos in index.conn.execute(
                    f"SELECT rowid, stamp, stamp_text, branch, pos FROM mem_visible WHERE rowid IN ({marks})",
                    part,
                )
            )
        else:
            placed.extend(
                (rowid, (stamp, stamp_text), 0, 0)
                for rowid, stamp, stamp_text in index.conn.execute(
                    f"SELECT rowid, stamp, stamp_text FROM mem_sources WHERE rowid IN ({marks})", part
                )
            )
    if isinstance(labels, _KeptLabels) and len({branch for _r, _t, branch, _p in placed}) > _BRANCH_READS:
        labels.load_boundaries()
    # Newest first as ``_desc`` orders timestamps: reversed bytes order, a prefix before its longer ones.
    held = sorted(
        {stamp for _r, stamp, _b, _p in placed}, key=lambda stamp: stamps.order(*stamp), reverse=True
    )
    newest = {stamp: number for number, stamp in enumerate(held)}
    keyed = []
    for rowid, stamp, branch, pos in placed:
        label = labels.place(rowid, branch, pos) if isinstance(labels, _KeptLabels) else labels[rowid]
        score, line = scored[rowid]
        keyed.append((_CONTEXT_ORDER[label], -round(score, 6), newest[stamp], line, rowid))
    keyed.sort()
    return keyed


def _term_lines(row: _Row, wanted: set[str]) -> list[tuple[int, int]]:
    """``(terms found, line number)`` of the lines the terms index saw holding any of ``wanted``
    (all lines but the tail of a capped source).
    """
    line_scores = []
    for number, text in enumerate(indexed_lines(row.lines), 1):
        found = sum(1 for t in set(tokens(text)) if t in wanted)
        if found:
            line_scores.append((found, number))
    return line_scores


def best_term_line(row: _Row, query: str, chunk_line: int) -> int:
    """The line of a terms hit to show: the one holding the most query terms (the first such),
    else the first line of the source's best chunk. ``row`` has its text loaded.
    """
    line_scores = _term_lines(row, set(query_terms(query)))
    return max(line_scores, key=lambda x: (x[0], -x[1]))[1] if line_scores else chunk_line


def _find_handle(index: SearchIndex, handle: str, within: Container[int] | None = None) -> int:
    """The row id of the source a handle names (the first one ``within`` a scope, when given).

    A short handle (the cues', ``handles.py``) names no session: inside a pinned scope it is
    the source of that session; without one it must name a source of exactly one session.
    """
    session_id, entry_id, part = parse_handle(handle)
    if session_id is None:
        return _find_short(index, handle, entry_id, part, within)
    for rowid in source_rowids(index.conn, session_id, entry_id, part):
        if within is None or rowid in within:
            return rowid
    raise UnknownHandle(handle)


def _find_short(
    index: SearchIndex, handle: str, entry_id: str, part: int, within: Container[int] | None
) -> int:
    """The row id of the source a short handle names: in the scope, else in the one session that has it.

    A v1 file's handle outlives Pi's rewrite as ``source_rowids`` says, in its short form too.
    """
    rows = index.conn.execute(
        "SELECT s.rowid, f.session_id FROM mem_sources s JOIN mem_files f ON f.id = s.file "
        "WHERE s.entry_id = ? AND s.part = ? ORDER BY s.rowid",
        (entry_id, part),
    ).fetchall()
    if not rows and _V1_ID.fullmatch(entry_id):
        rows = [
            (rowid, sid)
            for rowid, sid, seq in index.conn.execute(
                "SELECT s.rowid, f.session_id, s.seq FROM mem_sources s JOIN mem_files f ON f.id = s.file "
                "WHERE s.part = ? ORDER BY s.rowid",
                (part,),
            )
            if (within is None or rowid in within) and v1_entry_id(sid, seq) == entry_id
        ]
    if within is not None:
        rows = [(rowid, sid) for rowid, sid in rows if rowid in within]
    elif len({sid for _rowid, sid in rows}) > 1:
        raise AmbiguousHandle(
            f"the short handle {handle!r} names sources in {len({sid for _r, sid in rows})} sessions; "
            "pass the long handle (m1.…) that memory search gives"
        )
    if rows:
        return int(rows[0][0])
    raise UnknownHandle(handle)


_FILES_OF = "SELECT id FROM mem_files WHERE session_id = ?"
"""The files of one session (a session id is the file's: sources do not repeat it)."""


def source_rowids(conn: sqlite3.Connection, session_id: str, entry_id: str, part: int) -> list[int]:
    """The row ids of the sources a handle's ``(session, entry, part)`` names, oldest first.

    A v1 file's entries have no ids: the reader gives the ``n``-th entry ``v1_entry_id(session,
    n)``, and handles carry that. Pi gives them random ids of its own when it rewrites the file
    as v3, so such a handle names no entry any more; but the rewrite keeps every entry in its
    place, so the source of the same entry is the one at the same ``seq``. Looked for only when
    the entry id itself is unknown (a cost of one hash per source of that session and part).
    """
    rows = [
        int(rowid)
        for (rowid,) in conn.execute(
            f"SELECT rowid FROM mem_sources WHERE file IN ({_FILES_OF}) AND entry_id = ? AND part = ? ORDER BY rowid",
            (session_id, entry_id, part),
        )
    ]
    if rows or not _V1_ID.fullmatch(entry_id):
        return rows
    return [
        int(rowid)
        for rowid, seq in conn.execute(
            f"SELECT rowid, seq FROM mem_sources WHERE file IN ({_FILES_OF}) AND part = ? ORDER BY rowid",
            (session_id, part),
        )
        if v1_entry_id(session_id, seq) == entry_id
    ]


# ---- recall -----------------------------------------------------------------------------


def recall(
    index: SearchIndex,
    handle: str,
    from_line: int = 1,
    max_chars: int = RECALL_CHARS,
    pinned: MemoryScope | None = None,
) -> RecallPage:
    """Whole lines of one source from ``from_line`` (1-based), about ``max_chars`` at a time.

    With ``pinned``, a handle of a source off the caller's branch is unknown, as in search.
    """
    ensure_memory_tables(index)
    within = _walked_scope(index, None, None, _max_rowid(index), pinned)[1].labels if pinned else None
    rowid = _find_handle(index, handle, within)
    row = _load_texts(index, [_load(index, [rowid])[rowid]])[0]
    return _page(handle, row, from_line, max_chars)


def _page(handle: str, row: _Row, from_line: int, max_chars: int) -> RecallPage:
    """Whole lines of ``row`` (its text loaded) from ``from_line``, about ``max_chars`` of them."""
    total = row.line_count
    if from_line < 1 or from_line > max(total, 1):
        raise BadRange(f"line {from_line} is outside this source (lines 1-{total})")
    taken: list[str] = []
    size = 0
    for text in row.lines[from_line - 1 :]:
        if taken and size + len(text) + 1 > max_chars:
            break
        taken.append(text)
        size += len(text) + 1
    to_line = from_line + len(taken) - 1
    return RecallPage(
        handle=handle,
        kind=row.kind,  # type: ignore[arg-type]
        session_id=row.session_id,
        entry_id=row.entry_id,
        timestamp=row.timestamp,
        label=row.label,
        from_line=from_line,
        to_line=to_line,
        total_lines=total,
        text="\n".join(taken),
        sections=[MemorySection(title=t, first_line=a, last_line=b) for t, a, b in row.sections],
        next_line=to_line + 1 if to_line < total else None,
    )


# ---- for another index of the same sources (the team's) --------------------------------------


@dataclass(frozen=True)
class BranchSource:
    """A source on its session's current branch, as another index of raw memory copies it.

    ``rowid`` is this index's: an unchanged source keeps it (``index.py``), so a copier can
    tell what it already has without reading the text again.
    """

    rowid: int
    session_id: str
    entry_id: str
    part: int
    kind: str
    timestamp: str
    label: str
    sections: list[tuple[str, int, int]]
    line_count: int
    capped: bool
    context: MemoryContext


def branch_sources(index: SearchIndex, session_id: str) -> list[BranchSource]:
    """The sources on the current branch of each file of ``session_id``, labelled as a search labels them.

    Exactly the sources an unscoped ``search_memory`` of this session finds; empty for a
    session raw memory does not hold.
    """
    ensure_memory_tables(index)
    try:
        rowids, scope = _walked_scope(index, session_id, None, _max_rowid(index))
    except QueryError:
        return []
    rows = _load(index, rowids)
    return [
        BranchSource(
            r.rowid,
            r.session_id,
            r.entry_id,
            r.part,
            r.kind,
            r.timestamp,
            r.label,
            r.sections,
            r.line_count,
            r.capped,
            scope.labels[r.rowid],
        )
        for r in (rows[rowid] for rowid in rowids if rowid in rows)
        if r.session_id == session_id  # never another session this id is the start of
    ]


def memory_hit(
    source: BranchSource, text: str, query: str, match: MatchMode, score: float | None = None
) -> MemoryHit:
    """The hit ``search_memory`` would give for ``source`` (whose whole text is ``text``) and ``query``.

    For a copy of raw memory that found the source by its own index: the same line, snippet
    and section. A listing (no query) shows the first lines.
    """
    row = _text_row(source, text)
    needle = query.strip()
    line: int | None = None
    if needle and match == "literal":
        found = _lines_with(text, needle.lower(), every=False)
        line = found[0] if found else 1
    elif needle:
        line = best_term_line(row, needle, 1)
    return _hit(row, line, score, source.context)


def read_lines(
    handle: str, source: BranchSource, text: str, from_line: int = 1, max_chars: int = RECALL_CHARS
) -> RecallPage:
    """``recall``'s page of ``source``'s text (whole lines from ``from_line``), for a copy of raw memory."""
    return _page(handle, _text_row(source, text), from_line, max_chars)


def _text_row(source: BranchSource, text: str) -> _Row:
    return _Row(
        source.rowid,
        source.session_id,
        source.entry_id,
        source.part,
        source.kind,
        source.timestamp,
        source.label,
        source.sections,
        source.line_count,
        text=text,
    )
