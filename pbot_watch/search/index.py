"""The derived search index: archive records (and raw sessions) in SQLite FTS5.

It lives at ``<state_dir>/search.db`` and holds nothing that cannot be rebuilt: every row
comes from a record file (``.pi/pbot/history/*.json`` or a central archive) or a Pi session
file. So the schema carries a version, and a database of another version, or one that is
corrupt, is simply deleted and rebuilt (``pbot-watch reindex`` does it on demand): what is done
when is ``search/database.py``'s, for these tables and raw memory's alike.

Freshness is decided by ``stat``: a record file whose inode, size and mtime are unchanged holds
the same record. A query therefore costs one directory listing per record folder and one
``stat`` per record file when nothing changed (about 1 ms per 300 records), and the service
calls ``update_record`` after each write so the CLI rarely finds work to do. (The folder's own
mtime is not trusted as a shortcut: a tool that rewrites a record in place does not change it.)

Two FTS5 tables serve the two match modes, both contentless (the text is kept once, in
``node_texts``, compressed as raw memory's texts are: ``NodeTexts``): ``nodes_literal`` is a
case-sensitive trigram index of the *lower-cased* text without positions, which finds the nodes
holding every trigram of a lower-cased needle (``literal.py`` confirms and tallies them);
``nodes_terms`` indexes the pre-tokenised text of ``terms.document`` (CJK unigrams and bigrams,
words, identifier parts; English stop words dropped and words stemmed by Snowball), for BM25
ranking and for one- and two-character CJK needles. It has three columns, so ranking can weigh
them: the person's side of an exchange, the answer's side, and a summary's text. The rules that
made its terms (``TermRules``) are recorded beside the schema version: an index made under other
rules is rebuilt like an older one.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from pbot_watch.archive.locations import folder_workspace
from pbot_watch.archive.stamp import FileStamp
from pbot_watch.history.jstext import locale_key, to_well_formed, utf16_slice
from pbot_watch.pi.untrusted import has_lone_surrogate, shown_path, unstorable_name
from pbot_watch.redact.audit import HeldText
from pbot_watch.redact.policy import scrub
from pbot_watch.search.codec import PLAIN, SAMPLE_CHARS, TRAIN_TEXTS, ZSTD, TextCodec, train
from pbot_watch.search.database import index_path, open_file, start_afresh, version_of
from pbot_watch.search.dates import parse_ms
from pbot_watch.search.tallies import Needles
from pbot_watch.search.terms import DEFAULT_RULES, TermRules, document, exchange_sides
from pbot_watch.sqlite import execute_script, transaction

if TYPE_CHECKING:
    from pbot_watch.archive.fresh import Delta, Written

SCHEMA_VERSION = 12
"""Bump when a table or a tokenisation changes: an older index is then rebuilt, never migrated.
(9: node texts are compressed, ``NodeTexts``; 10: ``nodes_literal`` keeps no positions, and
common needles are tallied, ``literal.py``; 11: no index of nodes by record and id; 12: a sort
key says where its capitals are, ``sort_key``.)"""

FTS_AUTOMERGE = 8
"""Segments of a level FTS5 merges into one (its ``automerge``; the default is 4), for every FTS
table of ``search.db``. Each write transaction leaves a segment, and on a first run there are
thousands: merging 8 at a time rewrites each posting about half as often, for the same size,
and a query probes a few more segments (tenths of a millisecond). Set when a table is made."""

INDEXED_CHARS = 1 << 20
"""Characters of one text (a node's, a raw-memory source's) the FTS tables see, about a megabyte.

