"""Raw memory in the search index, and its two queries: ``search_memory`` and ``recall``.

Session files are read whole when their ``stat`` changed (Pi appends, so this is rare per
file) and their sources (see ``memory.py``) are synced row by row: a source whose content did
not change keeps its row id, which is what keeps paging cursors stable across appends. Lines
are indexed in chunks of ``CHUNK_LINES`` (one FTS row per line would multiply the index size
for long tool outputs); a literal hit is then confirmed line by line in Python.

Scope is pi-echo's: the entries on the path from a leaf to the root of one session file (by
default its current leaf, the last entry in file order). Sources anchored elsewhere — an
abandoned branch — are never candidates, whatever the query.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pbot_watch.pi.entries import SessionReader
from pbot_watch.search.errors import BadCursor, BadRange, QueryError, UnknownHandle
from pbot_watch.search.index import SearchIndex, storable
from pbot_watch.search.memory import EntryLink, Source, path_to_root, session_memory
from pbot_watch.search.models import (
    MatchMode,
    MemoryHit,
    MemorySearchResult,
    MemorySection,
    RecallPage,
)
from pbot_watch.search.tokens import document, fts_any, fts_quote, is_cjk, query_terms
from pbot_watch.sources import iter_session_files

CHUNK_LINES = 16
MEMORY_PAGE = 20
MAX_MEMORY_PAGE = 50
SNIPPET_CONTEXT = 2
"""Lines shown before and after a hit line (within its section)."""
SNIPPET_LINE_CHARS = 300
RECALL_CHARS = 12_000
"""Recall returns whole lines up to about this many characters (always at least one line)."""
MIN_TRIGRAM_CHARS = 3
CURSOR_VERSION = 1


class UnknownEntry(QueryError):
    """A --leaf that is not an entry of the session."""


# ---- indexing ---------------------------------------------------------------------------


def _source_hash(source: Source) -> str:
    value = [
        source.kind,
        source.timestamp,
        source.label,
        source.seq,
        source.lines,
        [list(vars(s).values()) for s in source.sections],
    ]
    return hashlib.blake2b(
        json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"), digest_size=12
    ).hexdigest()


def _chunks(lines: list[str]) -> list[tuple[int, int, str]]:
    out = []
    for start in range(0, len(lines), CHUNK_LINES):
        piece = lines[start : start + CHUNK_LINES]
        out.append((start + 1, len(piece), storable("\n".join(piece))[0]))
    return out


def _read_entries(path: Path) -> tuple[str | None, list[dict[str, Any]]]:
    reader = SessionReader()
    entries: list[dict[str, Any]] = []
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            entries.extend(reader.feed(chunk))
    if reader.header is None or reader.not_session:
        return None, []
    return reader.header.id, entries


def sync_memory_file(index: SearchIndex, path: Path) -> bool:
    """Re-index one session file's raw memory if its ``stat`` changed; return whether it did."""
    conn = index.conn
    try:
        st = os.stat(path)
    except OSError:
        st = None
    row = conn.execute("SELECT ino, size, mtime_ns FROM mem_files WHERE path = ?", (str(path),)).fetchone()
    if st is not None and row is not None and tuple(row) == (st.st_ino, st.st_size, st.st_mtime_ns):
        return False
    if st is None:
        with index.transaction():
            _drop_file(index, str(path))
        return row is not None
    try:
        session_id, entries = _read_entries(path)
    except OSError:
        return False
    memory = session_memory(entries)
    with index.transaction():
        if session_id is None:
            _drop_file(index, str(path))
            return row is not None
        conn.execute(
            "INSERT INTO mem_files(path, session_id, ino, size, mtime_ns) VALUES (?,?,?,?,?) ON CONFLICT(path) DO UPDATE "
            "SET session_id=excluded.session_id, ino=excluded.ino, size=excluded.size, mtime_ns=excluded.mtime_ns",
            (str(path), session_id, st.st_ino, st.st_size, st.st_mtime_ns),
        )
        conn.execute("DELETE FROM mem_entries WHERE file = ?", (str(path),))
        conn.executemany(
            "INSERT INTO mem_entries(file, session_id, seq, entry_id, parent_id) VALUES (?,?,?,?,?)",
            [(str(path), session_id, link.seq, link.entry_id, link.parent_id) for link in memory.links],
        )
        _sync_sources(index, str(path), session_id, memory.sources)
    return True


