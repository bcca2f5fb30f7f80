"""Pushing raw memory into the team index (``team.raw_memory``): the records' pusher, for sources.

Which sources: those on the current branch of each session file of an allowed workspace, as
this machine's raw memory holds them (``memory.query.branch_sources``, the scope of an
unscoped local ``memory search``). Raw memory is read, never the session files: the service
keeps it current as it reads the files anyway, and ``team push`` brings it up to date first.

What was pushed is kept in the records' ledger (``team-push.db``): per session file, raw
memory's stamp of it when it was last pushed (a file whose stamp did not move is not looked
at: this is the watermark a push after time offline starts from), and per source, what it was
seen as (its local row id, which an unchanged source keeps, and its label and size), the hash
pushed, and its context label. A session whose raw memory changed costs a walk of its branch
in SQLite and the texts of its new or changed sources only.

On the server a source is one row keyed by machine, session, entry and part; an ``INSERT ...
ON CONFLICT DO UPDATE ... WHERE hash differs`` makes a replay, a restart, a lost ledger or a
second pusher of the same machine leave one copy. A source that left the branch (a ``/tree``
move, a rewrite) is deleted; one whose context label changed (a later compaction) has only
that column updated. Every text passes the same redaction gate as records, fail-closed: a
source still holding a secret stays home and is counted (``held_back``). A session file that
raw memory forgot (deleted) keeps its rows: the team's copy may be the only one left.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import psycopg

from pbot_watch.archive.stamp import FileStamp
from pbot_watch.catalog import HeaderCache
from pbot_watch.memory.index import held_stamps, source_texts
from pbot_watch.memory.query import BranchSource, branch_sources
from pbot_watch.sqlite import transaction
from pbot_watch.team.dsn import TeamUnavailable, scrub
from pbot_watch.team.memory_rows import MemoryRow, memory_row, row_values
from pbot_watch.team.rows import Gate, Labels, allowed, pg_text, workspace_label
from pbot_watch.team.schema import applied

if TYPE_CHECKING:
    import sqlite3

    from pbot_watch.config import Settings
    from pbot_watch.search.index import SearchIndex


class _Ledger(Protocol):
    conn: sqlite3.Connection


class Pusher(Protocol):
    """What pushing raw memory needs of ``push.py``'s pusher, which calls this module.

    A protocol, so that this module does not import the one that imports it.
    """

    @property
    def settings(self) -> Settings: ...

    @property
    def dsn(self) -> str: ...

    @property
    def gate(self) -> Gate: ...

    @property
    def pushed_by(self) -> str: ...

    def connection(self) -> psycopg.Connection: ...

    def disconnect(self) -> None: ...

    def ledger(self) -> _Ledger: ...


MEMORY_SCHEMA = 3
"""The first team schema with ``pbot_memory``."""
SOURCE_BATCH = 500
"""Sources per push transaction (a text is read, gated and sent a batch at a time)."""
TEXT_BATCH = 100
MEMORY_COLUMNS = (
    "machine, session_id, entry_id, part, os_user, workspace, kind, timestamp, label, sections, "
    "line_count, context, capped, text, text_json, text_lower, terms, hash, pushed_by"
)
_UPDATED = ", ".join(
    f"{column}=excluded.{column}" for column in MEMORY_COLUMNS.split(", ")[4:] if column != "pushed_by"
)
_GLOBS_KEY = "memory_workspaces"

Key = tuple[str, int]
"""A source within its session: entry id and part."""


@dataclass
class MemoryReport:
    pushed: int = 0
    """Sources written (new or changed)."""
    unchanged: int = 0
    held: int = 0
    """Sources the redaction gate kept home in this push."""
    removed: int = 0
    """Sources deleted from the team index: no longer on their session's current branch."""
    relabelled: int = 0
    sessions: int = 0


@dataclass(frozen=True)
class _Known:
    seen: str
    hash: str | None
    context: str


def _seen(source: BranchSource) -> str:
    """What tells an unchanged source without its text: its row id, which raw memory keeps for
    an unchanged source, with what a rebuilt raw memory would give another source at that row.
    """
    return json.dumps([source.rowid, source.kind, source.timestamp, source.label, source.line_count])