A pasted 50 MB log must not cost minutes and gigabytes of index. A longer text is *capped*: it
has no row in the trigram index, so literal search reads it (it stays exact), and the terms
index sees its first ``INDEXED_CHARS`` characters. Reading a node shows all of it.
"""

_SCHEMA = f"""
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- A record folder we know about; workspace is NULL for a central archive (records say theirs).
CREATE TABLE folders(path TEXT PRIMARY KEY, workspace TEXT, mtime_ns INTEGER NOT NULL DEFAULT -1);
CREATE TABLE records(
  rowid INTEGER PRIMARY KEY,
  path TEXT NOT NULL UNIQUE,
  folder TEXT NOT NULL,
  id TEXT NOT NULL,
  session_id TEXT NOT NULL,
  name TEXT NOT NULL,
  name_json TEXT,  -- the exact name when it holds a lone surrogate (as node_texts.text_json)
  workspace TEXT,
  ino INTEGER NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
  machine TEXT, user_ TEXT  -- the record's provenance labels (archive/provenance.py), when it has them
);
CREATE INDEX records_by_session ON records(session_id);
CREATE INDEX records_by_folder ON records(folder);
-- Session names as ranking terms (rowid = records.rowid): a name that holds query terms lifts its hits.
CREATE VIRTUAL TABLE records_terms USING fts5(name, tokenize='unicode61 remove_diacritics 2');
-- The explicit integer key is what both contentless FTS tables use as their rowid. Rows are
-- kept narrow (the text lives in node_texts) because filtering and ordering thousands of
-- candidates reads these rows, and wide rows with overflow pages made that the slowest step.
CREATE TABLE nodes(
  rowid INTEGER PRIMARY KEY,
  record INTEGER NOT NULL,
  id TEXT NOT NULL,
  kind TEXT NOT NULL,
  level INTEGER NOT NULL,
  from_ TEXT NOT NULL, to_ TEXT NOT NULL,
  from_ms REAL, to_ms REAL,  -- Date.parse of from/to; NULL where JavaScript gives NaN
  to_key BLOB NOT NULL, id_key BLOB NOT NULL,  -- localeCompare order as byte strings
  ready INTEGER NOT NULL, completed INTEGER NOT NULL,
  searchable INTEGER NOT NULL,  -- in the FTS tables: a ready exchange or summary with text and dates
  capped INTEGER NOT NULL,  -- text longer than INDEXED_CHARS: not in nodes_literal, only its head in nodes_terms
  entry_ids TEXT NOT NULL, children TEXT NOT NULL, parents TEXT NOT NULL,
  seq INTEGER NOT NULL  -- position in the record's node list: an exchange's neighbours are seq +- 1
);
CREATE TABLE node_texts(
  rowid INTEGER PRIMARY KEY,  -- = nodes.rowid
  text NOT NULL,              -- TEXT, or when packed the zstd frame (BLOB) of its UTF-8: read it with node_text()
  text_json TEXT,             -- the exact text when it holds lone surrogates SQLite cannot store
  packed INTEGER NOT NULL     -- 0: plain; 1: zstd; else the node_dicts id it was packed with (search/codec.py)
);
-- The one zstd dictionary node texts are packed with, trained on the first ones (NodeTexts);
-- empty data: none could be trained. Made of pieces of those texts: secrets scan reads it.
CREATE TABLE node_dicts(id INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE INDEX nodes_by_id ON nodes(id);
CREATE INDEX nodes_order ON nodes(to_key DESC, id_key);
CREATE INDEX nodes_capped ON nodes(capped) WHERE capped;
-- A record's nodes, by place; a node of a record by id is found by nodes_by_id (ids name their
-- record): a second index of (record, id) took 5.2 MB of the 634 MB corpus's 77,517 nodes.
CREATE INDEX nodes_by_seq ON nodes(record, seq);
-- The session list reads only this: the session nodes, newest first, with what it filters on.
CREATE INDEX nodes_sessions ON nodes(to_key DESC, id_key, record, id, from_ms, to_ms) WHERE kind = 'session';
-- No column sizes: they serve only bm25(), and literal search never ranks. No positions: the
-- candidates of a longer needle are confirmed from their texts, and common needles tallied (literal.py).
CREATE VIRTUAL TABLE nodes_literal USING fts5(text, content='', columnsize=0, detail=none, tokenize='trigram case_sensitive 1');
-- A tallied needle (lower-cased) and when a search last read it; the nodes of nodes_literal holding it.
CREATE TABLE node_tallies(id INTEGER PRIMARY KEY, needle TEXT UNIQUE NOT NULL, used INTEGER NOT NULL);
CREATE TABLE node_tally_nodes(tally INTEGER NOT NULL, node INTEGER NOT NULL, PRIMARY KEY (tally, node)) WITHOUT ROWID;
CREATE INDEX node_tally_nodes_by_node ON node_tally_nodes(node);
-- The two sides of an exchange and summaries go in different columns so BM25 can weigh them
-- (bm25() weights). Stemming happens before (terms.py), so the tokenizer only splits.
CREATE VIRTUAL TABLE nodes_terms USING fts5(question, answer, summary, content='', tokenize='unicode61 remove_diacritics 2');
-- How many nodes hold a term (its document frequency), for choosing expansion terms.
CREATE VIRTUAL TABLE nodes_terms_vocab USING fts5vocab(nodes_terms, 'row');
INSERT INTO records_terms(records_terms, rank) VALUES ('automerge', {FTS_AUTOMERGE});
INSERT INTO nodes_literal(nodes_literal, rank) VALUES ('automerge', {FTS_AUTOMERGE});
INSERT INTO nodes_terms(nodes_terms, rank) VALUES ('automerge', {FTS_AUTOMERGE});
-- The best nodes of each common term (search/pools.py), valid while the generation is the same:
-- every change of node_texts (and so of the FTS tables) bumps it.
CREATE TABLE term_pools(key TEXT PRIMARY KEY, generation INTEGER NOT NULL, rowids BLOB NOT NULL, scores BLOB NOT NULL);
-- How many nodes hold a common term, valid likewise (search/pools.py, node_counts).
CREATE TABLE term_counts(term TEXT PRIMARY KEY, generation INTEGER NOT NULL, count INTEGER NOT NULL);
CREATE TRIGGER node_texts_inserted AFTER INSERT ON node_texts
  BEGIN UPDATE meta SET value = value + 1 WHERE key = 'generation'; END;
CREATE TRIGGER node_texts_updated AFTER UPDATE ON node_texts
  BEGIN UPDATE meta SET value = value + 1 WHERE key = 'generation'; END;
CREATE TRIGGER node_texts_deleted AFTER DELETE ON node_texts
  BEGIN UPDATE meta SET value = value + 1 WHERE key = 'generation'; END;
-- Session files seen while looking for workspaces (header cwd). Raw memory's tables are
-- pbot_watch/memory/index.py's: it creates them in this database on first use.
CREATE TABLE session_files(
  path TEXT PRIMARY KEY, ino INTEGER, size INTEGER, mtime_ns INTEGER, session_id TEXT, workspace TEXT
);
"""


def _order_bytes(value: Any) -> bytes:
    """An order-preserving byte encoding of ints, strings and (nested) tuples of them.

    Small ints are one byte (1..0xF0), larger ones 0xF1 and three bytes; a string is the tuple
    of its code points; a tuple ends with 0x00, below every element, so a prefix sorts first.
    """
    if isinstance(value, int):
        return (
            bytes([value + 1])
            if 0 <= value < 0xF0
            else b"\xf1" + min(max(value, 0), 0xFFFFFF).to_bytes(3, "big")
        )
    if isinstance(value, str):
        return _order_bytes(tuple(ord(ch) for ch in value))
    return b"".join(_order_bytes(item) for item in value) + b"\x00"


def _ascii_primary() -> dict[int, str]:
    """Each ASCII character's primary bytes in ``sort_key`` (``locale_key`` weighs every character on its own)."""
    return {code: _order_bytes(locale_key(chr(code))[0])[:-1].decode("latin-1") for code in range(128)}


_ASCII_PRIMARY = _ascii_primary()
_CAPITALS = re.compile("[A-Z]")
_LONG_KEY = 255
"""A key of this many weighed characters or more keeps its case weights one byte each."""


def _cases(cases: Sequence[int]) -> bytes:
    """The case part of a key, ordering as the case weights do among keys of equal primary weights.

    Those keys have as many case weights, each 0 (lower case) or 1 (a capital), and compare by the
    first place they differ: the one with the capital there is later. So the places of the
    capitals, each as ``255 - place``, order the same, and a key without capitals (a node id, a
    word) has none: two bytes per character were half of a node's id key. From ``_LONG_KEY``
    characters on, the weights are kept as they are (every key it is compared with has as many).
    """
    if len(cases) >= _LONG_KEY:
        return bytes(case + 1 for case in cases)
    return bytes(_LONG_KEY - place for place, case in enumerate(cases) if case)


def sort_key(value: str) -> bytes:
    """``locale_key`` as bytes, so SQLite orders by ``localeCompare`` with a plain index.

    The primary weights, a zero byte (below every weight, so a prefix sorts first), then where the
    capitals are (``_cases``). Two of these per node when an index is built: ASCII values
    (timestamps, ids) are translated in C from per-character tables; anything else takes
    ``general_sort_key``.
    """
    if not value.isascii():
        return general_sort_key(value)
    primary = value.translate(_ASCII_PRIMARY)
    if not _CAPITALS.search(value):
        return (primary + "\0").encode("latin-1")
    weighed = [ch for ch in value if _ASCII_PRIMARY[ord(ch)]]  # most control characters are ignorable
    return (primary + "\0").encode("latin-1") + _cases([1 if "A" <= ch <= "Z" else 0 for ch in weighed])