def _sync_sources(index: SearchIndex, path: str, session_id: str, sources: list[Source]) -> None:
    conn = index.conn
    old: dict[tuple[str, int], tuple[int, str]] = {}
    for rowid, entry_id, part, digest in conn.execute(
        "SELECT rowid, entry_id, part, digest FROM mem_sources WHERE file = ?", (path,)
    ):
        old[(entry_id, part)] = (rowid, digest)
    keep: set[int] = set()
    for source in sources:
        digest = _source_hash(source)
        before = old.get((source.entry_id, source.part))
        if before is not None and before[1] == digest:
            keep.add(before[0])
            continue
        cur = conn.execute(
            "INSERT INTO mem_sources(file, session_id, entry_id, seq, part, kind, timestamp, label, lines, sections, digest) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                path,
                session_id,
                source.entry_id,
                source.seq,
                source.part,
                source.kind,
                storable(source.timestamp)[0],
                storable(source.label)[0],
                json.dumps(source.lines),
                json.dumps([[s.title, s.first, s.last] for s in source.sections]),
                digest,
            ),
        )
        rowid = cur.lastrowid
        assert rowid is not None
        keep.add(rowid)
        for line, count, text in _chunks(source.lines):
            chunk = conn.execute(
                "INSERT INTO mem_lines(source, line, count, text) VALUES (?,?,?,?)",
                (rowid, line, count, text),
            ).lastrowid
            conn.execute("INSERT INTO mem_literal(rowid, text) VALUES (?, ?)", (chunk, text.lower()))
            conn.execute("INSERT INTO mem_terms(rowid, body) VALUES (?, ?)", (chunk, document(text)))
    for rowid, _digest in old.values():
        if rowid not in keep:
            _drop_source(index, rowid)


def _drop_source(index: SearchIndex, rowid: int) -> None:
    conn = index.conn
    for chunk, text in conn.execute(
        "SELECT rowid, text FROM mem_lines WHERE source = ?", (rowid,)
    ).fetchall():
        conn.execute(
            "INSERT INTO mem_literal(mem_literal, rowid, text) VALUES ('delete', ?, ?)", (chunk, text.lower())
        )
        conn.execute(
            "INSERT INTO mem_terms(mem_terms, rowid, body) VALUES ('delete', ?, ?)", (chunk, document(text))
        )
    conn.execute("DELETE FROM mem_lines WHERE source = ?", (rowid,))
    conn.execute("DELETE FROM mem_sources WHERE rowid = ?", (rowid,))


def _drop_file(index: SearchIndex, path: str) -> None:
    for (rowid,) in index.conn.execute("SELECT rowid FROM mem_sources WHERE file = ?", (path,)).fetchall():
        _drop_source(index, rowid)
    index.conn.execute("DELETE FROM mem_entries WHERE file = ?", (path,))
    index.conn.execute("DELETE FROM mem_files WHERE path = ?", (path,))


def refresh_memory(index: SearchIndex, roots: Iterable[Path]) -> int:
    """Sync every session file under ``roots`` (and forget files that are gone); return files re-read."""
    seen: set[str] = set()
    changed = 0
    for root in roots:
        if not root.is_dir():
            continue
        for path in iter_session_files(root):
            seen.add(str(path))
            changed += sync_memory_file(index, path)
    gone = [p for (p,) in index.conn.execute("SELECT path FROM mem_files") if p not in seen]
    if gone:
        with index.transaction():
            for path in gone:
                _drop_file(index, path)
    return changed


def rebuild_memory(index: SearchIndex, roots: Iterable[Path]) -> int:
    """Forget all raw memory and read every session file again."""
    with index.transaction():
        for table in ("mem_literal", "mem_terms"):
            index.conn.execute(f"INSERT INTO {table}({table}) VALUES ('delete-all')")
        for table in ("mem_lines", "mem_sources", "mem_entries", "mem_files"):
            index.conn.execute(f"DELETE FROM {table}")
    refresh_memory(index, roots)
    return int(index.conn.execute("SELECT count(*) FROM mem_files").fetchone()[0])


# ---- handles and cursors ----------------------------------------------------------------


def _b64(value: Any) -> str:
    raw = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> Any:
    padded = text + "=" * (-len(text) % 4)
    return json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))


def make_handle(session_id: str, entry_id: str, part: int) -> str:
    """An opaque handle for one source: stable across re-indexing, meaningless to parse."""
    return "m1." + _b64([session_id, entry_id, part])


