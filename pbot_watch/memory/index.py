"""Raw memory's tables in the search database, kept in step with the session files incrementally.

A session file an agent works in grows all the time, and it is what it searches. So each file
has a cursor (``pi/cursor.py``: offset, identity, fingerprints, as the service keeps for its
own reads) and the state needed to go on reading after it: the header, the number of entries
read, and the tool calls seen and answered (``mem_calls``), so that a result appended later
still comes with its call. A file that only grew costs the bytes it grew by; one that was
rewritten is read again from its start, and a source whose content did not change keeps its
row id, which is what keeps paging cursors stable.

``feed_memory`` takes entries someone has already parsed (the service, from the bytes it reads
for the records anyway); ``sync_memory_file`` reads the new bytes itself for the CLI. Texts are
stored once and indexed within bounds: see ``texts.py``.

These tables are ours, not ``SearchIndex``'s: they are created on first use and carry their
own version in ``meta``, so a change here rebuilds raw memory only (from the session files),
never the record index, and ``search/index.py`` need not know raw memory exists.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import sqlite3
import threading
import zlib
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pbot_watch.archive.stamp import FileStamp
from pbot_watch.history.jstext import dumps_utf8
from pbot_watch.memory import stamps
from pbot_watch.memory.extract import (
    LABEL_CHARS,
    EntryLink,
    MemoryFeed,
    Section,
    Source,
    call_ids,
    current_leaf_id,
    path_to_root,
    tool_label,
)
from pbot_watch.memory.rankings import RANKING_SCHEMA, RANKING_TABLES
from pbot_watch.memory.tally import TALLY_SCHEMA, TALLY_TABLES, TallyWriter, forget_text
from pbot_watch.memory.texts import (
    CHUNK_SLOTS,
    OVERFLOW_CHUNKS,
    capped,
    chunk_row,
    group_row,
    group_slot,
    literal_document,
    term_rows,
)
from pbot_watch.pi.cursor import Cursor, Plan
from pbot_watch.pi.entries import SessionHeader, SessionReader
from pbot_watch.redact.audit import HeldText
from pbot_watch.redact.policy import scrub_structure
from pbot_watch.search.codec import PACK_FROM, PLAIN, TRAIN_TEXTS, ZSTD, TextCodec, sample, train
from pbot_watch.search.database import Family, ensure_family
from pbot_watch.search.index import FTS_AUTOMERGE, READ_PIECE, SearchIndex, storable
from pbot_watch.shorten import shorten
from pbot_watch.sources import NotRegularFile, SessionTail, iter_session_entries

MEMORY_SCHEMA_VERSION = 16
"""Bump when a memory table, its tokenisation or what extraction keeps changes: raw memory is
then rebuilt, never migrated. (5: pbot-watch's own tool traffic is no source; 6: each file's
current branch is kept as entries arrive, ``mem_branches``; 7: rows name their file by
``mem_files.id``, not by its path, a text is kept once however many sources have it, and
texts are compressed with zstd and a dictionary, ``mem_dicts``; 8: the FTS tables and the
terms chunks index each distinct text once (keyed by ``mem_texts.rowid``), a text's line count
and cap live with it, and a source row keeps no session id, no label or sections its kind and
text give, and an 8-byte digest; 9: ``mem_pinned``, the pinned query's files a refresh keeps;
10: ``mem_visible`` has each visible source's text and timestamp, so an unscoped query filters
and orders candidates without reading their sources; 11: a terms row's id is its text's and its
place (``texts.CHUNK_SLOTS``): ``mem_chunks`` names only the chunks past a long text's first
eight; 12: ``mem_tallies``, the texts holding each common literal needle, ``tally.py``; 13:
the terms index keeps no positions (``detail=none``) and ``ranking.py`` scores its chunks (of
32 lines, not 16) from ``mem_chunk_tokens`` and ``mem_terms_stats``, the dictionary learns from
the first 4,000 texts, and ``mem_entries`` is keyed by file and seq without a row id; 14:
``mem_rankings``, the rankings of unscoped terms searches, ``rankings.py``; 15: a timestamp is
``stamps.py``'s integer key, with its text only when it is not of Pi's form; 16: a literal row
holds the texts of a file's ``texts.GROUP_ENTRIES`` entries, ``mem_groups``.)"""

READ_BYTES = 8 << 20
"""New bytes of a session file are parsed and stored this much at a time (memory stays bounded)."""

_VERSION_KEY = "memory_schema_version"
_DICT_KEY = "memory_last_dictionary"
_BRANCH_TABLES = ("mem_visible", "mem_path", "mem_branches")

MEMORY_TABLES = (
    "mem_files",
    "mem_entries",
    "mem_calls",
    "mem_sources",
    "mem_texts",
    "mem_dicts",
    "mem_chunks",
    "mem_literal",
    "mem_groups",
    "mem_terms",
    "mem_chunk_tokens",
    "mem_terms_stats",
    "mem_branches",
    "mem_path",
    "mem_visible",
    "mem_pinned",
    *TALLY_TABLES,
    *RANKING_TABLES,
    "mem_lines",  # of memory schema 3 and before
)

_SCHEMA = (
    # Every other table names a file by its id: a path (often 100-150 bytes) repeated on each of
    # hundreds of thousands of rows, and in their indexes, was a third of the database.
    """CREATE TABLE mem_files(
  id INTEGER PRIMARY KEY,
  path TEXT UNIQUE NOT NULL,
  session_id TEXT NOT NULL,
  header TEXT NOT NULL,      -- the header line (JSON): a reader resumes from it
  entries INTEGER NOT NULL,  -- entries read so far: the seq of the next one
  dev INTEGER NOT NULL, ino INTEGER NOT NULL, offset INTEGER NOT NULL, head TEXT NOT NULL, tail TEXT NOT NULL,
  size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL  -- the stamp at the last sync: unchanged means nothing to read
)""",
    # Kept in file order by its key: no row id and no index beside it (a row per entry).
    """CREATE TABLE mem_entries(
  file INTEGER NOT NULL,     -- mem_files.id
  seq INTEGER NOT NULL,      -- file order
  entry_id TEXT NOT NULL,
  parent_id TEXT,
  kept TEXT,                 -- a compaction's firstKeptEntryId ('' if none); NULL for other entries
  PRIMARY KEY (file, seq)
) WITHOUT ROWID""",
    "CREATE INDEX mem_entries_kept ON mem_entries(file) WHERE kept IS NOT NULL",
    """CREATE TABLE mem_calls(
  file INTEGER NOT NULL,
  call_id TEXT NOT NULL,
  block TEXT,                -- the latest toolCall block with this id (JSON, call_json); NULL if only a result named it
  answered INTEGER NOT NULL, -- a result for it was read
  PRIMARY KEY (file, call_id)
) WITHOUT ROWID""",
    # Hundreds of thousands of rows on a heavy user's disk, so nothing another table or the
    # text gives is repeated here: the session id is the file's, and most labels and sections
    # are what the kind and the text give (``stored_label``, ``stored_sections``).
    """CREATE TABLE mem_sources(
  rowid INTEGER PRIMARY KEY,
  file INTEGER NOT NULL,     -- mem_files.id (which has the session id)
  entry_id TEXT NOT NULL,    -- the entry whose presence on the path makes this source visible
  seq INTEGER NOT NULL,
  part INTEGER NOT NULL,     -- several sources can come from one entry (each tool call)
  kind TEXT NOT NULL,
  stamp INTEGER NOT NULL,    -- the entry's timestamp as stamps.py keeps it: a key ordering as the text does
  stamp_text TEXT,           -- NULL: the key gives the text (Pi's form); else the timestamp itself
  label TEXT,                -- NULL: the kind and the text give it (shown_label); NAMED || a tool's name: with it
  sections TEXT,             -- NULL: one section titled by the kind over every line; else JSON [[title, first, last], ...]
  unanswered TEXT,           -- a call delivered alone: its id (a later result replaces this source)
  digest BLOB NOT NULL,      -- content hash (8 bytes): an unchanged source keeps its row id (stable cursors)
  text INTEGER NOT NULL      -- mem_texts.rowid
)""",
    "CREATE INDEX mem_sources_by_file ON mem_sources(file, seq, part)",
    "CREATE INDEX mem_sources_by_text ON mem_sources(text)",
    "CREATE INDEX mem_sources_unanswered ON mem_sources(file, unanswered) WHERE unanswered IS NOT NULL",
    # The text once however many sources have it, and what the indexes say of it: a forked or
    # copied session file repeats its parent's entries, and a tool often prints the same output
    # again, so a text costs its FTS rows once too (texts.py says what they hold). `key` is a
    # hash of the text (a match is compared whole before it is shared); `refs` counts the
    # sources that have it.
    """CREATE TABLE mem_texts(
  rowid INTEGER PRIMARY KEY,
  key INTEGER NOT NULL,
  refs INTEGER NOT NULL,
  lines INTEGER NOT NULL,    -- its line count
  capped INTEGER NOT NULL,   -- longer than the indexes see: literal search reads it (texts.py)
  data BLOB NOT NULL,
  packed INTEGER NOT NULL,
  grp INTEGER                -- the mem_groups row whose literal row has it (NULL: capped, in none)
)""",
    "CREATE INDEX mem_texts_by_key ON mem_texts(key)",
    "CREATE INDEX mem_texts_by_group ON mem_texts(grp) WHERE grp IS NOT NULL",
    "CREATE INDEX mem_texts_capped ON mem_texts(capped) WHERE capped",
    # The zstd dictionaries texts are compressed with (search/codec.py), trained on the first texts
    # stored; `packed` of a text is the id of its own (ids start at 2). Empty data: none could be
    # trained (the texts went on without one). `hash` names a dictionary in a process's cache.
    "CREATE TABLE mem_dicts(id INTEGER PRIMARY KEY, hash BLOB NOT NULL, data BLOB NOT NULL)",
    # A terms row past a text's first CHUNK_SLOTS (texts.py): CHUNK_LINES lines of a text from `line`.
    "CREATE TABLE mem_chunks(rowid INTEGER PRIMARY KEY, text INTEGER NOT NULL, line INTEGER NOT NULL)",
    "CREATE INDEX mem_chunks_by_text ON mem_chunks(text)",
    # Literal: one row per group of texts (texts.group_slot; rowid = mem_groups.rowid), trigrams
    # without positions, a candidate filter. Terms: pre-tokenised chunks for BM25 and short CJK
    # (rowid: texts.chunk_row, or mem_chunks.rowid).
    "CREATE VIRTUAL TABLE mem_literal USING fts5(text, content='', columnsize=0, detail=none, tokenize='trigram case_sensitive 1')",
    # A literal row's group: the texts first stored from entries of `file` in `slot` (texts.group_slot;
    # NULL: one long text's own, or the file's forgotten) are those whose `grp` names it.
    "CREATE TABLE mem_groups(rowid INTEGER PRIMARY KEY, file INTEGER NOT NULL, slot INTEGER)",
    "CREATE UNIQUE INDEX mem_groups_by_slot ON mem_groups(file, slot) WHERE slot IS NOT NULL",
    # Terms keeps which chunks hold each token, no positions (ranking.py says why and how they
    # are scored); each chunk's length in tokens and the totals are BM25's other inputs.
    "CREATE VIRTUAL TABLE mem_terms USING fts5(body, content='', columnsize=0, detail=none, tokenize='porter unicode61 remove_diacritics 2')",
    # A file's build leaves a segment in both (FTS_AUTOMERGE): storing the 634 MB corpus's raw
    # memory took 30.6 s of CPU instead of 35.0 (means of four runs) at the same size, and a
    # warm no-match query 0.9 ms instead of 0.4.
    *(
        f"INSERT INTO {table}({table}, rank) VALUES ('automerge', {FTS_AUTOMERGE})"
        for table in ("mem_literal", "mem_terms")
    ),
    "CREATE TABLE mem_chunk_tokens(rowid INTEGER PRIMARY KEY, tokens INTEGER NOT NULL)",
    "CREATE TABLE mem_terms_stats(id INTEGER PRIMARY KEY CHECK (id = 1), rows INTEGER NOT NULL, tokens INTEGER NOT NULL)",
    "INSERT INTO mem_terms_stats(id, rows, tokens) VALUES (1, 0, 0)",
    # Each file's current branch (its last entry to the root), kept as entries arrive so that
    # an unscoped query reads it instead of walking every session (query.py).
    """CREATE TABLE mem_branches(
  id INTEGER PRIMARY KEY,
  file INTEGER UNIQUE NOT NULL,
  leaf TEXT,                 -- the file's last entry: where its current branch ends (NULL: no entry)
  length INTEGER NOT NULL    -- entries on the branch: the next one appended to the leaf goes here
)""",
    "CREATE TABLE mem_path(branch INTEGER NOT NULL, entry_id TEXT NOT NULL, pos INTEGER NOT NULL, PRIMARY KEY (branch, entry_id)) WITHOUT ROWID",
    # The sources on their file's current branch (rowid = mem_sources.rowid), with their entry's
    # place on it, and what an unscoped query filters and orders its candidates by (their text,
    # their timestamp): a fraction of all sources, read without a row of mem_sources each.
    """CREATE TABLE mem_visible(
  rowid INTEGER PRIMARY KEY, branch INTEGER NOT NULL, pos INTEGER NOT NULL, text INTEGER NOT NULL,
  stamp INTEGER NOT NULL, stamp_text TEXT  -- mem_sources' (stamps.py)
)""",
    "CREATE INDEX mem_visible_by_text ON mem_visible(text)",
    # Newest first as a literal search orders (query.py's _NEWEST_VISIBLE): a common word's page is
    # found by walking this until it is full, not by sorting its tens of thousands of hits.
    "CREATE INDEX mem_visible_newest ON mem_visible(stamp, CAST(stamp_text AS BLOB) || X'FF')",
    # Files a pinned query read that lie under no session root (Pi's session folder is not the
    # service's): a refresh of the roots keeps them, so the next pinned query goes on from its cursor.
    "CREATE TABLE mem_pinned(file INTEGER PRIMARY KEY)",
    *TALLY_SCHEMA,
    *RANKING_SCHEMA,
)


@dataclass
class MemorySync:
    """What bringing raw memory up to date cost: files parsed, and every byte read from session files."""

    files_read: int = 0
    bytes_read: int = 0
    bytes_left: int = 0
    """Bytes of the files synced that a ``budget`` left unread (read by the next sync)."""


def ensure_memory_tables(index: SearchIndex) -> None:
    """Create raw memory's tables, or rebuild them empty when they are of another version.

    How, and what happens to history's tables meanwhile (nothing), is ``search/database.py``'s.
    """
    ensure_family(index.conn, Family(_VERSION_KEY, MEMORY_SCHEMA_VERSION, MEMORY_TABLES, _SCHEMA))


_META_JSON = json.JSONEncoder(ensure_ascii=False)
"""What ``json.dumps(meta, ensure_ascii=False)`` encodes with, made once: ``dumps`` makes an encoder
per call given an option, a quarter of its time on a source's short meta. Same bytes: the digest
is stored and compared, so its JSON must never change."""


def _digests(source: Source, text: str) -> tuple[bytes, int]:
    """A hash of everything stored of a source, and the ``mem_texts`` key of its text.

    The text is hashed once (a huge one piece by piece); the source's hash covers that hash.
    """
    hasher = hashlib.blake2b(digest_size=16)
    for start in range(0, len(text), 1 << 20):
        hasher.update(text[start : start + (1 << 20)].encode("utf-8", "surrogatepass"))
    text_hash = hasher.digest()
    meta = [source.kind, source.timestamp, source.label, source.seq, source.unanswered]
    meta.append([[s.title, s.first, s.last] for s in source.sections])
    whole = hashlib.blake2b(_META_JSON.encode(meta).encode("utf-8", "surrogatepass"), digest_size=8)
    whole.update(text_hash)
    return whole.digest(), int.from_bytes(text_hash[:8], "big", signed=True)


@dataclass(frozen=True)
class TextRows:
    """What a new text's rows hold: its stored form, its literal row, its terms rows ``(first line, tokens, body)``."""

    data: bytes
    packed: int
    literal: str | None
    terms: list[tuple[int, int, str]]


def text_rows(text: str, codec: TextCodec) -> TextRows:
    """The rows of a text not stored yet: the CPU work of storing it, none of it the database's."""
    data, packed = codec.pack(text)
    return TextRows(data, packed, literal_document(text), term_rows(text))


@dataclass(slots=True)
class PreparedSource:
    """A source as ``mem_sources`` keeps it, with its text's rows when they were made ahead.

    The build worker (``memory/build.py``) sets ``rows`` of each text the index does not hold,
    off the writer's core; ``feed`` leaves them ``None`` and the writer makes them only for a
    text it does not hold yet. Not frozen: the worker fills ``rows`` in place, where a copy
    (``dataclasses.replace``) cost 3 % of its time.
    """

    entry_id: str
    seq: int
    part: int
    kind: str
    stamp: int
    stamp_text: str | None
    label: str | None
    sections: str | None
    unanswered: str | None
    digest: bytes
    key: int
    text: str
    line_count: int
    rows: TextRows | None = None


def prepare_source(source: Source) -> PreparedSource:
    """``source`` as stored, without its text's rows (``text_rows`` makes those)."""
    text = "\n".join(source.lines)
    digest, key = _digests(source, text)
    stamp, stamp_text = stamps.encode(storable(source.timestamp)[0])
    sections = stored_sections(source.kind, source.sections, len(source.lines))
    return PreparedSource(
        entry_id=source.entry_id,
        seq=source.seq,
        part=source.part,
        kind=source.kind,
        stamp=stamp,
        stamp_text=stamp_text,
        label=None
        if source.derived and not capped(text)
        else stored_label(
            source.kind, text, source.label, read_sections(source.kind, sections, len(source.lines))
        ),
        sections=sections,
        unanswered=source.unanswered,
        digest=digest,
        key=key,
        text=text,
        line_count=len(source.lines),
    )


CallRow = tuple[str, str | None, int]
"""A ``mem_calls`` row of a file: call id, its block (JSON, redacted), whether it was answered."""


def call_rows(state: MemoryFeed) -> list[CallRow]:
    """The ``mem_calls`` rows of what ``state`` has seen: its calls in the order they were seen,
    then the ids only a result named, sorted (not a set's order, which the hash seed changes: the
    same file gives the same rows in every process).
    """
    return [
        (
            call_id,
            call_json(call_id, scrub_structure(state.calls.get(call_id))),
            int(call_id in state.answered),
        )
        for call_id in [*state.calls, *sorted(state.answered - state.calls.keys())]
    ]


_CALL_KEYS = ["type", "id", "name", "arguments"]


def call_json(call_id: str, block: Any) -> str | None:
    """``mem_calls.block`` of a call's ``block``: compact JSON, and of Pi's usual block (its keys
    ``type`` ``toolCall``, ``id`` the call's id, ``name``, ``arguments``, in that order) only
    ``[name, arguments]``: the row says the rest (``call_block``). Any other list is kept as ``[list]``.
    """
    if block is None:
        return None
    if (
        isinstance(block, dict)
        and list(block) == _CALL_KEYS
        and block["type"] == "toolCall"
        and block["id"] == call_id
    ):
        block = [block["name"], block["arguments"]]
    elif isinstance(block, list):
        block = [block]
    # A tool call's arguments are the model's text: a lone surrogate is kept, escaped (SQLite
    # text is UTF-8), so the call reads back exactly as it was written.
    return dumps_utf8(block).decode("utf-8")


def call_block(call_id: str, stored: str) -> Any:
    """``call_json``'s inverse."""
    block = json.loads(stored)
    if isinstance(block, list) and len(block) == 2:
        name, arguments = block
        return {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}
    return block[0] if isinstance(block, list) else block


def derived_label(kind: str, text: str) -> str:
    """The label a source of ``kind`` gets from its text alone (a message's, its thinking's): its
    stored label is ``NULL`` when it is this one (``stored_label``).
    """
    return storable(f"{kind} {shorten(text, LABEL_CHARS, flatten=True)}")[0]


NAMED = "\x1f"
"""Begins a stored label that is only a tool's name (``stored_label``): no label begins so."""


def stored_label(kind: str, text: str, label: str, sections: list[tuple[str, int, int]]) -> str | None:
    """What ``mem_sources.label`` keeps of ``label``: ``None`` when the kind and the text give it
    (and the sections, for a tool's: ``extract.tool_label``), ``NAMED`` and the tool's name when
    they give the rest (a result whose call was not seen), else the label.
    """
    label = storable(label)[0]
    if capped(text):
        return label  # a capped text is never read whole to show a hit (query.py): its label is kept
    if kind != "tool":
        return None if label == derived_label(kind, text) else label
    if label == tool_label(text, sections, None):
        return None
    name = label[len("toolResult ") : label.find("(")] if label.startswith("toolResult ") else ""
    return NAMED + name if name and label == tool_label(text, sections, name) else label


def shown_label(kind: str, text: str, sections: list[tuple[str, int, int]], stored: str | None) -> str:
    """``stored_label``'s inverse: the label of a source with this stored label, text and sections."""
    if stored is not None and not stored.startswith(NAMED):
        return stored
    if kind == "tool":
        return tool_label(text, sections, stored[len(NAMED) :] if stored is not None else None)
    return derived_label(kind, text)


def stored_sections(kind: str, sections: list[Section], line_count: int) -> str | None:
    """What ``mem_sources.sections`` keeps: ``None`` for one section titled by the kind over every line."""
    spans = [[s.title, s.first, s.last] for s in sections]
    if spans == [[kind, 1, line_count]]:
        return None
    return json.dumps(spans, ensure_ascii=False, separators=(",", ":"))


def read_sections(kind: str, stored: str | None, line_count: int) -> list[tuple[str, int, int]]:
    """``stored_sections``'s inverse: ``(title, first line, last line)`` of each section."""
    if stored is None:
        return [(kind, 1, line_count)]
    return [(title, first, last) for title, first, last in json.loads(stored)]


@dataclass(frozen=True)
class _Known:
    """A session file as raw memory last read it."""

    header: SessionHeader
    entries: int
    cursor: Cursor
    stamp: FileStamp


# Raw memory's cursors carry no whole-file fingerprint (see ``SessionTail.plan``): every column
# of a cursor but the last.
_CURSOR = Cursor.COLUMNS[:-1]


def _known(index: SearchIndex, path: Path) -> _Known | None:
    row = index.conn.execute(
        f"SELECT header, entries, size, {', '.join(_CURSOR)} FROM mem_files WHERE path = ?",
        (str(path),),
    ).fetchone()
    if row is None:
        return None
    header, entries, size, *values = row
    cursor = Cursor.from_row(tuple(values))
    stamp = FileStamp(cursor.ino, size, cursor.mtime_ns)
    return _Known(SessionHeader.model_validate_json(header), entries, cursor, stamp)


class _FileWriter:
    """Raw memory of one session file being written, inside the caller's write transaction.

    ``start == 0``: the entries fed are the file from its start, and they replace what the
    index held for it (a source whose digest did not change keeps its row). Otherwise they
    follow the entries already held, and are added to them.
    """

    def __init__(self, index: SearchIndex, path: Path, session_id: str, start: int) -> None:
        self.conn = index.conn
        self.file = _file_id(self.conn, str(path), session_id)
        self.session_id = session_id
        self.reuse: dict[tuple[str, int, bytes], int] = {}
        """The replaced sources not seen again yet, by (entry, part, digest)."""
        self.entries = 0
        if start == 0:
            self.reuse = {
                (entry_id, part, digest): rowid
                for rowid, entry_id, part, digest in self.conn.execute(
                    "SELECT rowid, entry_id, part, digest FROM mem_sources WHERE file = ?", (self.file,)
                )
            }
            self.conn.execute("DELETE FROM mem_entries WHERE file = ?", (self.file,))
            self.conn.execute("DELETE FROM mem_calls WHERE file = ?", (self.file,))
        else:
            row = self.conn.execute("SELECT entries FROM mem_files WHERE id = ?", (self.file,)).fetchone()
            self.entries = row[0] if row else 0
        self.codec = text_codec(self.conn)
        self.untrained = not self.conn.execute("SELECT 1 FROM mem_dicts").fetchone()
        """No dictionary was trained yet: one is, from the first ``TRAIN_TEXTS`` texts."""
        self.held = 0
        if self.untrained:
            limited = "SELECT count(*) FROM (SELECT 1 FROM mem_texts LIMIT ?)"
            self.held = self.conn.execute(limited, (TRAIN_TEXTS,)).fetchone()[0]
        self.next_source = self._next("mem_sources")
        self.next_text = self._next("mem_texts")
        self.next_chunk = max(self._next("mem_chunks"), OVERFLOW_CHUNKS)
        self.next_group = self._next("mem_groups")
        self.slots: dict[int, int] = {}
        """The ``mem_groups`` row of each slot of the file this writer found or made."""
        self.unwritten: set[int] = set()
        """Groups this writer made whose literal row is not written yet: none of their texts is in one."""
        self.new_texts: list[list[Any]] = []
        """``mem_texts`` rows made by ``_text`` and not inserted yet (``_flush_texts``): one statement for all."""
        self.made: dict[int, list[tuple[list[Any], str]]] = {}
        """The texts this writer made, by key, with their row: a second source with one shares it."""
        self.literal: list[tuple[int, int, str]] = []
        """``(group, text row, literal document)`` of the texts made since the last ``_add``'s end."""
        self.chunks: list[tuple[int, int, int]] = []
        self.terms: list[tuple[int, str, int]] = []
        """The index rows of the texts ``_add`` stored, written at its end (a statement each, not one
        per text); a terms row is ``(row, body, tokens)``."""
        self.more_refs: Counter[int] = Counter()
        """Sources that share a stored text, by its row, counted at ``_add``'s end (a statement, not one per source)."""
        self.conn.execute("INSERT OR IGNORE INTO mem_branches(file, length) VALUES (?, 0)", (self.file,))
        self.branch, self.leaf, self.length = self.conn.execute(
            "SELECT id, leaf, length FROM mem_branches WHERE file = ?", (self.file,)
        ).fetchone()
        self.stale = start == 0
        """The branch must be walked again at ``finish`` (a rewrite, a fork, a ``/tree`` move)."""
        self.placed: dict[str, int] = {}
        """Entries put on the branch by this writer, with their position."""
        self.tallies = TallyWriter(self.conn)
        """Tests each text that becomes visible against the tallied needles (``tally.py``)."""

    def _next(self, table: str) -> int:
        return int(self.conn.execute(f"SELECT coalesce(max(rowid), 0) + 1 FROM {table}").fetchone()[0])

    def feed(self, entries: list[dict[str, Any]]) -> None:
        state = MemoryFeed(seq=self.entries)
        mentioned = list(call_ids(entries))
        for start in range(0, len(mentioned), 500):
            part = mentioned[start : start + 500]
            for call_id, block, answered in self.conn.execute(
                f"SELECT call_id, block, answered FROM mem_calls WHERE file = ? AND call_id IN ({','.join('?' * len(part))})",
                (self.file, *part),
            ):
                if block is not None:
                    state.calls[call_id] = call_block(call_id, block)
                if answered:
                    state.answered.add(call_id)
        fed = state.feed(entries)
        self.entries = state.seq
        self.store(fed.links, fed.answered_now, call_rows(state), [prepare_source(s) for s in fed.sources])

    def store(
        self,
        links: list[EntryLink],
        answered_now: Collection[str],
        calls: list[CallRow],
        sources: list[PreparedSource],
    ) -> None:
        """Store what extraction made of some entries: their links, the calls' state, their sources.

        The one way rows are written, whether the entries were extracted here (``feed``) or in
        the build worker (``memory/build.py``, ``store_build``).
        """
        self.conn.executemany(
            "INSERT INTO mem_entries(file, seq, entry_id, parent_id, kept) VALUES (?,?,?,?,?)",
            [(self.file, link.seq, link.entry_id, link.parent_id, link.kept) for link in links],
        )
        self._extend(links)
        for call_id in answered_now:
            for rowid, entry_id, part, digest in self.conn.execute(
                "SELECT rowid, entry_id, part, digest FROM mem_sources WHERE file = ? AND unanswered = ?",
                (self.file, call_id),
            ).fetchall():
                drop_sources(self.conn, [rowid])
                self.reuse.pop((entry_id, part, digest), None)
        self.conn.executemany(
            "INSERT INTO mem_calls(file, call_id, block, answered) VALUES (?,?,?,?) ON CONFLICT(file, call_id) "
            "DO UPDATE SET block = coalesce(excluded.block, block), answered = excluded.answered",
            [(self.file, *row) for row in calls],
        )
        self._add(sources)

    def _extend(self, links: list[EntryLink]) -> None:
        """Grow the branch by entries appended to its leaf; anything else makes it ``stale``.

        Pi's current branch ends at the file's last entry, so an entry whose parent is the leaf
        (and which is not on the branch already) is the branch one longer; an entry elsewhere
        (a fork, a ``/tree`` move, a new root) changes which branch is current: walked once.
        """
        for link in links:
            if self.stale:
                return
            if link.parent_id != self.leaf or self._position(link.entry_id) is not None:
                self.stale = True
                return
            self.placed[link.entry_id] = self.length
            self.conn.execute(
                "INSERT INTO mem_path(branch, entry_id, pos) VALUES (?,?,?)",
                (self.branch, link.entry_id, self.length),
            )
            self.leaf, self.length = link.entry_id, self.length + 1

    def _position(self, entry_id: str) -> int | None:
        """Where ``entry_id`` is on the branch as kept so far, ``None`` when it is not on it."""
        if entry_id in self.placed:
            return self.placed[entry_id]
        row = self.conn.execute(
            "SELECT pos FROM mem_path WHERE branch = ? AND entry_id = ?", (self.branch, entry_id)
        ).fetchone()
        return None if row is None else int(row[0])

    def _walk(self) -> None:
        """Put the branch from the file's last entry to the root in place of the one kept."""
        links = [
            EntryLink(seq, entry_id, parent)
            for seq, entry_id, parent in self.conn.execute(
                "SELECT seq, entry_id, parent_id FROM mem_entries WHERE file = ? ORDER BY seq", (self.file,)
            )
        ]
        self.leaf = current_leaf_id(links)
        path = path_to_root(links, self.leaf)[::-1] if self.leaf is not None else []
        self.length = len(path)
        self.conn.execute("DELETE FROM mem_path WHERE branch = ?", (self.branch,))
        self.conn.executemany(
            "INSERT INTO mem_path(branch, entry_id, pos) VALUES (?,?,?)",
            ((self.branch, entry_id, pos) for pos, entry_id in enumerate(path)),
        )
        if self.tallies:
            # Texts that were on no current branch before this walk: the tallies have not seen them.
            for text, data, packed in self.conn.execute(
                "SELECT t.rowid, t.data, t.packed FROM mem_texts t WHERE t.rowid IN (SELECT s.text FROM mem_sources s "
                "JOIN mem_path p ON p.branch = ? AND p.entry_id = s.entry_id WHERE s.file = ?) "
                "AND NOT EXISTS (SELECT 1 FROM mem_visible v WHERE v.text = t.rowid)",
                (self.branch, self.file),
            ):
                self.tallies.visible_bytes(text, self.codec.unpacked_bytes(data, packed))
            self.tallies.flush()
        self.conn.execute(
            "DELETE FROM mem_visible WHERE rowid IN (SELECT rowid FROM mem_sources WHERE file = ?)",
            (self.file,),
        )
        self.conn.execute(
            "INSERT INTO mem_visible(rowid, branch, pos, text, stamp, stamp_text) "
            "SELECT s.rowid, p.branch, p.pos, s.text, s.stamp, s.stamp_text FROM mem_sources s "
            "JOIN mem_path p ON p.branch = ? AND p.entry_id = s.entry_id WHERE s.file = ?",
            (self.branch, self.file),
        )
        self.stale = False

    def _add(self, sources: list[PreparedSource]) -> None:
        rows: list[tuple[Any, ...]] = []
        visible: list[tuple[int, int, int, int, int, str | None]] = []
        new = [s for s in sources if self.reuse.pop((s.entry_id, s.part, s.digest), None) is None]
        held = self._held_texts({source.key for source in new})
        for source in new:
            rowid, self.next_source = self.next_source, self.next_source + 1
            text_id = self._text(source, held)
            rows.append(
                (
                    rowid,
                    self.file,
                    source.entry_id,
                    source.seq,
                    source.part,
                    source.kind,
                    source.stamp,
                    source.stamp_text,
                    source.label,
                    source.sections,
                    source.unanswered,
                    source.digest,
                    text_id,
                )
            )
            position = None if self.stale else self._position(source.entry_id)
            if position is not None:
                visible.append((rowid, self.branch, position, text_id, source.stamp, source.stamp_text))
                self.tallies.visible(text_id, source.text)
        self._flush_texts()
        self.conn.executemany(
            "INSERT INTO mem_sources(rowid, file, entry_id, seq, part, kind, stamp, stamp_text, label, "
            "sections, unanswered, digest, text) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            rows,
        )
        self.conn.executemany(
            "INSERT INTO mem_visible(rowid, branch, pos, text, stamp, stamp_text) VALUES (?,?,?,?,?,?)",
            visible,
        )
        self.tallies.flush()
        self.conn.executemany(
            "UPDATE mem_texts SET refs = refs + ? WHERE rowid = ?",
            [(n, row) for row, n in self.more_refs.items()],
        )
        self.more_refs.clear()
        self._write_groups()
        self.conn.executemany("INSERT INTO mem_chunks(rowid, text, line) VALUES (?,?,?)", self.chunks)
        self.conn.executemany("INSERT INTO mem_terms(rowid, body) VALUES (?, ?)", [t[:2] for t in self.terms])
        _count_chunks(self.conn, [(row, tokens) for row, _body, tokens in self.terms])
        self.literal, self.chunks, self.terms = [], [], []

    def _group(self, slot: int | None) -> int:
        """The ``mem_groups`` row of ``slot`` of this file (``None``: a new row of one text's own)."""
        if slot is not None:
            if slot in self.slots:
                return self.slots[slot]
            row = self.conn.execute(
                "SELECT rowid FROM mem_groups WHERE file = ? AND slot = ?", (self.file, slot)
            ).fetchone()
            if row is not None:
                self.slots[slot] = int(row[0])
                return self.slots[slot]
        group, self.next_group = self.next_group, self.next_group + 1
        self.conn.execute(
            "INSERT INTO mem_groups(rowid, file, slot) VALUES (?, ?, ?)", (group, self.file, slot)
        )
        self.unwritten.add(group)
        if slot is not None:
            self.slots[slot] = group
        return group

    def _write_groups(self) -> None:
        """Write the literal row of each group the texts made since the last call joined: one that
        held texts before is taken out with what it held and written again with the new ones.
        """
        added: dict[int, list[tuple[int, str]]] = {}
        for group, rowid, document in self.literal:
            added.setdefault(group, []).append((rowid, document))
        for group, new in added.items():
            fresh = {rowid for rowid, _document in new}
            old = []
            if group not in self.unwritten:
                old = [d for rowid, d in _group_documents(self.conn, self.codec, group) if rowid not in fresh]
            self.unwritten.discard(group)
            before = group_row(old)
            if before:
                self.conn.execute(
                    "INSERT INTO mem_literal(mem_literal, rowid, text) VALUES ('delete', ?, ?)",
                    (group, before),
                )
            # A new text's row id is above every stored one: the row keeps row id order.
            after = group_row([*old, *(document for _rowid, document in new)])
            if after:
                self.conn.execute("INSERT INTO mem_literal(rowid, text) VALUES (?, ?)", (group, after))

    def _held_texts(self, keys: set[int]) -> dict[int, list[tuple[int, bytes, int]]]:
        """The stored texts with these keys (``rowid, data, packed``)."""
        held: dict[int, list[tuple[int, bytes, int]]] = {}
        for key, rowid, data, packed in _texts_with_keys(self.conn, keys, "rowid, data, packed"):
            held.setdefault(key, []).append((rowid, data, packed))
        return held

    def _text(self, source: PreparedSource, held: dict[int, list[tuple[int, bytes, int]]]) -> int:
        """The ``mem_texts`` row holding the source's text: one that already does (one more source
        has it), else a new one, indexed (its literal row and terms chunks).
        """
        text = source.text
        for mine, made in self.made.get(source.key, ()):
            if made == text:
                if mine[-1]:
                    self.more_refs[mine[0]] += 1  # a row this writer inserted already
                else:
                    mine[1] += 1  # refs, of a row not inserted yet
                return int(mine[0])
        for rowid, data, packed in held.get(source.key, ()):
            if self.codec.unpack(data, packed) == text:
                self.more_refs[rowid] += 1
                return rowid
        rows = source.rows
        if rows is None:
            rows = text_rows(text, self.codec)
        elif rows.packed not in (PLAIN, ZSTD if self.codec.current is None else self.codec.current):
            # Packed in the build worker with a dictionary older than the current one.
            rows = replace(rows, data=(packing := self.codec.pack(text))[0], packed=packing[1])
        rowid, self.next_text = self.next_text, self.next_text + 1
        group = None if rows.literal is None else self._group(group_slot(source.seq, rows.literal))
        # The last item says whether the row was inserted (refs are then counted in the table).
        row: list[Any] = [
            rowid,
            1,
            source.key,
            source.line_count,
            int(capped(text)),
            rows.data,
            rows.packed,
            group,
            False,
        ]
        self.new_texts.append(row)
        self.made.setdefault(source.key, []).append((row, text))
        if rows.literal is not None and group is not None:
            self.literal.append((group, rowid, rows.literal))
        for number, (line, tokens, body) in enumerate(rows.terms):
            if number < CHUNK_SLOTS:
                self.terms.append((chunk_row(rowid, number), body, tokens))
                continue
            chunk, self.next_chunk = self.next_chunk, self.next_chunk + 1
            self.chunks.append((chunk, rowid, line))
            self.terms.append((chunk, body, tokens))
        if self.untrained:
            self.held += 1
            if self.held >= TRAIN_TEXTS:
                self._flush_texts()
                self._train()
        return rowid

    def _flush_texts(self) -> None:
        self.conn.executemany(
            "INSERT INTO mem_texts(rowid, refs, key, lines, capped, data, packed, grp) VALUES (?,?,?,?,?,?,?,?)",
            [row[:-1] for row in self.new_texts],
        )
        for row in self.new_texts:
            row[-1] = True
        self.new_texts = []

    def _train(self) -> None:
        """Once ``TRAIN_TEXTS`` texts are stored: train the dictionary on them, and pack them again with it."""
        self.untrained = False
        first = "SELECT rowid, data, packed FROM mem_texts ORDER BY rowid LIMIT ?"
        # A sample of each, never the texts whole: one of them may be a pasted 50 MB log.
        samples = [
            sample(self.codec.unpack(data, packed))
            for _rowid, data, packed in self.conn.execute(first, (TRAIN_TEXTS,))
        ]
        trained = train(samples) or b""
        del samples
        # Never the id of an earlier one (after a rebuild): a reader decodes by id.
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (_DICT_KEY,)).fetchone()
        ident = max(ZSTD, int(row[0]) if row else ZSTD) + 1
        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (_DICT_KEY, str(ident)))
        self.conn.execute(
            "INSERT INTO mem_dicts(id, hash, data) VALUES (?, ?, ?)",
            (ident, _dictionary_hash(trained), trained),
        )
        old, self.codec = self.codec, text_codec(self.conn)
        if self.codec.current is None:
            return
        for rowid, data, packed in self.conn.execute(first, (TRAIN_TEXTS,)).fetchall():
            text = old.unpack(data, packed)
            if len(text) >= PACK_FROM:
                repacked = self.codec.pack(text)
                self.conn.execute(
                    "UPDATE mem_texts SET data = ?, packed = ? WHERE rowid = ?", (*repacked, rowid)
                )

    def finish(self, header: SessionHeader, cursor: Cursor, stamp: FileStamp) -> None:
        """Forget the replaced sources that did not come back, and remember where reading stopped."""
        drop_sources(self.conn, self.reuse.values())
        if self.stale:
            self._walk()
        self.conn.execute(
            "UPDATE mem_branches SET leaf = ?, length = ? WHERE id = ?", (self.leaf, self.length, self.branch)
        )
        updates = ", ".join(f"{c} = ?" for c in ("session_id", "header", "entries", "size", *_CURSOR))
        # The cursor's mtime is the stamp's: both come from the one fstat the file was read with.
        self.conn.execute(
            f"UPDATE mem_files SET {updates} WHERE id = ?",
            (
                self.session_id,
                header.model_dump_json(),
                self.entries,
                stamp.size,
                *cursor.row()[:-1],
                self.file,
            ),
        )