def general_sort_key(value: str) -> bytes:
    """``sort_key`` of any string, from ``locale_key`` itself."""
    weights, cases = locale_key(value)
    return _order_bytes(weights) + _cases(cases)


def storable(text: str) -> tuple[str, str | None]:
    """Text SQLite can hold, and the exact text as JSON when they differ (lone surrogates)."""
    if not has_lone_surrogate(text):
        return text, None
    return to_well_formed(text), json.dumps(text)


@dataclass(frozen=True)
class RecordFolder:
    """A folder of record files, and the workspace its records belong to (None: central archive)."""

    path: Path
    workspace: str | None


@dataclass
class RefreshReport:
    folders: int = 0
    records_seen: int = 0
    records_updated: int = 0
    records_removed: int = 0
    warnings: list[str] = field(default_factory=list)


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except OSError:
        return None


NODE_DICTIONARY = ZSTD + 1
"""The id of ``node_dicts``' one dictionary (a node text's ``packed`` when packed with it)."""


class NodeTexts:
    """How one database keeps node texts: packed as raw memory's texts are (``search/codec.py``).

    On the 634 MB corpus's records, 86 MB of exchange texts keep 0.24 of their bytes with a
    dictionary and 0.39 with zstd alone. The dictionary is trained once, in the write that
    brings the file to ``TRAIN_TEXTS`` node texts, and kept for the life of the file (a new
    schema makes a new file): the texts written before it stay packed without one. A capped
    text and one holding lone surrogates stay plain ``TEXT``: the first is read in pieces
    (``text_holds``, ``text_head``: SQLite's incremental blob reads), the second has its exact
    form in ``text_json``. A reader unpacks in SQL, ``node_text(text, packed)``: the queries'
    rows keep their shape, and only the rows a query returns are inflated.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._codec: TextCodec | None = None
        self._known: tuple[int, ...] | None = None
        self._trained = False

    def codec(self) -> TextCodec:
        """The codec of the dictionary the file holds now (read again when another process trained it)."""
        known = tuple(ident for (ident,) in self.conn.execute("SELECT id FROM node_dicts ORDER BY id"))
        if self._codec is None or known != self._known:
            data = dict(self.conn.execute("SELECT id, data FROM node_dicts WHERE length(data) > 0"))
            self._codec, self._known = TextCodec(data, max(data, default=None)), known
        return self._codec

    def packer(self) -> Callable[[str, str | None], tuple[str | bytes, str | None, int]]:
        """For one write: a node text and its ``text_json`` as stored, ``(text, text_json, packed)``."""
        codec = self.codec()

        def pack(text: str, text_json: str | None) -> tuple[str | bytes, str | None, int]:
            if text_json is not None or len(text) > INDEXED_CHARS:
                return text, text_json, PLAIN
            data, packed = codec.pack(text)
            return (text, None, PLAIN) if packed == PLAIN else (data, None, packed)

        return pack

    def unpack(self, stored: str | bytes | None, packed: int) -> str | None:
        """``node_text(text, packed)``: the text as it was given to ``packer``."""
        if not isinstance(stored, bytes):
            return stored  # plain: ``packer`` keeps an unpacked text as TEXT
        codec = self._codec if self._codec is not None else self.codec()
        try:
            return codec.unpack(stored, packed)
        except KeyError:  # packed with a dictionary trained since this codec was made
            return self.codec().unpack(stored, packed)

    def train_once(self) -> None:
        """In a write transaction that added texts: the dictionary, once the file holds enough texts."""
        if self._trained:
            return
        if self.conn.execute("SELECT 1 FROM node_dicts").fetchone() is not None:
            self._trained = True
            return
        held = self.conn.execute("SELECT count(*) FROM (SELECT 1 FROM node_texts LIMIT ?)", (TRAIN_TEXTS,))
        if held.fetchone()[0] < TRAIN_TEXTS:
            return
        # The start of each, as the dictionary learns from: a capped text is never read whole.
        rows = self.conn.execute(
            "SELECT CASE WHEN packed THEN node_text(text, packed) ELSE substr(text, 1, ?) END "
            "FROM node_texts ORDER BY rowid LIMIT ?",
            (SAMPLE_CHARS, TRAIN_TEXTS),
        ).fetchall()
        trained = train([text for (text,) in rows])
        self.conn.execute("INSERT INTO node_dicts(id, data) VALUES (?, ?)", (NODE_DICTIONARY, trained or b""))
        self._trained = True


class SearchIndex:
    """One open search database. Cheap to open; not shared between threads."""

    def __init__(self, path: Path, rules: TermRules = DEFAULT_RULES) -> None:
        self.path = path
        self.rules = rules
        self.conn = self._open(path, rules)
        self.texts = NodeTexts(self.conn)
        self._functions(self.conn, self.texts)
        self._unreadable: list[str] = []
        # Made by ``_prepare`` for one ``update_written``: id(node) -> (node, seq, row values, FTS
        # columns), and (id(text), level) -> (text, FTS columns) for ``_terms_columns``.
        self._prepared: dict[int, tuple[Any, int, dict[str, Any], tuple[str, str, str] | None]] = {}
        self._prepared_terms: dict[tuple[int, int], tuple[str, tuple[str, str, str]]] = {}

    # ---- opening ----------------------------------------------------------------------
    @classmethod
    def default_path(cls, state_dir: Path) -> Path:
        return index_path(state_dir)

    @staticmethod
    def _open(path: Path, rules: TermRules) -> sqlite3.Connection:
        def fits(conn: sqlite3.Connection) -> bool:
            return (
                version_of(conn, "schema_version") == SCHEMA_VERSION and SearchIndex._rules(conn) == rules.key
            )

        def create(conn: sqlite3.Connection) -> None:
            execute_script(conn, _SCHEMA)
            conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            conn.execute("INSERT INTO meta VALUES ('term_rules', ?)", (rules.key,))
            conn.execute("INSERT INTO meta VALUES ('generation', 0)")

        return open_file(path, fits, create)

    @staticmethod
    def _functions(conn: sqlite3.Connection, texts: NodeTexts) -> None:
        """SQL functions the queries use: ``holds(text, text_json, needle)``, pbot's literal test,
        and ``node_text(text, packed)``, a node's text as it was stored.
        """
        conn.create_function("holds", 3, _holds, deterministic=True)
        conn.create_function("node_text", 2, texts.unpack, deterministic=True)

    @staticmethod
    def _rules(conn: sqlite3.Connection) -> str | None:
        row = conn.execute("SELECT value FROM meta WHERE key = 'term_rules'").fetchone()
        return str(row[0]) if row else None

    def reset(self) -> None:
        """Start over with an empty index, for a damaged file (``database disk image is malformed``).

        Everything here is rebuilt from the archive and the session files by the next refresh;
        a damaged page cannot be trusted to be rewritten in place, so the file goes.
        """
        self.conn.close()
        start_afresh(self.path)
        self.conn = self._open(self.path, self.rules)
        self.texts = NodeTexts(self.conn)
        self._functions(self.conn, self.texts)

    def transaction(self) -> AbstractContextManager[None]:
        """One write transaction on this index (``pbot_watch.sqlite.transaction``)."""
        return transaction(self.conn)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- records ----------------------------------------------------------------------
    def known_folders(self) -> list[RecordFolder]:
        rows = self.conn.execute("SELECT path, workspace FROM folders ORDER BY path").fetchall()
        return [RecordFolder(Path(p), w) for p, w in rows]

    def update_from_archive(
        self, folders: Iterable[RecordFolder], *, forget_others: bool = False
    ) -> RefreshReport:
        """Bring the index up to date with these record folders; cheap when nothing changed.

        A first pass only reads (directory listings, ``stat``, the known stats): when nothing
        changed, no write lock is taken, so concurrent queries never wait for each other.
        ``forget_others`` drops folders not listed (a rebuild from exactly these folders).
        """
        report = RefreshReport()
        self._unreadable = report.warnings
        wanted = {f.path: f for f in folders}
        known = {
            Path(p): (w, m) for p, w, m in self.conn.execute("SELECT path, workspace, mtime_ns FROM folders")
        }
        stale = [p for p in known if p not in wanted] if forget_others else []
        dirty = [f for f in wanted.values() if self._dirty(f, known.get(f.path))]
        report.folders = len(wanted)
        if not stale and not dirty:
            return report
        with self.transaction():
            for path in stale:
                self._drop_folder(path)
            for folder in dirty:
                self._refresh_folder(folder, known.get(folder.path, (None, -2))[1], report)
        return report

    def _dirty(self, folder: RecordFolder, known: tuple[str | None, int] | None) -> bool:
        """Whether a folder's files differ from what the index holds (read-only)."""
        if not folder.path.is_dir():
            return known is not None  # gone: drop it once; never there: nothing to do
        if known is None or known[0] != folder.workspace:
            return True
        try:
            entries = [
                e for e in os.scandir(folder.path) if e.name.endswith(".json") and not unstorable_name(e.path)
            ]
        except OSError:
            return True
        indexed = {
            path: (ino, size, mtime)
            for path, ino, size, mtime in self.conn.execute(
                "SELECT path, ino, size, mtime_ns FROM records WHERE folder = ?", (str(folder.path),)
            )
        }
        if len(indexed) > len(entries):
            return True
        for entry in entries:
            try:
                st = entry.stat()
            except OSError:
                return True
            if indexed.get(entry.path) != FileStamp.of(st):
                # Also true for a torn or foreign .json we keep skipping: cheap, and rare.
                return True
        return False

    def _refresh_folder(self, folder: RecordFolder, known_mtime: int, report: RefreshReport) -> None:
        st = _stat(folder.path)
        if st is None:
            # The folder is gone (workspace deleted): its records go with it.
            self._drop_folder(folder.path)
            if known_mtime != -2:
                report.records_removed += 1
            return
        if known_mtime == -2 or self._folder_workspace(folder.path) != folder.workspace:
            self.conn.execute(
                "INSERT INTO folders(path, workspace, mtime_ns) VALUES (?, ?, -1) "
                "ON CONFLICT(path) DO UPDATE SET workspace = excluded.workspace",
                (str(folder.path), folder.workspace),
            )
        present: set[str] = set()
        try:
            entries = list(os.scandir(folder.path))
        except OSError:
            entries = []
        known = {
            path: (ino, size, mtime)
            for path, ino, size, mtime in self.conn.execute(
                "SELECT path, ino, size, mtime_ns FROM records WHERE folder = ?", (str(folder.path),)
            )
        }
        for entry in entries:
            if not entry.name.endswith(".json"):
                continue
            if unstorable_name(entry.path):
                report.warnings.append(
                    f"{shown_path(entry.path)}: a record file whose name is not UTF-8 is skipped (rename it)"
                )
                continue
            present.add(entry.path)
            report.records_seen += 1
            try:
                st = entry.stat()
            except OSError:
                continue
            if known.get(entry.path) == FileStamp.of(st):
                continue
            if self._update_record(Path(entry.path), folder):
                report.records_updated += 1
        for (path,) in self.conn.execute(
            "SELECT path FROM records WHERE folder = ?", (str(folder.path),)
        ).fetchall():
            if path not in present:
                self._drop_record(path)
                report.records_removed += 1
        if st.st_mtime_ns != known_mtime:
            self.conn.execute(
                "UPDATE folders SET mtime_ns = ? WHERE path = ?", (st.st_mtime_ns, str(folder.path))
            )

    def _folder_workspace(self, path: Path) -> str | None:
        row = self.conn.execute("SELECT workspace FROM folders WHERE path = ?", (str(path),)).fetchone()
        return row[0] if row else None

    def update_record(self, path: Path, workspace: str | None = None) -> bool:
        """Index (or re-index, or drop) one record file; the service calls this after each write.

        ``workspace`` is the workspace of a per-workspace folder; leave it ``None`` for a
        central archive (its records carry their own ``workspace`` field) or to let the
        folder's known workspace apply. Returns whether anything changed.

        A record the index does not hold yet is read, and its rows and FTS columns made, before
        the write transaction (``_read_ahead``): on a first run the service's history index
        falls behind the records written, reads most of them back, and read and tokenised
        inside the transaction they held search.db's write lock from raw memory's builders.
        """
        ahead = self._read_ahead(path)
        if ahead is not None:
            return self.update_written(path, ahead, workspace)
        with self.transaction():
            return self._update_record(path, self._record_folder(path, workspace))

    def _read_ahead(self, path: Path) -> Written | None:
        """Record ``path`` as read now, when the index holds no row of it; else ``None`` (it is
        read inside the transaction, as before, if it changed).

        Only a record new to the index: a changed one is compared node by node with its rows,
        and making every node's columns ahead would tokenise the unchanged ones for nothing.
        The file's stamp is taken before and after the read; a file replaced meanwhile is left
        to the transaction, which reads it again (``update_written`` finds the stamp changed).
        """
        from pbot_watch.archive.files import read_record  # noqa: PLC0415
        from pbot_watch.archive.fresh import Written  # noqa: PLC0415 - memory queries read no record

        st = _stat(path)
        if st is None or self.conn.execute("SELECT 1 FROM records WHERE path = ?", (str(path),)).fetchone():
            return None
        record = read_record(path)
        after = _stat(path)
        if record is None or after is None or FileStamp.of(after) != FileStamp.of(st):
            return None
        return Written(record, FileStamp.of(st), base=None, changed=None)

    def update_written(self, path: Path, written: Written, workspace: str | None = None) -> bool:
        """``update_record`` for a record this process just wrote, from ``written`` (``archive/fresh.py``).

        The file is not read: while it is still as written (same stamp), ``written.record`` is
        its content. When the index holds the file as it was at ``written.base``, only the
        nodes ``written.changed`` names are compared and rewritten (and the others' positions
        kept); otherwise every node is, from the record in memory. A file changed since (by
        another tool) is read as ``update_record`` reads it.
        """
        self._prepare(written)
        try:
            return self._update_written(path, written, workspace)
        finally:
            self._prepared.clear()
            self._prepared_terms.clear()

    def _update_written(self, path: Path, written: Written, workspace: str | None) -> bool:
        with self.transaction():
            folder = self._record_folder(path, workspace)
            st = _stat(path)
            if st is None or FileStamp.of(st) != written.stamp:
                return self._update_record(path, folder)
            row = self.conn.execute(
                "SELECT rowid, ino, size, mtime_ns FROM records WHERE path = ?", (str(path),)
            ).fetchone()
            if row is not None and tuple(row[1:]) == written.stamp:
                return False
            held = FileStamp(*row[1:]) if row is not None else None
            at_base = held is not None and held == written.base
            only = written.changed if at_base else None
            delta = written.delta if at_base else None
            self._store_record(path, folder, written.record, st, row, only, delta)
            return True

    def _prepare(self, written: Written) -> None:
        """The row values and FTS columns of the written record's changed nodes, made before the
        write transaction, which then only looks them up.

        They are pure functions of the node (scrub, the lone-surrogate check, the terms of the
        text's head), and search.db's one write lock is what the service's history index and
        raw memory's build workers queue for. Made inside the transaction, a pasted 50 MB log
        held the lock 1.6 s, 1 s of it for this; and on a first run over 634 MB the history
        index held the lock 21.6 s (committing aside), 12.0 s once records new to it were read
        and prepared before (``_read_ahead``). Kept by the node's identity, for this one call.
        """
        nodes = written.record.get("nodes")
        if not isinstance(nodes, list):
            return
        for seq, raw in enumerate(nodes):
            if not isinstance(raw, dict):
                continue
            if written.changed is not None and raw.get("id") not in written.changed:
                continue
            node = _node_values(raw, seq)
            if node is None:
                continue
            terms = self._terms_columns(0, node["text"], node["level"])[1:] if node["searchable"] else None
            self._prepared[id(raw)] = (raw, seq, node, terms)
            if terms is not None:
                self._prepared_terms[(id(node["text"]), node["level"])] = (node["text"], terms)

    def _values(self, raw: Any, seq: int) -> dict[str, Any] | None:
        """``_node_values``, or what ``_prepare`` made of this very node at this place."""
        prepared = self._prepared.get(id(raw))
        if prepared is not None and prepared[0] is raw and prepared[1] == seq:
            return prepared[2]
        return _node_values(raw, seq)

    def _record_folder(self, path: Path, workspace: str | None) -> RecordFolder:
        """The known folder of record ``path`` (made known now if it was not), with its workspace."""
        folder = path.parent
        row = self.conn.execute("SELECT workspace FROM folders WHERE path = ?", (str(folder),)).fetchone()
        if workspace is None and row is not None:
            workspace = row[0]
        if workspace is None:
            workspace = folder_workspace(folder)
        if row is None:
            self.conn.execute(
                "INSERT INTO folders(path, workspace, mtime_ns) VALUES (?, ?, -1)",
                (str(folder), workspace),
            )
        return RecordFolder(folder, workspace)

    def _update_record(self, path: Path, folder: RecordFolder) -> bool:
        st = _stat(path)
        row = self.conn.execute(
            "SELECT rowid, ino, size, mtime_ns FROM records WHERE path = ?", (str(path),)
        ).fetchone()
        if st is None:
            if row is not None:
                self._drop_record(str(path))
                return True
            return False
        if row is not None and tuple(row[1:]) == FileStamp.of(st):
            return False
        from pbot_watch.archive.files import read_record  # noqa: PLC0415 - memory queries read no record

        record = read_record(path)
        if record is None:
            # Torn or foreign: keep what we had (a later write will bring the new content).
            self._unreadable.append(f"{path}: not a readable history record; skipped")
            return False
        self._store_record(path, folder, record, st, row)
        return True

    def _store_record(
        self,
        path: Path,
        folder: RecordFolder,
        record: dict[str, Any],
        st: os.stat_result,
        row: Any,
        only: frozenset[str] | None = None,
        delta: Delta | None = None,
    ) -> None:
        """Make the index's rows of record ``path`` (``row``: its row, if any) hold ``record``."""
        workspace = record.get("workspace") if isinstance(record.get("workspace"), str) else folder.workspace
        name: str = scrub(record["name"]) if isinstance(record.get("name"), str) else ""
        # A lone surrogate (an emoji cut by pbot's 80-unit name limit) cannot go into SQLite.
        values = (
            str(folder.path),
            to_well_formed(record["id"]),
            to_well_formed(record["sessionId"]),
            *storable(name),
            to_well_formed(workspace),
            *FileStamp.of(st),
            *(
                to_well_formed(v) if isinstance(v, str) else None
                for v in (record.get("machine"), record.get("user"))
            ),
        )
        if row is None:
            cur = self.conn.execute(
                "INSERT INTO records(path, folder, id, session_id, name, name_json, workspace, ino, size, mtime_ns, "
                "machine, user_) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (str(path), *values),
            )
            rowid = cur.lastrowid
            assert rowid is not None
        else:
            rowid = row[0]
            self.conn.execute(
                "UPDATE records SET folder=?, id=?, session_id=?, name=?, name_json=?, workspace=?, ino=?, size=?, "
                "mtime_ns=?, machine=?, user_=? WHERE rowid=?",
                (*values, rowid),
            )
        self.conn.execute("DELETE FROM records_terms WHERE rowid = ?", (rowid,))
        self.conn.execute(
            "INSERT INTO records_terms(rowid, name) VALUES (?, ?)",
            (rowid, document(storable(name)[0], self.rules)),
        )
        self._replace_nodes(rowid, record["nodes"], only, delta)

    def _held_nodes(
        self, record: int, texts: bool, named: frozenset[str] | None = None
    ) -> dict[str, tuple[int, str, str | None, int, int, int]]:
        """``id -> (rowid, text, text_json, searchable, level, seq)`` of a record's node rows.

        Without ``texts`` the text fields are left empty (``""``, ``None``): a record of a long
        session holds megabytes of them, and a change that names its nodes needs only theirs.
        ``named``: only the rows of these ids (an append to a long session names a few of its
        thousands of nodes: reading every row cost 60 ms at 6,500 nodes).
        """
        old: dict[str, tuple[int, str, str | None, int, int, int]] = {}
        # Named: found by id (nodes_by_id), the record only checked ("+"), not a walk of all its nodes.
        where = (
            "n.record = ?" if named is None else "+n.record = ? AND n.id IN (SELECT value FROM json_each(?))"
        )
        query = (
            "SELECT n.rowid, n.id, node_text(t.text, t.packed), t.text_json, n.searchable, n.level, n.seq FROM nodes n "
            f"JOIN node_texts t ON t.rowid = n.rowid WHERE {where}"
            if texts
            else f"SELECT n.rowid, n.id, '', NULL, n.searchable, n.level, n.seq FROM nodes n WHERE {where}"
        )
        args: tuple[Any, ...] = (record,) if named is None else (record, json.dumps(sorted(named)))
        for rowid, node_id, text, text_json, searchable, level, seq in self.conn.execute(query, args):
            old.setdefault(node_id, (rowid, text, text_json, searchable, level, seq))
        return old

    def _with_text(
        self, held: tuple[int, str, str | None, int, int, int], texts: bool
    ) -> tuple[int, str, str | None, int, int, int]:
        if texts:
            return held
        text, text_json = self.conn.execute(
            "SELECT node_text(text, packed), text_json FROM node_texts WHERE rowid = ?", (held[0],)
        ).fetchone()
        return (held[0], text, text_json, *held[3:])

    def _replace_nodes(
        self, record: int, nodes: list[Any], only: frozenset[str] | None = None, delta: Delta | None = None
    ) -> None:
        """Make the record's node rows equal ``nodes``, touching FTS only where a text changed.

        The writes are gathered first and made with one ``executemany`` per statement: a first
        search over a large archive inserts every node of every record here. New rows get their
        row ids from a counter (the write transaction is ours), so the rows of ``nodes``,
        ``node_texts`` and both FTS tables can be written in bulk without asking for each id.

        ``only``: the rows hold ``nodes`` already except those named (the writer said which
        changed, ``update_written``): the others keep their rows and get only their position.
        ``delta``: with ``only``, which nodes are gone and which moved too: only the rows of the
        nodes it names are read, the others are where they were.
        """
        conn = self.conn
        texts = only is None
        named = None if only is None or delta is None else only | delta.removed | delta.moved
        old = self._held_nodes(record, texts, named)
        seen: set[str] = set()
        inserts: list[dict[str, Any]] = []
        updates: list[dict[str, Any]] = []
        moved: list[tuple[int, int]] = []
        new_texts: list[tuple[str | bytes, str | None, int, int]] = []  # (stored, text_json, packed, rowid)
        packer = self.texts.packer()
        fts_out: list[tuple[int, str, int]] = []  # (rowid, stored text, level) to take out of FTS
        fts_in: list[tuple[int, str, int]] = []
        next_rowid: int | None = None
        for seq, raw in enumerate(nodes):
            node_id = raw.get("id") if only is not None and isinstance(raw, dict) else None
            if isinstance(node_id, str) and only is not None and node_id not in only and node_id not in seen:
                if named is not None and node_id not in named:
                    seen.add(node_id)  # held as it is, where it was
                    continue
                held = old.get(node_id)
                if held is not None:
                    seen.add(node_id)
                    if held[5] != seq:
                        moved.append((seq, held[0]))
                    continue
            node = self._values(raw, seq)
            if node is None or node["id"] in seen:
                continue
            seen.add(node["id"])
            before = old.get(node["id"])
            if before is not None:
                before = self._with_text(before, texts)
            if before is None:
                if next_rowid is None:
                    next_rowid = conn.execute("SELECT coalesce(max(rowid), 0) + 1 FROM nodes").fetchone()[0]
                    assert next_rowid is not None
                rowid, next_rowid = next_rowid, next_rowid + 1
                inserts.append({**node, "rowid": rowid, "record": record})
                if node["searchable"]:
                    fts_in.append((rowid, node["text"], node["level"]))
                continue
            rowid, text, text_json, searchable, level, _seq = before
            same_text = (text, text_json) == (node["text"], node["text_json"])
            same_text = same_text and searchable == node["searchable"]
            if not same_text:
                if searchable:
                    fts_out.append((rowid, text, level))
                new_texts.append((*packer(node["text"], node["text_json"]), rowid))
                if node["searchable"]:
                    fts_in.append((rowid, node["text"], node["level"]))
            updates.append({**node, "rowid": rowid})
        gone = [self._with_text(row, texts) for node_id, row in old.items() if node_id not in seen]
        fts_out.extend(
            (rowid, text, level) for rowid, text, _json, searchable, level, _seq in gone if searchable
        )
        # Contentless tables forget their text: a delete repeats exactly what was inserted (the
        # stored text), so texts leave the FTS tables before any row or text changes.
        self._fts_delete(fts_out)
        conn.executemany("DELETE FROM nodes WHERE rowid = ?", [(g[0],) for g in gone])
        conn.executemany("DELETE FROM node_texts WHERE rowid = ?", [(g[0],) for g in gone])
        conn.executemany(
            "UPDATE node_texts SET text = ?, packed = ?, text_json = ? WHERE rowid = ?",
            [(stored, packed, text_json, rowid) for stored, text_json, packed, rowid in new_texts],
        )
        conn.executemany(
            """UPDATE nodes SET kind=:kind, level=:level, from_=:from_, to_=:to_,
               from_ms=:from_ms, to_ms=:to_ms, to_key=:to_key, id_key=:id_key, ready=:ready, completed=:completed,
               searchable=:searchable, capped=:capped, entry_ids=:entry_ids, children=:children, parents=:parents,
               seq=:seq WHERE rowid=:rowid""",
            updates,
        )
        conn.executemany("UPDATE nodes SET seq = ? WHERE rowid = ?", moved)
        conn.executemany(
            """INSERT INTO nodes(rowid, record, id, kind, level, from_, to_, from_ms, to_ms, to_key, id_key,
               ready, completed, searchable, capped, entry_ids, children, parents, seq) VALUES (:rowid, :record,
               :id, :kind, :level, :from_, :to_, :from_ms, :to_ms, :to_key, :id_key, :ready, :completed, :searchable,
               :capped, :entry_ids, :children, :parents, :seq)""",
            inserts,
        )
        conn.executemany(
            "INSERT INTO node_texts(rowid, text, text_json, packed) VALUES (?, ?, ?, ?)",
            [(n["rowid"], *packer(n["text"], n["text_json"])) for n in inserts],
        )
        self._fts_insert(fts_in)
        if inserts:
            self.texts.train_once()

    def _terms_columns(self, rowid: int, text: str, level: int) -> tuple[int, str, str, str]:
        prepared = self._prepared_terms.get((id(text), level))
        if prepared is not None and prepared[0] is text:
            return (rowid, *prepared[1])
        head = text[:INDEXED_CHARS]
        if level != 0:
            return rowid, "", "", document(head, self.rules)
        if not self.rules.sides:
            return rowid, document(head, self.rules), "", ""
        question, answer = exchange_sides(head)
        return rowid, document(question, self.rules), document(answer, self.rules), ""

    def _fts_insert(self, rows: list[tuple[int, str, int]]) -> None:
        """Index these (row id, stored text, level) in both FTS tables (see ``INDEXED_CHARS``), and in
        the tallies of the needles they hold (``literal.py``).
        """
        literal = [(rowid, text) for rowid, text, _level in rows if len(text) <= INDEXED_CHARS]
        self.conn.executemany(
            "INSERT INTO nodes_literal(rowid, text) VALUES (?, ?)",
            [(rowid, text.lower()) for rowid, text in literal],
        )
        needles = Needles(self.conn, "node_tallies")
        if needles:
            self.conn.executemany(
                "INSERT OR IGNORE INTO node_tally_nodes(tally, node) VALUES (?, ?)",
                [
                    (tally, rowid)
                    for rowid, text in literal
                    for tally in needles.held_by(text.encode("utf-8", "surrogatepass"))
                ],
            )
        self.conn.executemany(
            "INSERT INTO nodes_terms(rowid, question, answer, summary) VALUES (?, ?, ?, ?)",
            [self._terms_columns(*row) for row in rows],
        )

    def _fts_delete(self, rows: list[tuple[int, str, int]]) -> None:
        """Take these (row id, stored text, level) out of both FTS tables, as ``_fts_insert`` put them."""
        self.conn.executemany(
            "INSERT INTO nodes_literal(nodes_literal, rowid, text) VALUES ('delete', ?, ?)",
            [(rowid, text.lower()) for rowid, text, _level in rows if len(text) <= INDEXED_CHARS],
        )
        if rows and self.conn.execute("SELECT 1 FROM node_tallies LIMIT 1").fetchone() is not None:
            self.conn.executemany("DELETE FROM node_tally_nodes WHERE node = ?", [(row[0],) for row in rows])
        self.conn.executemany(
            "INSERT INTO nodes_terms(nodes_terms, rowid, question, answer, summary) VALUES ('delete', ?, ?, ?, ?)",
            [self._terms_columns(*row) for row in rows],
        )

    def _drop_record(self, path: str) -> None:
        row = self.conn.execute("SELECT rowid FROM records WHERE path = ?", (path,)).fetchone()
        if row is None:
            return
        self._replace_nodes(row[0], [])
        self.conn.execute("DELETE FROM records WHERE rowid = ?", (row[0],))
        self.conn.execute("DELETE FROM records_terms WHERE rowid = ?", (row[0],))

    def _drop_folder(self, path: Path) -> None:
        for (record_path,) in self.conn.execute(
            "SELECT path FROM records WHERE folder = ?", (str(path),)
        ).fetchall():
            self._drop_record(record_path)
        self.conn.execute("DELETE FROM folders WHERE path = ?", (str(path),))

    def rebuild(self, folders: Iterable[RecordFolder]) -> RefreshReport:
        """Forget everything about records and index these folders from scratch."""
        with self.transaction():
            for table in ("nodes_literal", "nodes_terms"):
                self.conn.execute(f"INSERT INTO {table}({table}) VALUES ('delete-all')")
            self.conn.execute("DELETE FROM nodes")
            self.conn.execute("DELETE FROM node_texts")
            self.conn.execute("DELETE FROM node_tally_nodes")
            self.conn.execute("DELETE FROM records")
            self.conn.execute("DELETE FROM records_terms")
            self.conn.execute("DELETE FROM folders")
        return self.update_from_archive(folders)

    def optimize(self) -> None:
        """Merge FTS segments (after a rebuild): fewer b-trees to probe per query."""
        for table in ("nodes_literal", "nodes_terms"):
            self.conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")

    def counts(self) -> dict[str, int]:
        q = self.conn.execute
        return {
            "records": q("SELECT count(*) FROM records").fetchone()[0],
            "nodes": q("SELECT count(*) FROM nodes").fetchone()[0],
            "searchable": q("SELECT count(*) FROM nodes WHERE searchable").fetchone()[0],
        }