def push_memory(pusher: Pusher, index: SearchIndex, cache: HeaderCache) -> MemoryReport:
    """Push the raw memory of every allowed session whose raw memory changed since the last push.

    Raises ``TeamUnavailable`` when the server cannot be reached or has no raw-memory table.
    ``cache`` reads each session file's header (its workspace) once per file.
    """
    report = MemoryReport()
    ledger = pusher.ledger().conn
    globs = json.dumps(sorted(pusher.settings.team.workspaces))
    row = ledger.execute("SELECT value FROM meta WHERE key = ?", (_GLOBS_KEY,)).fetchone()
    if row is None or row[0] != globs:
        # Another allow-list: every session is looked at again (what is pushed stays, by hash).
        with transaction(ledger):
            ledger.execute("DELETE FROM memory_files")
            ledger.execute(
                "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (_GLOBS_KEY, globs),
            )
    known = {
        path: FileStamp(ino, size, mtime)
        for path, ino, size, mtime in ledger.execute("SELECT path, ino, size, mtime_ns FROM memory_files")
    }
    held = held_stamps(index)
    changed = [(path, stamp) for path, stamp in held.items() if known.get(str(path)) != stamp]
    if not changed:
        return report
    _check_schema(pusher)
    sessions: dict[str, list[tuple[Path, FileStamp]]] = defaultdict(list)
    labels: dict[str, Labels] = {}
    skipped: list[tuple[Path, FileStamp]] = []
    for path, stamp in changed:
        sighting = cache.sight(path)
        workspace = sighting.workspace if isinstance(sighting.workspace, str) else None
        if sighting.session_id is None or not allowed(workspace, pusher.settings.team.workspaces):
            skipped.append((path, stamp))
            continue
        sessions[sighting.session_id].append((path, stamp))
        labels[sighting.session_id] = Labels(
            pusher.settings.machine, pusher.settings.user, workspace_label(workspace)
        )
    for session_id, files in sessions.items():
        _push_session(pusher, index, session_id, labels[session_id], report)
        _done_files(ledger, files)
        report.sessions += 1
    _done_files(ledger, skipped)
    return report


def _check_schema(pusher: Pusher) -> None:
    conn = pusher.connection()
    have = applied(conn)
    conn.rollback()
    if have < MEMORY_SCHEMA:
        raise TeamUnavailable(
            f"the team index's schema (version {have}) has no raw memory: run `pbot-watch team init`"
        )


def _done_files(ledger: Any, files: Iterable[tuple[Path, FileStamp]]) -> None:
    with transaction(ledger):
        ledger.executemany(
            "INSERT INTO memory_files(path, ino, size, mtime_ns) VALUES (?,?,?,?) ON CONFLICT(path) "
            "DO UPDATE SET ino=excluded.ino, size=excluded.size, mtime_ns=excluded.mtime_ns",
            [(str(path), *stamp) for path, stamp in files],
        )


def _push_session(
    pusher: Pusher, index: SearchIndex, session_id: str, labels: Labels, report: MemoryReport
) -> None:
    ledger = pusher.ledger().conn
    known = {
        (entry_id, part): _Known(seen, digest, context)
        for entry_id, part, seen, digest, context in ledger.execute(
            "SELECT entry_id, part, seen, hash, context FROM memory_sources WHERE session_id = ?",
            (session_id,),
        )
    }
    sources = branch_sources(index, session_id)
    if not sources and not known:
        return
    visible = {(s.entry_id, s.part): s for s in sources}
    send: list[BranchSource] = []
    relabel: list[BranchSource] = []
    for source in sources:
        before = known.get((source.entry_id, source.part))
        if before is None or before.seen != _seen(source):
            send.append(source)
        elif before.hash is not None and before.context != source.context:
            relabel.append(source)
        else:
            report.unchanged += 1
    held: set[Key] = set()
    for start in range(0, len(send), SOURCE_BATCH):
        held |= _send(pusher, index, labels, send[start : start + SOURCE_BATCH], known, report)
    gone = [key for key in known if key not in visible]
    pushed = [key for key in visible if key not in held] if not known else None
    _tidy(pusher, session_id, labels, gone, relabel, pushed)
    report.removed += len(gone)
    report.relabelled += len(relabel)
    with transaction(ledger):
        ledger.executemany(
            "DELETE FROM memory_sources WHERE session_id = ? AND entry_id = ? AND part = ?",
            [(session_id, *key) for key in gone],
        )
        ledger.executemany(
            "UPDATE memory_sources SET context = ? WHERE session_id = ? AND entry_id = ? AND part = ?",
            [(s.context, session_id, s.entry_id, s.part) for s in relabel],
        )


def _texts(index: SearchIndex, sources: list[BranchSource]) -> dict[int, str]:
    texts: dict[int, str] = {}
    for start in range(0, len(sources), TEXT_BATCH):
        texts.update(source_texts(index.conn, [s.rowid for s in sources[start : start + TEXT_BATCH]]))
    return texts