def parse_handle(handle: str) -> tuple[str, str, int]:
    try:
        prefix, body = handle.split(".", 1)
        session_id, entry_id, part = _unb64(body)
        if (
            prefix != "m1"
            or not isinstance(session_id, str)
            or not isinstance(entry_id, str)
            or not isinstance(part, int)
        ):
            raise ValueError
    except (ValueError, TypeError, UnicodeError):
        raise UnknownHandle(handle) from None
    return session_id, entry_id, part


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
    lines: list[str]
    sections: list[tuple[str, int, int]]

    @property
    def handle(self) -> str:
        return make_handle(self.session_id, self.entry_id, self.part)

    def section_of(self, line: int) -> MemorySection | None:
        for title, first, last in self.sections:
            if first <= line <= last:
                return MemorySection(title=title, firstLine=first, lastLine=last)
        return None


_ROW_COLUMNS = "s.rowid, s.session_id, s.entry_id, s.part, s.kind, s.timestamp, s.label, s.lines, s.sections"


def _row(values: Any) -> _Row:
    rowid, session_id, entry_id, part, kind, timestamp, label, lines, sections = values
    return _Row(
        rowid,
        session_id,
        entry_id,
        part,
        kind,
        timestamp,
        label,
        json.loads(lines),
        [tuple(s) for s in json.loads(sections)],
    )


def _scope(index: SearchIndex, session_id: str | None, leaf: str | None) -> tuple[list[int], list[str]]:
    """Source row ids visible from each session file's leaf, and the session ids searched."""
    conn = index.conn
    if session_id is not None:
        files = conn.execute(
            "SELECT path, session_id FROM mem_files WHERE session_id = ? ORDER BY path", (session_id,)
        ).fetchall()
        if not files:
            raise QueryError(
                f"unknown session {session_id!r}: no session file with this id under the session roots"
            )
    else:
        files = conn.execute("SELECT path, session_id FROM mem_files ORDER BY path").fetchall()
    visible: list[int] = []
    sessions: dict[str, None] = {}
    leaf_found = False
    for path, sid in files:
        links = [
            EntryLink(seq, entry_id, parent)
            for seq, entry_id, parent in conn.execute(
                "SELECT seq, entry_id, parent_id FROM mem_entries WHERE file = ? ORDER BY seq", (path,)
            )
        ]
        if not links:
            continue
        if leaf is None:
            tip = links[-1].entry_id
        elif any(link.entry_id == leaf for link in links):
            tip, leaf_found = leaf, True
        else:
            continue
        on_path = set(path_to_root(links, tip))
        sessions.setdefault(sid, None)
        visible.extend(
            rowid
            for rowid, entry_id in conn.execute(
                "SELECT rowid, entry_id FROM mem_sources WHERE file = ?", (path,)
            )
            if entry_id in on_path
        )
    if leaf is not None and not leaf_found:
        where = f" in session {session_id}" if session_id else ""
        raise UnknownEntry(f"unknown leaf entry {leaf!r}{where}")
    return visible, list(sessions)


def _fill_scope(index: SearchIndex, rowids: list[int]) -> None:
    conn = index.conn
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS mem_scope(rowid INTEGER PRIMARY KEY)")
    conn.execute("DELETE FROM temp.mem_scope")
    conn.executemany("INSERT OR IGNORE INTO temp.mem_scope(rowid) VALUES (?)", ((r,) for r in rowids))


# ---- search -----------------------------------------------------------------------------


def _cursor_key(query: str, match: str, in_: str | None, session_id: str | None, leaf: str | None) -> str:
    raw = json.dumps([query, match, in_, session_id, leaf], ensure_ascii=False).encode(
        "utf-8", "surrogatepass"
    )
    return hashlib.blake2b(raw, digest_size=8).hexdigest()


def _decode_cursor(cursor: str, key: str) -> tuple[int, int]:
    try:
        value = _unb64(cursor)
        if not isinstance(value, dict) or value.get("v") != CURSOR_VERSION:
            raise ValueError
        offset, snapshot = value["o"], value["s"]
        if not isinstance(offset, int) or not isinstance(snapshot, int) or offset < 0:
            raise ValueError
    except (ValueError, TypeError, KeyError, UnicodeError):
        raise BadCursor("it is not a cursor from memory search") from None
    if value.get("k") != key:
        raise BadCursor("it belongs to a different query, match, --in, --session or --leaf")
    return offset, snapshot


