"""Pushing records into the team index: idempotent, in batches, catching up after time offline.

Which records: every record file in the record folders of the allowed workspaces
(``team.workspaces``), including records that arrived from another machine by git, Syncthing or
rsync. What is known to be pushed is kept in a small ledger beside the service's state
(``<state_dir>/team-push.db``): per file, its stamp and the hash of what was pushed. A file
whose stamp is unchanged is not read again; one whose content hash is unchanged is not sent.

On the server a record is one row keyed by its record id with the hash of its content; an
``INSERT ... ON CONFLICT DO UPDATE ... WHERE hash differs`` both takes the row's lock and skips
a replay, so a push repeated after a crash, a restart, or the same record pushed by two
machines at once leaves one copy. Only changed nodes are rewritten (each carries its own hash):
a session that grew by one exchange costs a few rows. The ledger is written after the server
commits; a crash between the two only means the next pass finds the record already there.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

from pbot_watch.archive.files import read_record
from pbot_watch.archive.locations import folder_workspace
from pbot_watch.archive.stamp import FileStamp
from pbot_watch.catalog import HeaderCache
from pbot_watch.config import Settings
from pbot_watch.sqlite import connect, execute_script, transaction
from pbot_watch.team.dsn import TeamUnavailable, scrub
from pbot_watch.team.rows import Gate, Labels, NodeRow, RecordRows, allowed, record_rows, workspace_label
from pbot_watch.team.schema import applied, latest

if TYPE_CHECKING:
    from pbot_watch.search.index import SearchIndex
    from pbot_watch.team.memory_push import MemoryReport

LEDGER_FILE = "team-push.db"
CONNECT_TIMEOUT = 5
NODE_COLUMNS = (
    "record_id, id, seq, kind, level, from_, to_, from_ms, to_ms, ready, completed, searchable, capped, "
    "entry_ids, children, parents, text, text_json, text_lower, terms, hash"
)

_LEDGER = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files(
  path TEXT PRIMARY KEY, ino INTEGER, size INTEGER, mtime_ns INTEGER,
  record_id TEXT, hash TEXT, held INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS memory_files(
  path TEXT PRIMARY KEY, ino INTEGER, size INTEGER, mtime_ns INTEGER
);
CREATE TABLE IF NOT EXISTS memory_sources(
  session_id TEXT NOT NULL, entry_id TEXT NOT NULL, part INTEGER NOT NULL,
  seen TEXT NOT NULL, hash TEXT, context TEXT NOT NULL,
  PRIMARY KEY (session_id, entry_id, part)
) WITHOUT ROWID;
"""


def connect_team(dsn: str, *, autocommit: bool = False) -> psycopg.Connection:
    """A connection to the team server, or ``TeamUnavailable`` with the reason (no DSN in it)."""
    try:
        conn = psycopg.connect(
            dsn, connect_timeout=CONNECT_TIMEOUT, autocommit=autocommit, application_name="pbot-watch"
        )
    except psycopg.Error as error:
        raise TeamUnavailable(f"the team index cannot be reached: {scrub(error, dsn)}") from error
    # No server-side prepared statements: a generic plan for ``id = ANY(%s)`` or a LIKE pattern
    # can be a scan where the custom plan of each call uses an index.
    conn.prepare_threshold = None
    return conn


def check_schema(conn: psycopg.Connection) -> None:
    have = applied(conn)
    conn.rollback()
    if have == 0:
        raise TeamUnavailable("the team index has no schema yet: run `pbot-watch team init`")
    if have > latest():
        raise TeamUnavailable(
            f"the team index's schema (version {have}) is newer than this pbot-watch knows ({latest()})"
        )


@dataclass
class PushReport:
    pushed: int = 0
    unchanged: int = 0
    held_nodes: int = 0
    held_records: int = 0
    skipped: int = 0
    """Files that are no record, or records of a workspace the allow-list leaves out."""


@dataclass
class _Candidate:
    path: Path
    stamp: FileStamp
    record: dict[str, Any]
    rows: RecordRows | None