def _file_id(conn: sqlite3.Connection, path: str, session_id: str) -> int:
    """The id of ``path`` in ``mem_files``, adding its row when raw memory holds nothing of it yet.

    A new row's cursor is empty until the writer's ``finish`` (in the same transaction) sets it.
    """
    conn.execute(
        "INSERT INTO mem_files(path, session_id, header, entries, dev, ino, offset, head, tail, size, mtime_ns) "
        "VALUES (?, ?, '', 0, 0, 0, 0, '', '', -1, -1) ON CONFLICT(path) DO NOTHING",
        (path, session_id),
    )
    return int(conn.execute("SELECT id FROM mem_files WHERE path = ?", (path,)).fetchone()[0])


def feed_memory(
    index: SearchIndex,
    path: Path,
    header: SessionHeader,
    entries: list[dict[str, Any]],
    *,
    start: int,
    cursor: Cursor,
    stamp: FileStamp,
) -> bool:
    """Store the raw memory of ``entries``, parsed from ``path`` between ``start`` and ``cursor``.

    For a caller that parses session files anyway (the service): ``start == 0`` when the
    entries are the whole file (what the index held for it is replaced), else the offset they
    were read from, which must be where the index's own cursor for the file stands. Returns
    ``False``, storing nothing, when it does not: the caller then feeds the file from 0.
    """
    ensure_memory_tables(index)
    with index.transaction():
        if start != 0:
            known = _known(index, path)
            if known is None or known.cursor.offset != start:
                return False
        writer = _FileWriter(index, path, header.id, start)
        writer.feed(entries)
        writer.finish(header, cursor, stamp)
    return True