def _snippet(row: _Row, line: int) -> tuple[str, tuple[int, int]]:
    section = row.section_of(line)
    lo = max(section.firstLine if section else 1, line - SNIPPET_CONTEXT)
    hi = min(section.lastLine if section else len(row.lines), line + SNIPPET_CONTEXT)
    shown = [
        text if len(text) <= SNIPPET_LINE_CHARS else text[:SNIPPET_LINE_CHARS] + "…"
        for text in row.lines[lo - 1 : hi]
    ]
    return "\n".join(shown), (lo, hi)


def _hit(row: _Row, line: int | None, score: float | None) -> MemoryHit:
    if line is None:
        snippet, lines, section = "\n".join(row.lines[: 1 + 2 * SNIPPET_CONTEXT]), None, None
    else:
        snippet, span = _snippet(row, line)
        lines, section = span, row.section_of(line)
    return MemoryHit(
        handle=row.handle,
        kind=row.kind,  # type: ignore[arg-type]
        sessionId=row.session_id,
        entryId=row.entry_id,
        timestamp=row.timestamp,
        label=row.label,
        totalLines=len(row.lines),
        line=line,
        snippet=snippet,
        snippetLines=lines,
        section=section,
        score=score,
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
) -> MemorySearchResult:
    """Search raw memory along one leaf-to-root path per session file (pi-echo's search_memory).

    literal: case-insensitive substring per line, newest source first, one hit per source (per
    line with ``in_``); terms: BM25, best source first; no query and no ``in_``: list sources.
    """
    if not 1 <= limit <= MAX_MEMORY_PAGE:
        raise QueryError(f"memory search limit must be between 1 and {MAX_MEMORY_PAGE} (got {limit})")
    key = _cursor_key(query, match, in_, session_id, leaf)
    conn = index.conn
    if after is not None:
        offset, snapshot = _decode_cursor(after, key)
    else:
        offset = 0
        snapshot = int(conn.execute("SELECT coalesce(max(rowid), 0) FROM mem_sources").fetchone()[0])
    visible, sessions = _scope(index, session_id, leaf)
    if in_ is not None:
        target = _find_handle(index, in_)
        if target not in visible:
            raise UnknownHandle(in_)
        visible = [target]
    visible = [r for r in visible if r <= snapshot]
    _fill_scope(index, visible)
    needle = query.strip()
    hits: list[tuple[_Row, int | None, float | None]]
    if not needle:
        rows = [
            _row(v)
            for v in conn.execute(
                f"SELECT {_ROW_COLUMNS} FROM mem_sources s WHERE s.rowid IN (SELECT rowid FROM temp.mem_scope) "
                "ORDER BY s.timestamp DESC, s.seq DESC, s.part DESC"
            )
        ]
        hits = [(r, None, None) for r in rows]
    elif match == "terms":
        hits = _terms_hits(index, needle, per_line=in_ is not None)
    else:
        hits = _literal_hits(index, needle.lower(), per_line=in_ is not None)
    total = len(hits)
    page = hits[offset : offset + limit]
    next_offset = offset + limit if offset + limit < total else None
    cursor = (
        _b64({"v": CURSOR_VERSION, "k": key, "o": next_offset, "s": snapshot})
        if next_offset is not None
        else None
    )
    return MemorySearchResult(
        query=query,
        match=match,
        hits=[_hit(r, line, score) for r, line, score in page],
        total=total,
        nextCursor=cursor,
        scope=sessions,
    )


def _candidates(
    index: SearchIndex, sql: str, params: tuple[Any, ...]
) -> dict[int, list[tuple[int, int, str]]]:
    """Chunks (line, count, text) per source row id, for chunks in scope."""
    out: dict[int, list[tuple[int, int, str]]] = {}
    for source, line, count, text in index.conn.execute(sql, params):
        out.setdefault(source, []).append((line, count, text))
    return out


def _load(index: SearchIndex, rowids: Iterable[int]) -> dict[int, _Row]:
    ids = list(rowids)
    out: dict[int, _Row] = {}
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        marks = ",".join("?" * len(part))
        for values in index.conn.execute(
            f"SELECT {_ROW_COLUMNS} FROM mem_sources s WHERE s.rowid IN ({marks})", part
        ):
            row = _row(values)
            out[row.rowid] = row
    return out


_IN_SCOPE = "l.source IN (SELECT rowid FROM temp.mem_scope)"