class PushLedger:
    """What this machine pushed, per record file (``<state_dir>/team-push.db``)."""

    def __init__(self, state_dir: Path) -> None:
        # Used by one pusher at a time (its lock), possibly from several threads over its life.
        self.conn = connect(state_dir / LEDGER_FILE, "normal", threads=True)
        execute_script(self.conn, _LEDGER)
        self._stamps: dict[str, tuple[int, int, int]] | None = None

    def close(self) -> None:
        self.conn.close()

    def bind(self, instance: str) -> None:
        """Forget everything pushed to another team database (a new or re-created one)."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'instance'").fetchone()
        if row is not None and row[0] == instance:
            return
        with transaction(self.conn):
            for table in ("files", "memory_files", "memory_sources"):
                self.conn.execute(f"DELETE FROM {table}")
            self.conn.execute(
                "INSERT INTO meta(key, value) VALUES ('instance', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (instance,),
            )
        self._stamps = None

    def stamps(self) -> dict[str, tuple[int, int, int]]:
        if self._stamps is None:
            self._stamps = {
                path: (ino, size, mtime)
                for path, ino, size, mtime in self.conn.execute("SELECT path, ino, size, mtime_ns FROM files")
            }
        return self._stamps

    def hash_of(self, path: Path) -> str | None:
        row = self.conn.execute("SELECT hash FROM files WHERE path = ?", (str(path),)).fetchone()
        return row[0] if row else None

    def done(self, entries: Iterable[tuple[Path, FileStamp, str | None, str | None, int]]) -> None:
        rows = [(str(p), *stamp, rid, digest, held) for p, stamp, rid, digest, held in entries]
        with transaction(self.conn):
            self.conn.executemany(
                "INSERT INTO files(path, ino, size, mtime_ns, record_id, hash, held) VALUES (?,?,?,?,?,?,?) "
                "ON CONFLICT(path) DO UPDATE SET ino=excluded.ino, size=excluded.size, mtime_ns=excluded.mtime_ns, "
                "record_id=excluded.record_id, hash=excluded.hash, held=excluded.held",
                rows,
            )
        stamps = self.stamps()
        for path, ino, size, mtime, *_rest in rows:
            stamps[path] = (ino, size, mtime)

    def held(self) -> int:
        """Texts (nodes, or whole records for a name) the gate kept home, over all known files."""
        row = self.conn.execute("SELECT coalesce(sum(held), 0) FROM files").fetchone()
        return int(row[0]) + self.memory_held()

    def memory_held(self) -> int:
        """Raw-memory sources the gate kept home (``memory_push.py``)."""
        row = self.conn.execute("SELECT count(*) FROM memory_sources WHERE hash IS NULL").fetchone()
        return int(row[0])

    def count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM files WHERE hash IS NOT NULL").fetchone()[0])


@dataclass
class TeamPusher:
    """Pushes the records of allowed workspaces; one per process (the CLI or the service)."""

    settings: Settings
    dsn: str
    gate: Gate
    folders: list[tuple[Path, str | None]] = field(default_factory=list)
    """Record folders and their workspace (``None``: a central archive, records say theirs)."""
    _conn: psycopg.Connection | None = None
    _ledger: PushLedger | None = None
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _headers: HeaderCache = field(default_factory=HeaderCache)
    """Session files' headers (their workspaces), for raw memory."""

    @property
    def pushed_by(self) -> str:
        return f"{self.settings.user}@{self.settings.machine}"

    # ---- connection ---------------------------------------------------------------------
    def connection(self) -> psycopg.Connection:
        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return self._conn
        self.disconnect()
        conn = connect_team(self.dsn)
        try:
            check_schema(conn)
            row = conn.execute("SELECT value FROM pbot_meta WHERE key = 'instance'").fetchone()
            conn.rollback()
        except BaseException:
            conn.close()
            raise
        assert row is not None
        self.ledger().bind(str(row[0]))
        self._conn = conn
        return conn

    def disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def ledger(self) -> PushLedger:
        if self._ledger is None:
            self._ledger = PushLedger(self.settings.state_dir)
        return self._ledger

    def close(self) -> None:
        with self._lock:
            self.disconnect()
            if self._ledger is not None:
                self._ledger.close()
                self._ledger = None

    # ---- what to push ---------------------------------------------------------------------
    def changed_files(self) -> list[Path]:
        """Record files of allowed workspaces whose stamp differs from what the ledger holds."""
        stamps = self.ledger().stamps()
        out: list[Path] = []
        for folder, workspace in self.folders:
            if workspace is not None and not allowed(workspace, self.settings.team.workspaces):
                continue
            try:
                names = sorted(os.listdir(folder))
            except OSError:
                continue
            for name in names:
                if not name.endswith(".json") or name.startswith("."):
                    continue
                path = folder / name
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                if stamps.get(str(path)) != tuple(FileStamp.of(st)):
                    out.append(path)
        return out

    def _candidate(self, path: Path) -> _Candidate | None:
        try:
            stamp = FileStamp.of(os.stat(path))
        except OSError:
            return None
        record = read_record(path)
        if record is None:
            return _Candidate(path, stamp, {}, None)
        workspace = record.get("workspace") if isinstance(record.get("workspace"), str) else None
        workspace = workspace or folder_workspace(path.parent)
        if not allowed(workspace, self.settings.team.workspaces):
            return _Candidate(path, stamp, {}, None)
        labels = Labels(
            machine=_label(record.get("machine"), self.settings.machine),
            user=_label(record.get("user"), self.settings.user),
            workspace=workspace_label(workspace),
        )
        return _Candidate(path, stamp, record, record_rows(record, labels, self.gate))

    # ---- pushing ----------------------------------------------------------------------------
    def push(self, paths: Iterable[Path]) -> PushReport:
        """Push these record files (others are ignored); raises ``TeamUnavailable`` when offline.

        Batches of ``team.batch_records`` records each commit on their own: an interrupted push
        keeps what was committed and the next one starts from there.
        """
        report = PushReport()
        with self._lock:
            batch: list[_Candidate] = []
            for path in dict.fromkeys(paths):
                candidate = self._candidate(path)
                if candidate is None:
                    continue
                batch.append(candidate)
                if len(batch) >= self.settings.team.batch_records:
                    self._push_batch(batch, report)
                    batch = []
            if batch:
                self._push_batch(batch, report)
        return report

    def catch_up(self) -> PushReport:
        """Push every record file that changed since the ledger last saw it."""
        with self._lock:
            return self.push(self.changed_files())

    def push_memory(self, index: SearchIndex) -> MemoryReport:
        """Push the raw memory ``index`` holds of allowed sessions, what changed since the last
        push (``memory_push.py``); nothing unless ``team.raw_memory`` is on.
        """
        from pbot_watch.team.memory_push import MemoryReport, push_memory  # noqa: PLC0415 - reads raw memory

        if not self.settings.team.raw_memory:
            return MemoryReport()
        with self._lock:
            return push_memory(self, index, self._headers)

    def _push_batch(self, batch: list[_Candidate], report: PushReport) -> None:
        ledger = self.ledger()
        send = [c for c in batch if c.rows is not None and ledger.hash_of(c.path) != c.rows.content_hash]
        # Rows are locked in record-id order, so two machines pushing overlapping batches wait
        # for each other instead of deadlocking.
        send.sort(key=lambda c: c.rows.record_id if c.rows else "")
        sent = {id(c) for c in send}
        conn = self.connection()
        try:
            with conn.transaction(), conn.cursor() as cur:
                for candidate in send:
                    assert candidate.rows is not None
                    if self._push_record(cur, candidate.rows):
                        report.pushed += 1
                    else:
                        report.unchanged += 1
        except psycopg.Error as error:
            self.disconnect()
            raise TeamUnavailable(f"push failed: {scrub(error, self.dsn)}") from error
        entries: list[tuple[Path, FileStamp, str | None, str | None, int]] = []
        for candidate in batch:
            rows = candidate.rows
            if rows is None:
                held = 1 if candidate.record else 0
                report.held_records += held
                report.skipped += 1 - held
                entries.append((candidate.path, candidate.stamp, None, None, held))
                continue
            if id(candidate) not in sent:
                report.unchanged += 1
            report.held_nodes += rows.held
            entries.append((candidate.path, candidate.stamp, rows.record_id, rows.content_hash, rows.held))
        ledger.done(entries)

    def _push_record(self, cur: psycopg.Cursor[Any], rows: RecordRows) -> bool:
        labels = rows.labels
        cur.execute(
            "INSERT INTO pbot_records(record_id, session_id, name, name_json, machine, os_user, workspace, "
            "content_hash, pushed_by) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s) "
            "ON CONFLICT (record_id) DO UPDATE SET session_id=excluded.session_id, name=excluded.name, "
            "name_json=excluded.name_json, machine=excluded.machine, os_user=excluded.os_user, "
            "workspace=excluded.workspace, content_hash=excluded.content_hash, pushed_by=excluded.pushed_by, "
            "pushed_at=now() WHERE pbot_records.content_hash <> excluded.content_hash RETURNING record_id",
            (
                rows.record_id,
                rows.session_id,
                rows.name,
                rows.name_json,
                labels.machine,
                labels.user,
                labels.workspace,
                rows.content_hash,
                self.pushed_by,
            ),
        )
        if cur.fetchone() is None:
            return False  # the server already holds exactly this content
        have = dict(cur.execute("SELECT id, hash FROM pbot_nodes WHERE record_id = %s", (rows.record_id,)))
        wanted = {node.id: node for node in rows.nodes}
        stale = [
            node_id
            for node_id, digest in have.items()
            if node_id not in wanted or wanted[node_id].hash != digest
        ]
        if stale:
            cur.execute(
                "DELETE FROM pbot_nodes WHERE record_id = %s AND id = ANY(%s)", (rows.record_id, stale)
            )
        fresh = [node for node in rows.nodes if have.get(node.id) != node.hash]
        if fresh:
            with cur.copy(f"COPY pbot_nodes ({NODE_COLUMNS}) FROM STDIN") as copy:
                for node in fresh:
                    copy.write_row(_node_values(rows.record_id, node))
        return True


def _node_values(record_id: str, node: NodeRow) -> tuple[Any, ...]:
    return (
        record_id,
        node.id,
        node.seq,
        node.kind,
        node.level,
        node.from_,
        node.to,
        node.from_ms,
        node.to_ms,
        node.ready,
        node.completed,
        node.searchable,
        node.capped,
        node.entry_ids,
        node.children,
        node.parents,
        node.text,
        node.text_json,
        node.text_lower,
        node.terms,
        node.hash,
    )


def _label(value: Any, fallback: str) -> str:
    return value if isinstance(value, str) and value.strip() else fallback


@contextmanager
def pusher(
    settings: Settings, dsn: str, gate: Gate, folders: list[tuple[Path, str | None]]
) -> Iterator[TeamPusher]:
    made = TeamPusher(settings, dsn, gate, folders)
    try:
        yield made
    finally:
        made.close()


def backoff(attempt: int, first: float, cap: float = 60.0) -> float:
    return float(min(cap, first * 2 ** min(attempt, 10)))