def store_build(
    index: SearchIndex,
    path: Path,
    header: SessionHeader,
    entries: int,
    links: list[EntryLink],
    calls: list[CallRow],
    sources: list[PreparedSource],
    *,
    cursor: Cursor,
    stamp: FileStamp,
) -> None:
    """Store a whole session file extracted and prepared elsewhere (the build worker, ``memory/build.py``).

    The same rows ``feed_memory(..., start=0)`` writes for the same bytes: only the inserts are
    left to this process, one transaction per file.
    """
    ensure_memory_tables(index)
    with index.transaction():
        writer = _FileWriter(index, path, header.id, 0)
        writer.store(links, (), calls, sources)
        writer.entries = entries
        writer.finish(header, cursor, stamp)


def forget_memory_file(index: SearchIndex, path: Path) -> bool:
    """Drop what raw memory holds of ``path`` (no longer a session file); whether it held any."""
    ensure_memory_tables(index)
    return _forget(index, path, _known(index, path))


def dictionaries(index: SearchIndex) -> tuple[dict[int, bytes], int | None]:
    """The compression dictionaries a build worker packs with: every one by id, and the current one."""
    ensure_memory_tables(index)
    data = dict(index.conn.execute("SELECT id, data FROM mem_dicts WHERE length(data) > 0"))
    return data, max(data, default=None)