READ_PIECE = 1 << 20
"""Bytes of a capped text read at a time when a query tests it (``text_holds``)."""


def text_holds(conn: sqlite3.Connection, rowid: int, needle: str) -> bool:
    """Whether node ``rowid``'s exact text, lower-cased as pbot does, holds ``needle``; read in pieces.

    A capped text can be 50 MB (a pasted log). Loading it whole and lower-casing a copy, for
    every query, cost hundreds of MB and seconds. Lower-casing piece by piece gives the same
    characters except around a capital sigma (its final form depends on what follows, the one
    rule of ``toLowerCase`` that looks at context): a text holding one is tested whole.
    """
    row = conn.execute("SELECT text_json IS NOT NULL FROM node_texts WHERE rowid = ?", (rowid,)).fetchone()
    if row is None:
        return False
    if not row[0]:
        decoder = codecs.getincrementaldecoder("utf-8")()
        keep = len(needle) - 1
        carry = ""
        with conn.blobopen("node_texts", "text", rowid, readonly=True) as blob:
            while True:
                data = blob.read(READ_PIECE)
                piece = decoder.decode(data, final=not data)
                if "\u03a3" in piece:
                    break
                window = carry + piece.lower()
                if needle in window:
                    return True
                if not data:
                    return False
                carry = window[-keep:] if keep else ""
    text, text_json = conn.execute(
        "SELECT text, text_json FROM node_texts WHERE rowid = ?", (rowid,)
    ).fetchone()
    return _holds(text, text_json, needle)