def _literal_hits(
    index: SearchIndex, needle: str, *, per_line: bool
) -> list[tuple[_Row, int | None, float | None]]:
    base = f"SELECT l.source, l.line, l.count, l.text FROM mem_lines l WHERE {_IN_SCOPE}"
    if len(needle) >= MIN_TRIGRAM_CHARS and "\n" not in needle:
        chunks = _candidates(
            index,
            base + " AND l.rowid IN (SELECT rowid FROM mem_literal WHERE mem_literal MATCH ?)",
            (fts_quote(needle),),
        )
    elif needle and all(is_cjk(ch) for ch in needle):
        chunks = _candidates(
            index,
            base + " AND l.rowid IN (SELECT rowid FROM mem_terms WHERE mem_terms MATCH ?)",
            (fts_quote(needle),),
        )
    else:
        chunks = _candidates(index, base, ())
    rows = _load(index, chunks)
    hits: list[tuple[_Row, int | None, float | None]] = []
    for rowid, row in rows.items():
        # Confirm on the exact lines (the chunk index stores U+FFFD for lone surrogates).
        lines = [i + 1 for i, text in enumerate(row.lines) if needle in text.lower()]
        if not lines:
            continue
        if per_line:
            hits.extend((row, line, None) for line in lines)
        else:
            hits.append((row, lines[0], None))
        del rowid
    hits.sort(key=lambda h: (_desc(h[0].timestamp), -h[0].rowid, h[1] or 0))
    return hits


def _desc(text: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in text)


def _terms_hits(
    index: SearchIndex, query: str, *, per_line: bool
) -> list[tuple[_Row, int | None, float | None]]:
    terms = query_terms(query)
    if not terms:
        return []
    scored: dict[int, tuple[float, int, int, str]] = {}
    for source, line, count, text, rank in index.conn.execute(
        "SELECT l.source, l.line, l.count, l.text, bm25(mem_terms) FROM mem_terms JOIN mem_lines l ON l.rowid = mem_terms.rowid "
        f"WHERE mem_terms MATCH ? AND {_IN_SCOPE}",
        (fts_any(terms),),
    ):
        score = -rank
        best = scored.get(source)
        if best is None or score > best[0]:
            scored[source] = (score, line, count, text)
    rows = _load(index, scored)
    hits: list[tuple[_Row, int | None, float | None]] = []
    wanted = set(terms)
    for rowid, (score, first, _count, _text) in scored.items():
        row = rows[rowid]
        line_scores = []
        for number, text in enumerate(row.lines, 1):
            found = sum(1 for t in set(_line_tokens(text)) if t in wanted)
            if found:
                line_scores.append((found, number))
        if per_line:
            hits.extend(
                (row, number, round(score, 6))
                for _found, number in sorted(line_scores, key=lambda x: (-x[0], x[1]))
            )
        else:
            best_line = max(line_scores, key=lambda x: (x[0], -x[1]))[1] if line_scores else first
            hits.append((row, best_line, round(score, 6)))
    hits.sort(key=lambda h: (-(h[2] or 0), _desc(h[0].timestamp), h[1] or 0))
    return hits


def _line_tokens(text: str) -> list[str]:
    from pbot_watch.search.tokens import tokens  # noqa: PLC0415

    return tokens(text)


def _find_handle(index: SearchIndex, handle: str) -> int:
    session_id, entry_id, part = parse_handle(handle)
    row = index.conn.execute(
        "SELECT rowid FROM mem_sources WHERE session_id = ? AND entry_id = ? AND part = ? ORDER BY rowid LIMIT 1",
        (session_id, entry_id, part),
    ).fetchone()
    if row is None:
        raise UnknownHandle(handle)
    return int(row[0])


# ---- recall -----------------------------------------------------------------------------


def recall(index: SearchIndex, handle: str, from_line: int = 1, max_chars: int = RECALL_CHARS) -> RecallPage:
    """Whole lines of one source from ``from_line`` (1-based), about ``max_chars`` at a time."""
    rowid = _find_handle(index, handle)
    row = _load(index, [rowid])[rowid]
    total = len(row.lines)
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
        sessionId=row.session_id,
        entryId=row.entry_id,
        timestamp=row.timestamp,
        label=row.label,
        fromLine=from_line,
        toLine=to_line,
        totalLines=total,
        text="\n".join(taken),
        sections=[MemorySection(title=t, firstLine=a, lastLine=b) for t, a, b in row.sections],
        nextLine=to_line + 1 if to_line < total else None,
    )