def sync_memory_file(
    index: SearchIndex,
    path: Path,
    report: MemorySync | None = None,
    *,
    budget: int | None = None,
    pinned: bool = False,
) -> bool:
    """Bring one session file's raw memory up to date, reading only what changed; return whether anything did.

    ``budget``: read at most this many new bytes (to the last whole line), committed with the
    cursor where they end, so a big file is built a piece at a time and searched meanwhile;
    ``report.bytes_left`` says what is left. ``pinned``: a pinned query's file, kept by
    ``refresh_memory`` even when it lies under no root (``mem_pinned``).

    Unchanged ``stat``: nothing is read, and no write lock is taken. Grown with the same
    beginning (the cursor's plan): only the new bytes. Anything else: the file again from its
    start. Two processes may sync one file at once (the service and a query, two queries):
    the cursor is read again inside the write transaction, so the second one to get the lock
    plans from where the first left the file and never stores the same source twice.
    """
    ensure_memory_tables(index)
    report = report if report is not None else MemorySync()
    known = _known(index, path)
    try:
        tail = SessionTail(path)
    except (FileNotFoundError, NotRegularFile):
        return _forget(index, path, known)  # gone, or a FIFO, folder or device: no session file
    except OSError:
        return False  # unreadable for now: keep what was read of it
    with tail:
        stamp = FileStamp.of(tail.st)
        if known is not None and known.stamp == stamp:
            return False
        with index.transaction():
            known = _known(index, path)  # another process may have synced it meanwhile
            if known is not None and known.stamp == stamp:
                return False
            decision, _ = tail.plan(known.cursor if known is not None else None, whole=False)
            report.bytes_read += _window_bytes(known.cursor.offset if known is not None else 0)
            if decision == "nothing" and known is not None:
                index.conn.execute(
                    "UPDATE mem_files SET size = ?, mtime_ns = ? WHERE path = ?",
                    (stamp.size, stamp.mtime_ns, str(path)),
                )
                return False
            if decision == "append":
                changed = _read(index, path, tail, known, report, budget)
            else:
                changed = _read(index, path, tail, None, report, budget) or known is not None
            if pinned:
                index.conn.execute(
                    "INSERT OR IGNORE INTO mem_pinned(file) SELECT id FROM mem_files WHERE path = ?",
                    (str(path),),
                )
            return changed


