"""Raw memory's tables in the search database, and keeping them in step with the session files.

Session files are read whole when their ``stat`` changed (Pi appends, so this is rare per
file) and their sources (see ``extract.py``) are synced row by row: a source whose content did
not change keeps its row id, which is what keeps paging cursors stable across appends. Lines
are indexed in chunks of ``CHUNK_LINES`` (one FTS row per line would multiply the index size
for long tool outputs); a literal hit is then confirmed line by line in Python (``query.py``).

These tables are ours, not ``SearchIndex``'s: they are created on first use and carry their
own version in ``meta``, so a change here rebuilds raw memory only (from the session files),
never the record index, and ``search/index.py`` need not know raw memory exists.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pbot_watch.archive.stamp import FileStamp, file_stamp
from pbot_watch.memory.extract import Source, session_memory
from pbot_watch.pi.entries import SessionReader
from pbot_watch.search.index import SearchIndex, storable
from pbot_watch.search.tokens import document
from pbot_watch.sources import iter_session_files

MEMORY_SCHEMA_VERSION = 3
"""Bump when a memory table or its tokenisation changes: raw memory is then rebuilt, never migrated."""

CHUNK_LINES = 16

_VERSION_KEY = "memory_schema_version"

MEMORY_TABLES = ("mem_files", "mem_entries", "mem_sources", "mem_lines", "mem_literal", "mem_terms")

_SCHEMA = (
    """CREATE TABLE mem_files(
  path TEXT PRIMARY KEY, session_id TEXT NOT NULL, ino INTEGER, size INTEGER, mtime_ns INTEGER
)""",
    """CREATE TABLE mem_entries(
  rowid INTEGER PRIMARY KEY,
  file TEXT NOT NULL,        -- session file path
  session_id TEXT NOT NULL,
  seq INTEGER NOT NULL,      -- file order
  entry_id TEXT NOT NULL,
  parent_id TEXT,
  kept TEXT                  -- a compaction's firstKeptEntryId ('' if none); NULL for other entries
)""",
    "CREATE INDEX mem_entries_by_file ON mem_entries(file, seq)",
    "CREATE INDEX mem_entries_by_session ON mem_entries(session_id)",
    """CREATE TABLE mem_sources(
  rowid INTEGER PRIMARY KEY,
  file TEXT NOT NULL,
  session_id TEXT NOT NULL,
  entry_id TEXT NOT NULL,    -- the entry whose presence on the path makes this source visible
  seq INTEGER NOT NULL,
  part INTEGER NOT NULL,     -- several sources can come from one entry (each tool call)
  kind TEXT NOT NULL,
  timestamp TEXT NOT NULL,
  label TEXT NOT NULL,
  lines TEXT NOT NULL,       -- JSON list of the source's lines
  sections TEXT NOT NULL,    -- JSON list of [title, first, last]
  digest TEXT NOT NULL       -- content hash: an unchanged source keeps its row id (stable cursors)
)""",
    "CREATE INDEX mem_sources_by_file ON mem_sources(file, seq, part)",
    """CREATE TABLE mem_lines(
  rowid INTEGER PRIMARY KEY,
  source INTEGER NOT NULL,
  line INTEGER NOT NULL,     -- first line of this chunk (1-based)
  count INTEGER NOT NULL,    -- lines in this chunk
  text TEXT NOT NULL
)""",
    "CREATE INDEX mem_lines_by_source ON mem_lines(source, line)",
    # The same two tokenisations as the record index (see search/index.py): a trigram index of
    # the lower-cased text for literal substrings, pre-tokenised words for BM25 and short CJK.
    "CREATE VIRTUAL TABLE mem_literal USING fts5(text, content='', tokenize='trigram case_sensitive 1')",
    "CREATE VIRTUAL TABLE mem_terms USING fts5(body, content='', tokenize='porter unicode61 remove_diacritics 2')",
)


def _schema_version(index: SearchIndex) -> int | None:
    row = index.conn.execute("SELECT value FROM meta WHERE key = ?", (_VERSION_KEY,)).fetchone()
    return int(row[0]) if row else None


def ensure_memory_tables(index: SearchIndex) -> None:
    """Create raw memory's tables, or rebuild them empty when they are of another version.

    One read when they are current (every query calls this); the check is repeated inside the
    write transaction so two processes opening a fresh database create the tables once.
    """
    if _schema_version(index) == MEMORY_SCHEMA_VERSION:
        return
    with index.transaction():
        if _schema_version(index) == MEMORY_SCHEMA_VERSION:
            return
        for table in MEMORY_TABLES:
            index.conn.execute(f"DROP TABLE IF EXISTS {table}")
        for statement in _SCHEMA:
            index.conn.execute(statement)
        index.conn.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
            (_VERSION_KEY, str(MEMORY_SCHEMA_VERSION)),
        )


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


def read_session_entries(path: Path) -> tuple[str | None, list[dict[str, Any]]]:
    """The session id and entries of one file (``None`` and nothing when it is no Pi session)."""
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
    ensure_memory_tables(index)
    conn = index.conn
    stamp = file_stamp(path)
    row = conn.execute("SELECT ino, size, mtime_ns FROM mem_files WHERE path = ?", (str(path),)).fetchone()
    if stamp is not None and row is not None and FileStamp(*row) == stamp:
        return False
    if stamp is None:
        with index.transaction():
            _drop_file(index, str(path))
        return row is not None
    try:
        session_id, entries = read_session_entries(path)
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
            (str(path), session_id, *stamp),
        )
        conn.execute("DELETE FROM mem_entries WHERE file = ?", (str(path),))
        conn.executemany(
            "INSERT INTO mem_entries(file, session_id, seq, entry_id, parent_id, kept) VALUES (?,?,?,?,?,?)",
            [
                (str(path), session_id, link.seq, link.entry_id, link.parent_id, link.kept)
                for link in memory.links
            ],
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
    ensure_memory_tables(index)
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
    """Forget all raw memory and read every session file again; return the session files held."""
    ensure_memory_tables(index)
    with index.transaction():
        for table in ("mem_literal", "mem_terms"):
            index.conn.execute(f"INSERT INTO {table}({table}) VALUES ('delete-all')")
        for table in ("mem_lines", "mem_sources", "mem_entries", "mem_files"):
            index.conn.execute(f"DELETE FROM {table}")
    refresh_memory(index, roots)
    return int(index.conn.execute("SELECT count(*) FROM mem_files").fetchone()[0])


def optimize_memory(index: SearchIndex) -> None:
    """Merge raw memory's FTS segments (after a rebuild), as ``SearchIndex.optimize`` does for records."""
    ensure_memory_tables(index)
    for table in ("mem_literal", "mem_terms"):
        index.conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")


def count_sources(index: SearchIndex) -> int:
    ensure_memory_tables(index)
    return int(index.conn.execute("SELECT count(*) FROM mem_sources").fetchone()[0])