def _send(
    pusher: Pusher,
    index: SearchIndex,
    labels: Labels,
    batch: list[BranchSource],
    known: dict[Key, _Known],
    report: MemoryReport,
) -> set[Key]:
    """One transaction: this batch's rows written (held ones removed where pushed before), then the
    ledger; the keys of the sources held back.
    """
    texts = _texts(index, batch)
    rows: list[MemoryRow] = []
    ledgered: list[tuple[BranchSource, str | None]] = []
    withdrawn: list[BranchSource] = []
    for source in batch:
        if source.rowid not in texts:
            continue  # gone from raw memory since the walk: the next push sees it
        row = memory_row(source, texts[source.rowid], pusher.gate)
        before = known.get((source.entry_id, source.part))
        if row is None:
            report.held += 1
            if before is not None and before.hash is not None:
                withdrawn.append(source)
        elif before is not None and before.hash == row.hash and before.context == row.context:
            report.unchanged += 1
        else:
            rows.append(row)
        ledgered.append((source, row.hash if row is not None else None))
    rows.sort(key=lambda r: r.key)  # rows locked in one order: two pushers wait, never deadlock
    conn = pusher.connection()
    written = 0
    try:
        with conn.transaction(), conn.cursor() as cur:
            if rows:
                cur.executemany(
                    f"INSERT INTO pbot_memory ({MEMORY_COLUMNS}) VALUES ({', '.join(['%s'] * 19)}) "
                    f"ON CONFLICT (machine, session_id, entry_id, part) DO UPDATE SET {_UPDATED}, "
                    "pushed_by=excluded.pushed_by, pushed_at=now() WHERE pbot_memory.hash <> excluded.hash "
                    "OR pbot_memory.context <> excluded.context RETURNING 1",
                    [row_values(row, labels, pusher.pushed_by) for row in rows],
                    returning=True,
                )
                written = _returned(cur)
            if withdrawn:
                _delete(cur, labels.machine, [(s.session_id, s.entry_id, s.part) for s in withdrawn])
    except psycopg.Error as error:
        pusher.disconnect()
        raise TeamUnavailable(f"memory push failed: {scrub(error, pusher.dsn)}") from error
    report.pushed += written
    report.unchanged += len(rows) - written
    with transaction(pusher.ledger().conn):
        pusher.ledger().conn.executemany(
            "INSERT INTO memory_sources(session_id, entry_id, part, seen, hash, context) VALUES (?,?,?,?,?,?) "
            "ON CONFLICT(session_id, entry_id, part) DO UPDATE SET seen=excluded.seen, hash=excluded.hash, "
            "context=excluded.context",
            [(s.session_id, s.entry_id, s.part, _seen(s), digest, s.context) for s, digest in ledgered],
        )
    return {(s.entry_id, s.part) for s, digest in ledgered if digest is None}


def _returned(cur: psycopg.Cursor[Any]) -> int:
    """Rows an ``executemany(..., returning=True)`` wrote: a replay's ``ON CONFLICT`` writes none."""
    written = 0
    while True:
        written += cur.fetchone() is not None
        if not cur.nextset():
            return written


def _delete(cur: psycopg.Cursor[Any], machine: str, keys: list[tuple[str, str, int]]) -> None:
    cur.execute(
        "DELETE FROM pbot_memory m USING unnest(%s::text[], %s::text[], %s::int[]) k(s, e, p) "
        "WHERE m.machine = %s AND m.session_id = k.s AND m.entry_id = k.e AND m.part = k.p",
        (
            [pg_text(k[0])[0] for k in keys],
            [pg_text(k[1])[0] for k in keys],
            [k[2] for k in keys],
            machine,
        ),
    )


def _tidy(
    pusher: Pusher,
    session_id: str,
    labels: Labels,
    gone: list[Key],
    relabel: list[BranchSource],
    only: list[Key] | None,
) -> None:
    """Remove what left the branch and relabel what a compaction moved; ``only``: the whole
    session's keys, when this machine's ledger knew nothing of it (a lost ledger, a new team
    database), so rows a server kept from before that are no longer on the branch go too.
    """
    if not gone and not relabel and only is None:
        return
    conn = pusher.connection()
    sid = pg_text(session_id)[0]
    try:
        with conn.transaction(), conn.cursor() as cur:
            if gone:
                _delete(cur, labels.machine, [(session_id, *key) for key in sorted(gone)])
            if relabel:
                cur.execute(
                    "UPDATE pbot_memory m SET context = k.c FROM unnest(%s::text[], %s::int[], %s::text[]) "
                    "k(e, p, c) WHERE m.machine = %s AND m.session_id = %s AND m.entry_id = k.e AND m.part = k.p",
                    (
                        [pg_text(s.entry_id)[0] for s in relabel],
                        [s.part for s in relabel],
                        [s.context for s in relabel],
                        labels.machine,
                        sid,
                    ),
                )
            if only is not None:
                cur.execute(
                    "DELETE FROM pbot_memory m WHERE m.machine = %s AND m.session_id = %s AND NOT EXISTS ("
                    "SELECT 1 FROM unnest(%s::text[], %s::int[]) k(e, p) WHERE k.e = m.entry_id AND k.p = m.part)",
                    (labels.machine, sid, [pg_text(k[0])[0] for k in only], [k[1] for k in only]),
                )
    except psycopg.Error as error:
        pusher.disconnect()
        raise TeamUnavailable(f"memory push failed: {scrub(error, pusher.dsn)}") from error