def memory_touched(index: SearchIndex, path: Path, before: FileStamp, after: FileStamp) -> bool:
    """``path`` was found byte for byte as it stood at ``before``, now stamped ``after`` (a ``touch``).

    Raw memory's cursor has no whole-file fingerprint, so a new mtime at the same size reads
    the whole file again (``SessionTail.plan(whole=False)``). The service's cursor has one: when
    it checked the file unchanged, raw memory that holds the file exactly as stamped ``before``
    (the stamp the service had read it at) holds it as it is, and takes the new stamp instead of
    a re-read. Whether it did (it held another stamp: it reads as before).
    """
    if (before.ino, before.size) != (after.ino, after.size):
        return False
    ensure_memory_tables(index)
    with index.transaction():
        moved = index.conn.execute(
            "UPDATE mem_files SET mtime_ns = ? "
            "WHERE path = ? AND ino = ? AND size = ? AND offset = ? AND mtime_ns = ?",
            (after.mtime_ns, str(path), before.ino, before.size, before.size, before.mtime_ns),
        ).rowcount
    return moved > 0


def memory_plan(index: SearchIndex, path: Path) -> Plan | None:
    """What raw memory would read of ``path`` now (its own cursor's plan); ``None`` when it holds no cursor for it.

    Costs a ``stat`` and the cursor's two windows. The service asks before storing a whole file
    it read from its start: raw memory that already holds that file (a query read it) only needs
    what was appended, not the whole file stored again.
    """
    ensure_memory_tables(index)
    known = _known(index, path)
    if known is None:
        return None
    try:
        with SessionTail(path) as tail:
            return tail.plan(known.cursor, whole=False)[0]
    except OSError:
        return None