def _pieces(conn: sqlite3.Connection, rowid: int) -> Iterator[str]:
    """Node ``rowid``'s text, ``READ_PIECE`` bytes at a time (a character never split)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    with conn.blobopen("node_texts", "text", rowid, readonly=True) as blob:
        while True:
            data = blob.read(READ_PIECE)
            piece = decoder.decode(data, final=not data)
            if piece:
                yield piece
            if not data:
                return


def text_head(conn: sqlite3.Connection, rowid: int, chars: int) -> str:
    """The first ``chars`` characters of node ``rowid``'s exact text, reading only its first piece(s)."""
    row = conn.execute("SELECT text_json FROM node_texts WHERE rowid = ?", (rowid,)).fetchone()
    if row is None:
        return ""
    if row[0] is not None:
        text: str = json.loads(row[0])
        return text[:chars]
    head = ""
    for piece in _pieces(conn, rowid):
        head += piece[: chars - len(head)]
        if len(head) >= chars:
            break
    return head


def _units(text: str) -> int:
    """UTF-16 units of ``text`` (JavaScript's ``length``)."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le", "surrogatepass")) // 2


def capped_snippet(conn: sqlite3.Connection, rowid: int, needle: str, before: int, length: int) -> str | None:
    """Pbot's snippet of node ``rowid``'s text, read in pieces: ``length`` UTF-16 units from
    ``before`` units ahead of ``text.toLowerCase().indexOf(needle)`` (0 when absent).

    ``None`` when that takes the whole text after all (see ``text_holds``).
    """
    row = conn.execute("SELECT text_json IS NOT NULL FROM node_texts WHERE rowid = ?", (rowid,)).fetchone()
    if row is None or row[0]:
        return None
    hit, keep = -1, len(needle) - 1
    carry, done = "", 0  # the lowered tail kept, and the units of lowered text before it
    for piece in _pieces(conn, rowid):
        if "\u03a3" in piece:
            return None
        window = carry + piece.lower()
        found = window.find(needle)
        if found >= 0:
            hit = done + _units(window[:found])
            break
        carry = window[-keep:] if keep else ""
        done += _units(window[: len(window) - len(carry)])
    start = max(0, hit - before)
    kept: list[str] = []
    first = at = 0  # units before the first piece kept, and before the next piece
    for piece in _pieces(conn, rowid):
        units = _units(piece)
        if at + units > start:
            if not kept:
                first = at
            kept.append(piece)
            if at + units >= start + length:
                break
        at += units
    return utf16_slice("".join(kept), start - first, start - first + length)


def _holds(text: str, text_json: str | None, needle: str) -> bool:
    """Whether a node's exact text, lower-cased as pbot does (``toLowerCase``), holds ``needle``."""
    return needle in (json.loads(text_json) if text_json else text).lower()