def _read(
    index: SearchIndex,
    path: Path,
    tail: SessionTail,
    known: _Known | None,
    report: MemorySync,
    budget: int | None = None,
) -> bool:
    """Parse the file from the cursor of ``known`` (from its start without one) and store it.

    Runs inside the caller's write transaction.
    """
    start = known.cursor.offset if known is not None else 0
    reader = SessionReader.resume(known.header, start, known.entries) if known else SessionReader()
    report.files_read += 1
    writer: _FileWriter | None = None

    def parse(data: bytes) -> bool:
        nonlocal writer
        report.bytes_read += len(data)
        entries = reader.feed(data)
        if reader.not_session or reader.header is None:
            return not reader.not_session
        if writer is None:
            writer = _FileWriter(index, path, reader.header.id, start)
        writer.feed(entries)
        return True

    read = tail.feed(start, parse, budget=budget, piece=READ_BYTES)
    if reader.header is None and not reader.not_session and start + read < tail.size:
        read += tail.feed(start + read, parse, piece=READ_BYTES)  # a first line longer than the budget
    if reader.header is None or reader.not_session:
        _drop_file(index.conn, str(path))
        return known is not None
    if writer is None:
        writer = _FileWriter(index, path, reader.header.id, start)
    stamp = FileStamp.of(tail.st)
    if reader.consumed < tail.size and start + read < tail.size:
        # Stopped by the budget: the stamp kept is not the file's, so the next sync reads on.
        report.bytes_left += tail.size - reader.consumed
        stamp = FileStamp(stamp.ino, reader.consumed, stamp.mtime_ns)
    writer.finish(reader.header, tail.cursor(reader.consumed), stamp)
    report.bytes_read += _window_bytes(reader.consumed)
    return True


def _window_bytes(offset: int) -> int:
    """Bytes a cursor at ``offset`` reads to fingerprint the file (see ``Cursor.windows``)."""
    return sum(length for _start, length in Cursor.windows(offset))


def _forget(index: SearchIndex, path: Path, known: _Known | None) -> bool:
    if known is None:
        return False
    with index.transaction():
        _drop_file(index.conn, str(path))
    return True


def source_text(conn: sqlite3.Connection, rowid: int) -> str:
    """The whole text of one stored source."""
    return source_texts(conn, [rowid])[rowid]