def _strs(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _node_values(raw: Any, seq: int) -> dict[str, Any] | None:
    """A record node as row values, or ``None`` for a node we cannot use (no id)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
        return None
    kind = raw.get("kind") if raw.get("kind") in ("session", "exchange", "summary") else "exchange"
    level = raw.get("level") if isinstance(raw.get("level"), int) else 0
    text = scrub(_str(raw.get("text")))  # records by personal-bot or an older pbot-watch may hold one
    from_ = _str(raw.get("from"))
    to = _str(raw.get("to"))
    ready = raw.get("ready") is True
    stored, text_json = storable(text)
    from_ms, to_ms = parse_ms(from_), parse_ms(to)
    return {
        "id": to_well_formed(raw["id"]),
        "kind": kind,
        "level": level,
        "text": stored,
        "text_json": text_json,
        "capped": int(len(stored) > INDEXED_CHARS),
        "from_": storable(from_)[0],
        "to_": storable(to)[0],
        "from_ms": from_ms,
        "to_ms": to_ms,
        "to_key": sort_key(to),
        "id_key": sort_key(raw["id"]),
        "ready": int(ready),
        "completed": int(raw.get("completed") is True),
        # A node whose dates JavaScript cannot parse is never a search hit in pbot (NaN compares
        # false), so it is left out of the FTS tables: their counts are then exact totals.
        "searchable": int(
            kind != "session" and ready and text != "" and from_ms is not None and to_ms is not None
        ),
        "entry_ids": json.dumps(_strs(raw.get("entryIds"))),
        "children": json.dumps(_strs(raw.get("children"))),
        "parents": json.dumps(_strs(raw.get("parents"))),
        "seq": seq,
    }


def held_history_texts(conn: sqlite3.Connection) -> Iterator[HeldText]:
    """Every text the history index holds, for ``pbot-watch secrets scan``: session names, node
    texts, as the records they came from named them, and the compression dictionary (made of
    pieces of the texts it was trained on).
    """
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not {"records", "nodes", "node_texts"} <= tables:
        return
    for path, session_id, name in conn.execute("SELECT path, session_id, name FROM records"):
        yield HeldText("history index", path, session_id, "", (name or "",))
    columns = {row[1] for row in conn.execute("PRAGMA table_info(node_texts)")}
    packed = "t.packed" if "packed" in columns else "0"  # an index of schema 8 or before: plain
    unpack = NodeTexts(conn).unpack
    rows = conn.execute(
        f"SELECT r.path, r.session_id, n.id, t.text, {packed} FROM nodes n "
        "JOIN node_texts t ON t.rowid = n.rowid JOIN records r ON r.rowid = n.record"
    )
    for path, session_id, node_id, text, how in rows:
        yield HeldText("history index", path, session_id, node_id, (unpack(text, how) or "",))
    if "node_dicts" in tables:
        for ident, data in conn.execute("SELECT id, data FROM node_dicts"):
            text = data.decode("utf-8", "replace")
            yield HeldText("history index", "", "", f"compression dictionary {ident}", (text,))