def _dictionary_hash(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


_CODECS: dict[tuple[int, tuple[tuple[int, bytes], ...]], TextCodec] = {}
"""Each thread's codec for each set of dictionaries seen (a zstd context is not for two threads)."""


def text_codec(conn: sqlite3.Connection) -> TextCodec:
    """What packs and unpacks this database's texts: a read of the dictionaries' ids and hashes,
    their data only the first time this process meets them.
    """
    names = tuple(conn.execute("SELECT id, hash FROM mem_dicts ORDER BY id").fetchall())
    key = (threading.get_ident(), names)
    codec = _CODECS.get(key)
    if codec is None:
        if len(_CODECS) > 64:
            _CODECS.clear()
        data = dict(conn.execute("SELECT id, data FROM mem_dicts WHERE length(data) > 0"))
        codec = _CODECS[key] = TextCodec(data, max(data, default=None))
    return codec


def source_texts(conn: sqlite3.Connection, rowids: list[int]) -> dict[int, str]:
    """The whole texts of these stored sources (at most a few hundred: one statement), by row id."""
    return {rowid: raw.decode("utf-8", "surrogatepass") for rowid, raw in source_bytes(conn, rowids).items()}


def source_bytes(conn: sqlite3.Connection, rowids: list[int]) -> dict[int, bytes]:
    """``source_texts`` as UTF-8 (lone surrogates kept), not decoded: a literal search tests most as bytes.

    The dictionaries are read after the texts: a text packed with a dictionary another process
    has just trained is read with it (both were written in one transaction).
    """
    rows = conn.execute(
        "SELECT s.rowid, t.data, t.packed FROM mem_sources s JOIN mem_texts t ON t.rowid = s.text "
        f"WHERE s.rowid IN ({','.join('?' * len(rowids))})",
        rowids,
    ).fetchall()
    codec = text_codec(conn)
    return {rowid: codec.unpacked_bytes(data, packed) for rowid, data, packed in rows}


def text_bytes(conn: sqlite3.Connection, text_ids: list[int]) -> dict[int, bytes]:
    """``source_bytes`` of ``mem_texts`` rows (at most a few hundred): a literal search confirms each text once."""
    rows = conn.execute(
        f"SELECT rowid, data, packed FROM mem_texts WHERE rowid IN ({','.join('?' * len(text_ids))})",
        text_ids,
    ).fetchall()
    codec = text_codec(conn)
    return {rowid: codec.unpacked_bytes(data, packed) for rowid, data, packed in rows}


def source_lines(conn: sqlite3.Connection, rowid: int) -> Iterator[str]:
    """The lines of one stored source, read, inflated and decoded a piece at a time.

    For a capped source (a pasted 50 MB log): a query that looks for a line in it, or shows a
    few of its lines, holds a piece and a line, never the whole text or a list of its lines.
    """
    (text,) = conn.execute("SELECT text FROM mem_sources WHERE rowid = ?", (rowid,)).fetchone()
    return text_lines(conn, text)


def text_lines(conn: sqlite3.Connection, text: int) -> Iterator[str]:
    """``source_lines`` of a ``mem_texts`` row."""
    (packed,) = conn.execute("SELECT packed FROM mem_texts WHERE rowid = ?", (text,)).fetchone()
    codec = text_codec(conn)
    decoder = codecs.getincrementaldecoder("utf-8")("surrogatepass")
    carry = ""
    with conn.blobopen("mem_texts", "data", text, readonly=True) as blob:
        # Inflated as read: a piece is at most READ_PIECE bytes, whatever logs compress by.
        stream = codec.reader(blob, packed)  # type: ignore[arg-type]
        while piece := stream.read(READ_PIECE):
            lines = (carry + decoder.decode(piece)).split("\n")
            carry = lines.pop()
            yield from lines
    yield carry + decoder.decode(b"", final=True)


def drop_sources(conn: sqlite3.Connection, rowids: Iterable[int]) -> None:
    """Remove these sources; a text goes with its last source, taking out of the contentless FTS
    tables exactly what was put in.
    """
    gone: dict[int, None] = {}  # in order, once each
    for rowid in rowids:
        row = conn.execute("SELECT text FROM mem_sources WHERE rowid = ?", (rowid,)).fetchone()
        conn.execute("DELETE FROM mem_sources WHERE rowid = ?", (rowid,))
        conn.execute("DELETE FROM mem_visible WHERE rowid = ?", (rowid,))
        if row is None:
            continue
        conn.execute("UPDATE mem_texts SET refs = refs - 1 WHERE rowid = ?", row)
        if conn.execute("SELECT 1 FROM mem_texts WHERE rowid = ? AND refs <= 0", row).fetchone():
            gone[row[0]] = None
    if not gone:
        return
    codec = text_codec(conn)
    _ungroup(conn, codec, set(gone))
    for text_id in gone:
        _drop_text(conn, codec, text_id)


def _group_documents(conn: sqlite3.Connection, codec: TextCodec, group: int) -> list[tuple[int, str]]:
    """``(row id, literal document)`` of the texts of a literal group, in row id order: what its row holds."""
    rows = conn.execute("SELECT rowid, data, packed FROM mem_texts WHERE grp = ? ORDER BY rowid", (group,))
    # A capped text is in no group: every one here has its document.
    return [(rowid, literal_document(codec.unpack(data, packed)) or "") for rowid, data, packed in rows]


def _ungroup(conn: sqlite3.Connection, codec: TextCodec, gone: set[int]) -> None:
    """Take the texts ``gone`` out of their literal groups: each group's row is written again without
    them (once however many of its texts go). An empty group keeps its slot (a writer may hold its
    id) until its file goes.

    A contentless row is deleted by giving FTS5 what it was made of: its texts, all still stored,
    since every text that leaves a group leaves it here.
    """
    groups = {
        group
        for text_id in gone
        for (group,) in conn.execute(
            "SELECT grp FROM mem_texts WHERE rowid = ? AND grp IS NOT NULL", (text_id,)
        )
    }
    for group in groups:
        members = _group_documents(conn, codec, group)
        before = group_row([document for _rowid, document in members])
        if before:
            conn.execute(
                "INSERT INTO mem_literal(mem_literal, rowid, text) VALUES ('delete', ?, ?)", (group, before)
            )
        after = group_row([document for rowid, document in members if rowid not in gone])
        if after:
            conn.execute("INSERT INTO mem_literal(rowid, text) VALUES (?, ?)", (group, after))


def _drop_text(conn: sqlite3.Connection, codec: TextCodec, text_id: int) -> None:
    """Forget a text no source has (its literal group left already, ``_ungroup``)."""
    data, packed = conn.execute("SELECT data, packed FROM mem_texts WHERE rowid = ?", (text_id,)).fetchone()
    text = codec.unpack(data, packed)
    rows = term_rows(text)
    bodies = [body for _line, _tokens, body in rows]
    chunks = [chunk_row(text_id, number) for number in range(min(len(bodies), CHUNK_SLOTS))]
    chunks += [
        chunk
        for (chunk,) in conn.execute("SELECT rowid FROM mem_chunks WHERE text = ? ORDER BY line", (text_id,))
    ]
    conn.executemany(
        "INSERT INTO mem_terms(mem_terms, rowid, body) VALUES ('delete', ?, ?)",
        zip(chunks, bodies, strict=True),
    )
    conn.executemany("DELETE FROM mem_chunk_tokens WHERE rowid = ?", ((chunk,) for chunk in chunks))
    conn.execute(
        "UPDATE mem_terms_stats SET rows = rows - ?, tokens = tokens - ?",
        (len(chunks), sum(tokens for _line, tokens, _body in rows)),
    )
    conn.execute("DELETE FROM mem_chunks WHERE text = ?", (text_id,))
    conn.execute("DELETE FROM mem_texts WHERE rowid = ?", (text_id,))
    forget_text(conn, text_id)


def _texts_with_keys(
    conn: sqlite3.Connection, keys: Iterable[int], columns: str
) -> Iterator[tuple[Any, ...]]:
    """``key`` and ``columns`` of the ``mem_texts`` rows with these keys: a statement per 500 keys, not one per text."""
    ordered = list(keys)
    for start in range(0, len(ordered), 500):
        part = ordered[start : start + 500]
        yield from conn.execute(
            f"SELECT key, {columns} FROM mem_texts WHERE key IN ({','.join('?' * len(part))})", part
        )


def held_text_keys(index: SearchIndex, keys: Iterable[int]) -> set[int]:
    """Of these text keys, those ``mem_texts`` holds a text of: the build worker makes no rows for them.

    A key names a text by its hash; the writer compares the texts themselves (``_FileWriter._text``)
    and makes the rows of a text whose key was held by another one.
    """
    return {row[0] for row in _texts_with_keys(index.conn, keys, "1")}


def _count_chunks(conn: sqlite3.Connection, sizes: list[tuple[int, int]]) -> None:
    """Record new terms rows' lengths in tokens, and add them to the totals BM25 averages over (``ranking.py``)."""
    if not sizes:
        return
    conn.executemany("INSERT INTO mem_chunk_tokens(rowid, tokens) VALUES (?, ?)", sizes)
    conn.execute(
        "UPDATE mem_terms_stats SET rows = rows + ?, tokens = tokens + ?",
        (len(sizes), sum(tokens for _row, tokens in sizes)),
    )


def terms_stats(conn: sqlite3.Connection) -> tuple[int, int]:
    """The terms rows of the whole index and their tokens: BM25's ``N`` and, over it, its average length."""
    row = conn.execute("SELECT rows, tokens FROM mem_terms_stats").fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def _drop_file(conn: sqlite3.Connection, path: str) -> None:
    row = conn.execute("SELECT id FROM mem_files WHERE path = ?", (path,)).fetchone()
    if row is None:
        return
    (file,) = row
    drop_sources(
        conn, [rowid for (rowid,) in conn.execute("SELECT rowid FROM mem_sources WHERE file = ?", (file,))]
    )
    # Groups holding texts other files still have stay, named by no slot: the file's id may be given again.
    conn.execute(
        "DELETE FROM mem_groups WHERE file = ? AND NOT EXISTS (SELECT 1 FROM mem_texts t WHERE t.grp = mem_groups.rowid)",
        (file,),
    )
    conn.execute("UPDATE mem_groups SET slot = NULL WHERE file = ?", (file,))
    conn.execute("DELETE FROM mem_entries WHERE file = ?", (file,))
    conn.execute("DELETE FROM mem_calls WHERE file = ?", (file,))
    conn.execute("DELETE FROM mem_path WHERE branch IN (SELECT id FROM mem_branches WHERE file = ?)", (file,))
    conn.execute("DELETE FROM mem_branches WHERE file = ?", (file,))
    conn.execute("DELETE FROM mem_pinned WHERE file = ?", (file,))
    conn.execute("DELETE FROM mem_files WHERE id = ?", (file,))


MemoryProgress = Callable[[int, int, str], None]
"""``(bytes read, bytes to read, file name)``, before each session file ``refresh_memory`` reads
and once at the end: what a progress bar needs, with nothing drawn where no one watches."""


def refresh_memory(
    index: SearchIndex,
    roots: Iterable[Path],
    report: MemorySync | None = None,
    *,
    skipped: list[str] | None = None,
    progress: MemoryProgress | None = None,
    leave: Collection[Path] = (),
    left: list[Path] | None = None,
) -> int:
    """Sync every session file under ``roots`` (and forget files that are gone); return files changed.

    Files left out for their names (``iter_session_files``) are said in ``skipped``. Under the
    roots in ``leave`` (the running service is still building their raw memory) a file raw
    memory does not hold as it is now is not read but put in ``left``: a query answers from
    what is there instead of doing the service's work a second time.
    """
    ensure_memory_tables(index)
    roots = list(roots)
    # Every query (the CLI's first of all) asks this of every session file, so the comparison is
    # of text and tuples: one read of what raw memory holds, one cached stat per file, no Path
    # built or hashed for a file that did not change (``FileStamp`` equals a plain tuple).
    held: dict[str, tuple[int, int, int]] = {}
    pinned: set[str] = set()
    for path, ino, size, mtime_ns, is_pinned in index.conn.execute(
        "SELECT path, ino, size, mtime_ns, id IN (SELECT file FROM mem_pinned) FROM mem_files"
    ):
        held[path] = (ino, size, mtime_ns)
        if is_pinned:
            pinned.add(path)
    seen: set[str] = set()
    stale: list[tuple[Path, int]] = []
    for root in roots:
        if not root.is_dir():
            continue
        for name, entry in iter_session_entries(root, skipped):
            seen.add(name)
            stamp = _entry_stamp(entry)
            was = held.get(name)
            if stamp is not None and stamp == was:
                # What sync_memory_file would find for an open, an fstat and a query.
                continue
            path = Path(name)
            if root in leave:
                if left is not None:
                    left.append(path)
                continue
            size = stamp.size if stamp is not None else 0
            before = was[1] if was is not None else 0
            stale.append((path, size - before if size > before else size))
    changed = 0
    done, total = 0, sum(size for _, size in stale)
    for path, size in stale:
        if progress is not None:
            progress(done, total, path.name)
        changed += sync_memory_file(index, path, report)
        done += size
    if progress is not None and stale:
        progress(total, total, "")
    # Files held before this refresh that it did not see; those it synced it saw.
    unseen = [p for p in held if p not in seen]
    if unseen:
        roots_seen = [root.resolve() for root in roots]
        gone = [
            p
            for p in unseen
            if not (p in pinned and _outside(Path(p), roots_seen) and _stamp(Path(p)) is not None)
        ]
        if gone:
            with index.transaction():
                for path in gone:
                    _drop_file(index.conn, path)
    return changed


def _outside(path: Path, roots: list[Path]) -> bool:
    """``path`` lies under none of ``roots`` (resolved): a pinned query's file, not a root's."""
    resolved = path.resolve()
    return not any(resolved.is_relative_to(root) for root in roots)


def _stamp(path: Path) -> FileStamp | None:
    try:
        return FileStamp.of(path.stat())
    except OSError:
        return None


def _entry_stamp(entry: os.DirEntry[str]) -> FileStamp | None:
    """``_stamp`` of a directory entry: its ``stat`` follows a symlink as ``Path.stat`` does."""
    try:
        return FileStamp.of(entry.stat())
    except OSError:
        return None


def rebuild_memory(index: SearchIndex, roots: Iterable[Path]) -> int:
    """Forget all raw memory and read every session file again; return the session files held."""
    ensure_memory_tables(index)
    with index.transaction():
        for table in ("mem_literal", "mem_terms"):
            index.conn.execute(f"INSERT INTO {table}({table}) VALUES ('delete-all')")
        for table in (
            "mem_groups",
            *TALLY_TABLES,  # first: the sources leaving their branches then count in no tally
            *RANKING_TABLES,
            *_BRANCH_TABLES,
            "mem_pinned",
            "mem_chunks",
            "mem_chunk_tokens",
            "mem_texts",
            "mem_dicts",
            "mem_sources",
            "mem_calls",
            "mem_entries",
            "mem_files",
        ):
            index.conn.execute(f"DELETE FROM {table}")
        index.conn.execute("UPDATE mem_terms_stats SET rows = 0, tokens = 0")
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


def held_stamps(index: SearchIndex) -> dict[Path, FileStamp]:
    """Each session file raw memory holds, with its stamp when raw memory last read it."""
    ensure_memory_tables(index)
    return {
        Path(path): FileStamp(ino, size, mtime_ns)
        for path, ino, size, mtime_ns in index.conn.execute("SELECT path, ino, size, mtime_ns FROM mem_files")
    }


def held_memory_texts(conn: sqlite3.Connection) -> Iterator[HeldText]:
    """Every text raw memory holds, for ``pbot-watch secrets scan``: each source's label and
    text, and the compression dictionaries (made of pieces of the texts they were trained on).

    A label the index does not keep is the one the kind and the text give, and is listed as
    such. Raw memory as schema 6 and before kept it (zlib, a text per source row) until the next
    query or service start rebuilds it: until then it is on disk, so it is listed too.
    """
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if {"mem_sources", "mem_texts", "mem_dicts"} <= tables:
        unpack = text_codec(conn).unpack
        rows = conn.execute(
            "SELECT f.path, f.session_id, s.entry_id, s.kind, s.label, s.sections, t.lines, t.data, t.packed "
            "FROM mem_sources s JOIN mem_files f ON f.id = s.file JOIN mem_texts t ON t.rowid = s.text"
        )
        for path, session_id, entry_id, kind, stored, sections, lines, data, packed in rows:
            text = unpack(data, packed)
            label = shown_label(kind, text, read_sections(kind, sections, lines), stored)
            yield HeldText("memory index", path, session_id, entry_id, (label, text))
        for ident, data in conn.execute("SELECT id, data FROM mem_dicts"):
            text = data.decode("utf-8", "replace")
            yield HeldText("memory index", "", "", f"compression dictionary {ident}", (text,))
    elif {"mem_sources", "mem_texts"} <= tables:
        rows = conn.execute(
            "SELECT s.file, s.session_id, s.entry_id, s.label, t.data, t.packed FROM mem_sources s "
            "JOIN mem_texts t ON t.rowid = s.rowid"
        )
        for path, session_id, entry_id, shown, data, packed in rows:
            text = (zlib.decompress(data) if packed else data).decode("utf-8", "surrogatepass")
            yield HeldText("memory index", str(path), session_id, entry_id, (shown or "", text))
