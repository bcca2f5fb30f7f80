"""Finding a session's existing record, and writing only what changed.

Records sit in ``<workspace>/.pi/pbot/history/`` (pbot's place) or in one central folder, as
``locations.py`` rules. A session's record is found by ``sessionId`` (its file name is the
record id, which pbot chose at random), so the folder's ``sessionId -> file`` map is built
once and refreshed when the folder changes. Before each write the record on disk is read back
if anyone else touched it, and ``index_history`` reuses its summaries: a ready summary is
never lost to a stale copy.
"""

from __future__ import annotations

import os
import re
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from pbot_watch.archive.atomic import ensure_dir, fsync_dir, write_atomic
from pbot_watch.archive.encode import RecordEncoder
from pbot_watch.archive.fresh import Delta, FreshRecords, Written
from pbot_watch.archive.locations import exclusion, link_out_of, relative_workspace, workspace_folder
from pbot_watch.archive.marks import WrittenMarks
from pbot_watch.archive.provenance import with_provenance, without_provenance
from pbot_watch.archive.stamp import FileStamp, file_stamp
from pbot_watch.errors import PbotWatchError
from pbot_watch.history.nodes import RecordIndexer, SessionHistory
from pbot_watch.pi.jsonline import Malformed, loads_json
from pbot_watch.pi.untrusted import unstorable_name

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor  # a writer pool only in batch(): a query needs none

LEGACY_FIELDS = ("file",)
_SESSION_ID = re.compile(rb'"sessionId"\s*:\s*"((?:[^"\\]|\\.)*)"')
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")
RECORD_CACHE_SIZE = 64
BATCH_BYTES = 32 << 20  # queued record bytes that make a batch write out early
# A batch also writes out once its oldest queued record has waited this long: on a long first
# index, records reach the disk (and a search made meanwhile) as they are made, newest first.
BATCH_SECONDS = 1.0


class WorkspaceSkipped(PbotWatchError):
    """A session's workspace cannot take records (missing, unwritable, excluded)."""


def record_file_name(record_id: str) -> str:
    return _SAFE_NAME.sub("_", record_id) + ".json"


def read_record(path: Path) -> dict[str, Any] | None:
    """A record file's content, or ``None`` when it is not a record (torn by a crash of another tool, foreign).

    A record folder can hold anything a cloned repository ships, nested past any decoder's
    depth included: such a file is one unreadable record, never a failed command.
    """
    try:
        value = loads_json(path.read_bytes())
    except (OSError, Malformed):
        return None
    return value if _is_record(value) else None


def _is_record(value: Any) -> bool:
    """Whether a decoded file has what every record has: an id, a session id, a list of nodes."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("id"), str)
        and isinstance(value.get("sessionId"), str)
        and isinstance(value.get("nodes"), list)
    )


class _NodesJson(msgspec.Struct):
    """A record's nodes, each as the bytes it has in the file."""

    nodes: list[msgspec.Raw]


_decode_value = msgspec.json.Decoder().decode
_decode_nodes = msgspec.json.Decoder(_NodesJson).decode


def read_own_record(data: bytes) -> tuple[dict[str, Any], list[bytes]] | None:
    """A record we wrote (``archive/marks.py``) and the JSON of each of its nodes as in ``data``.

    Our records are ``dumps_utf8`` of themselves, so a node's bytes are its encoding, kept for
    the next write. ``None`` when ``data`` is not such a record: what msgspec refuses (a lone
    surrogate, an integer past 64 bits) is read by ``read_record`` as any other file. Two
    decodes of the whole file (values, then the nodes' spans) cost less than one per node.
    """
    try:
        value = _decode_value(data)
        pieces = _decode_nodes(data).nodes
    except msgspec.DecodeError:
        return None
    if _is_record(value) and len(value["nodes"]) == len(pieces):
        return value, [bytes(piece) for piece in pieces]
    return None


def _quick_session_id(head: bytes) -> Any:
    """The ``sessionId`` in a record file's first bytes, when it is there and decodes; else ``None``."""
    match = _SESSION_ID.search(head)
    if match is None:
        return None
    try:
        return loads_json(b'"' + match.group(1) + b'"')
    except Malformed:  # a bad escape or broken UTF-8: the whole file decides
        return None


@dataclass
class _Folder:
    mtime_ns: int = -1
    by_session: dict[str, Path] = field(default_factory=dict)
    # During a batch our own background writes change the folder's mtime at unknown
    # moments; the map already holds them, so it is trusted until the batch ends.
    trusted: bool = False


@dataclass
class ArchiveStore:
    """All record folders this process writes, with the rules of where a record goes."""

    central: Path | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    provenance: tuple[str, str] | None = None
    """(machine, user) labels for the records this store creates (``archive/provenance.py``)."""
    _folders: dict[Path, _Folder] = field(default_factory=dict)
    _records: OrderedDict[Path, tuple[FileStamp | None, dict[str, Any]]] = field(default_factory=OrderedDict)
    # Each session's last record as made (``RecordIndexer``): the next append redoes only what it changed.
    _indexers: OrderedDict[tuple[Path, str], RecordIndexer] = field(default_factory=OrderedDict)
    _encoder: RecordEncoder = field(default_factory=RecordEncoder)
    fresh: FreshRecords | None = None
    marks: WrittenMarks | None = None
    """Where each write is marked, so that after a restart a record still as written keeps its
    nodes' JSON (``archive/marks.py``); ``None``: every record read is treated as foreign."""
    # The JSON of each node of a record read back that we had written: for its next write.
    _read_json: dict[Path, list[bytes]] = field(default_factory=dict)
    """Where each write is handed, with what changed, to whoever indexes records (``archive/fresh.py``)."""
    # The stamp of our last write of each record, and what a queued write changed since it.
    _written: dict[Path, FileStamp] = field(default_factory=dict)
    _queued_changes: dict[Path, Delta | None] = field(default_factory=dict)
    _writer: ThreadPoolExecutor | None = None
    _queued: dict[Path, bytes] = field(default_factory=dict)
    _queued_bytes: int = 0
    _queued_since: float = 0.0
    _failures: dict[Path, OSError] = field(default_factory=dict)
    _dirty_folders: set[Path] = field(default_factory=set)
    # In a batch, a workspace's folder is checked (exists, writable) once, not per session.
    _checked: dict[str, Path] = field(default_factory=dict)

    @property
    def encoder(self) -> RecordEncoder:
        """What encoded the last write (how many nodes' JSON it reused: tests and benchmarks)."""
        return self._encoder

    # ---- where records go -------------------------------------------------------------
    def folder_for(self, workspace: str | None) -> Path:
        """The record folder of a session whose header names ``workspace``; raises ``WorkspaceSkipped``."""
        if workspace is not None and self._writer is not None:
            checked = self._checked.get(workspace)
            if checked is not None:
                return checked
        folder = self._folder_for(workspace)
        if workspace is not None and self._writer is not None:
            self._checked[workspace] = folder
        return folder

    def _folder_for(self, workspace: str | None) -> Path:
        if workspace is None:
            raise WorkspaceSkipped("the session header has no cwd")
        if relative_workspace(workspace):
            raise WorkspaceSkipped(
                f"the session header's cwd {workspace!r} is relative: no folder to write to"
            )
        reason = exclusion(workspace, self.include, self.exclude)
        if reason is not None:
            raise WorkspaceSkipped(f"workspace {workspace} is {reason}")
        if self.central is not None:
            return self.central
        if not Path(workspace).is_dir():
            raise WorkspaceSkipped(f"workspace {workspace} no longer exists")
        link = link_out_of(workspace)
        if link is not None:
            raise WorkspaceSkipped(f"workspace {workspace}: {link} is a symlink out of it")
        folder = workspace_folder(workspace)
        try:
            ensure_dir(folder)
        except OSError as error:
            raise WorkspaceSkipped(f"workspace {workspace} is not writable: {error.strerror}") from error
        if not os.access(folder, os.W_OK | os.X_OK):
            raise WorkspaceSkipped(f"workspace {workspace} is not writable: {folder} is read-only")
        return folder

    # ---- finding records --------------------------------------------------------------
    def _folder(self, folder: Path) -> _Folder:
        state = self._folders.setdefault(folder, _Folder())
        if state.trusted and self._writer is not None:
            return state
        try:
            mtime = folder.stat().st_mtime_ns
        except OSError:
            return state
        if mtime != state.mtime_ns:
            state.by_session = self._scan(folder)
            state.mtime_ns = mtime
        return state

    @staticmethod
    def _scan(folder: Path) -> dict[str, Path]:
        found: dict[str, Path] = {}
        for path in sorted(folder.glob("*.json")):
            if unstorable_name(path):  # no index could name it: as if it were not there (sources.py)
                continue
            try:
                with path.open("rb") as handle:
                    head = handle.read(4096)
            except OSError:
                continue
            session_id = _quick_session_id(head)
            if session_id is None:
                record = read_record(path)
                session_id = record["sessionId"] if record else None
            if isinstance(session_id, str):
                found.setdefault(session_id, path)
        return found

    def folders(self) -> list[Path]:
        """Every record folder this store has resolved so far (the summary queue walks them)."""
        return sorted(self._folders)

    def find(self, folder: Path, session_id: str) -> Path | None:
        return self._folder(folder).by_session.get(session_id)

    def records_in(self, folder: Path) -> dict[str, Path]:
        """``sessionId -> record file`` of every record in ``folder``."""
        return dict(self._folder(folder).by_session)

    def remembered(self, folder: Path, session_id: str, path: Path) -> None:
        """``path`` now holds ``session_id``'s record (written with ``write``, outside ``save``)."""
        self._folder_wrote(folder, session_id, path)

    def load(self, path: Path) -> dict[str, Any] | None:
        """The record at ``path``, from memory when the file has not changed since we saw it."""
        key = file_stamp(path)
        cached = self._records.get(path)
        if cached is not None and key is not None and cached[0] == key:
            self._records.move_to_end(path)
            return cached[1]
        self._read_json.pop(path, None)
        record = self._read_own(path) if self.marks is not None else None
        if record is None:
            record = read_record(path)
        if record is not None:
            self._remember(path, key, record)
        return record

    def _read_own(self, path: Path) -> dict[str, Any] | None:
        """The record at ``path`` if it is still as we wrote it, its nodes' JSON kept aside."""
        assert self.marks is not None
        try:
            with path.open("rb") as handle:
                if not self.marks.ours(path, os.fstat(handle.fileno())):
                    return None
                data = handle.read()
        except OSError:
            return None
        own = read_own_record(data)
        if own is None:
            return None
        record, self._read_json[path] = own
        return record

    def _remember(self, path: Path, key: FileStamp | None, record: dict[str, Any]) -> None:
        self._records[path] = (key, record)
        self._records.move_to_end(path)
        while len(self._records) > RECORD_CACHE_SIZE:
            self._records.popitem(last=False)

    # ---- writing ----------------------------------------------------------------------
    def save(
        self, history: SessionHistory, workspace: str | None
    ) -> tuple[Literal["written", "unchanged"], Path]:
        """Index ``history`` against the record on disk and write it if its content changed."""
        folder = self.folder_for(workspace)
        path = self.find(folder, history.session_id)
        previous = self.load(path) if path is not None else None
        cached = self._records.get(path) if path is not None else None
        record = self._indexer(folder, history.session_id).index(history, previous)
        if previous is not None:
            extras = {k: v for k, v in previous.items() if k not in record and k not in LEGACY_FIELDS}
            if extras:
                nodes = record.pop("nodes")
                record.update(extras)
                record["nodes"] = nodes
        if self.central is not None and workspace is not None:
            nodes = record.pop("nodes")
            record["workspace"] = workspace
            record["nodes"] = nodes
        if self.provenance is not None:
            with_provenance(record, previous, *self.provenance)
        if path is None:
            path = folder / record_file_name(record["id"])
            if path.exists() and read_record(path) is None:
                # Something unreadable holds our name: keep it aside rather than overwrite it.
                path.rename(path.with_name(f"{path.name}.unreadable-{time.time_ns()}"))
        elif previous == record:
            # The same content: remembered as the file's, so the next append starts from it.
            cached = self._records.get(path)
            if cached is not None and cached[1] is previous:
                self._records[path] = (cached[0], record)
            return "unchanged", path
        elif self.provenance is not None and without_provenance(previous or {}) == without_provenance(record):
            # Labels alone are no reason to write: pbot drops them when it rewrites a record,
            # and the two would take turns putting them back and taking them out.
            return "unchanged", path
        read = None
        if (
            (path not in self._written or not self._encoder.holds(path))
            and cached is not None
            and cached[1] is previous
            and cached[0] is not None
        ):
            # The first write of this record here, or the first since its parsed state was dropped
            # (``forget_cached``: every file a catch-up read): what changed is told against the
            # file as read, and its stamp is the base the search index must hold for that to do.
            self._written[path] = cached[0]
            read = previous
        self.write(path, record, read=read, read_json=self._read_json.pop(path, None) if read else None)
        self._folder_wrote(folder, history.session_id, path)
        return "written", path

    def _indexer(self, folder: Path, session_id: str) -> RecordIndexer:
        key = (folder, session_id)
        indexer = self._indexers.pop(key, None) or RecordIndexer()
        self._indexers[key] = indexer
        while len(self._indexers) > RECORD_CACHE_SIZE:
            self._indexers.popitem(last=False)
        return indexer

    def write(
        self,
        path: Path,
        record: dict[str, Any],
        read: dict[str, Any] | None = None,
        read_json: list[bytes] | None = None,
    ) -> None:
        """Write ``record`` atomically (compact JSON, one line); in a ``batch``, when the batch flushes.

        ``read``: the record as last read from ``path``, ``read_json`` its nodes' JSON if we
        wrote it (``RecordEncoder.encode``).
        """
        data = self._encoder.encode(path, record, read, read_json)
        changed = self._encoder.delta
        if self._writer is None:
            ensure_dir(path.parent)
            try:
                write_atomic(path, data)
            except OSError:
                self._written.pop(path, None)
                self._encoder.forget(path)
                if self.marks is not None:
                    self.marks.forget(path)
                raise
            self._remember(path, file_stamp(path), record)
            self._hand_over(path, record, changed, len(data))
            return
        if not self._queued:
            self._queued_since = time.monotonic()
        if path in self._queued:  # a later write of the same path replaces the earlier one
            earlier = self._queued_changes.get(path)
            changed = None if earlier is None or changed is None else earlier.then(changed)
        self._queued[path] = data
        self._queued_changes[path] = changed
        self._queued_bytes += len(data)
        self._remember(path, None, record)
        if self._queued_bytes > BATCH_BYTES or time.monotonic() - self._queued_since >= BATCH_SECONDS:
            self._flush()

    def _hand_over(self, path: Path, record: dict[str, Any], changed: Delta | None, size: int) -> None:
        """Remember the stamp of what was just written at ``path``; tell ``fresh`` what changed."""
        stamp = file_stamp(path)
        base = self._written.pop(path, None)
        if stamp is None:
            return
        self._written[path] = stamp
        if self.marks is not None:
            self.marks.put(path)
        if self.fresh is not None:
            delta = changed if base is not None else None
            self.fresh.put(
                path, Written(record, stamp, base, None if delta is None else delta.changed, delta, size)
            )

    def _flush(self) -> None:
        """Write every queued record at once: many fsyncs in flight let the file system group them."""
        queued, self._queued, self._queued_bytes = self._queued, {}, 0
        changes, self._queued_changes = self._queued_changes, {}
        assert self._writer is not None
        folders = {path.parent for path in queued}
        for folder in sorted(folders - self._dirty_folders):
            try:
                ensure_dir(folder)
            except OSError as error:  # a file where the folder should be: its records fail
                folders.discard(folder)
                for path in [p for p in queued if p.parent == folder]:
                    del queued[path]
                    self._failed(path, error)
        self._dirty_folders |= folders
        futures = {
            path: self._writer.submit(write_atomic, path, data, sync_dir=False)
            for path, data in queued.items()
        }
        for path, future in futures.items():
            failure = future.exception()
            if isinstance(failure, OSError):
                self._failed(path, failure)
            elif failure is not None:
                raise failure
            else:
                # The cached record now matches the file on disk: the next load needs no read.
                cached = self._records.get(path)
                if cached is not None and cached[0] is None:
                    self._records[path] = (file_stamp(path), cached[1])
                    self._hand_over(path, cached[1], changes.get(path), len(queued[path]))

    def _failed(self, path: Path, error: OSError) -> None:
        self._failures[path] = error
        self._records.pop(path, None)
        self._written.pop(path, None)
        self._encoder.forget(path)
        if self.marks is not None:
            self.marks.forget(path)

    @contextmanager
    def batch(self, workers: int = 16) -> Iterator[dict[Path, OSError]]:
        """Defer record writes and do them together, each still atomic (temp file, fsync, replace).

        A pass that rewrites hundreds of records pays one group of concurrent fsyncs instead of
        hundreds of serial ones, and its reading never waits on a journal commit. Folders are
        fsynced once each at the end. The yielded dict fills with the paths whose write failed.
        """
        from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415 - keep reading commands light

        self._failures = {}
        self._writer = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="record-writer")
        try:
            yield self._failures
            self._flush()
        finally:
            writer, self._writer = self._writer, None
            writer.shutdown(wait=True)
            self._queued, self._queued_bytes = {}, 0
            self._queued_changes = {}
            self._checked.clear()
            for folder in sorted(self._dirty_folders):
                try:
                    fsync_dir(folder)
                except OSError as error:
                    self._failures.setdefault(folder, error)
                state = self._folders.get(folder)
                if state is not None and state.trusted:
                    state.trusted = False
                    try:
                        state.mtime_ns = folder.stat().st_mtime_ns
                    except OSError:
                        state.mtime_ns = -1
            self._dirty_folders.clear()

    def _folder_wrote(self, folder: Path, session_id: str, path: Path) -> None:
        state = self._folders.setdefault(folder, _Folder())
        state.by_session[session_id] = path
        if self._writer is not None:
            state.trusted = True
            return
        try:
            state.mtime_ns = folder.stat().st_mtime_ns
        except OSError:
            state.mtime_ns = -1

    def forget_cached(self) -> None:
        """Drop parsed records from memory (the service calls this when it trims its state)."""
        self._records.clear()
        self._indexers.clear()
        self._encoder.forget()
        self._read_json.clear()

    def forget_record(self, path: Path) -> None:
        """Drop what is kept of record ``path`` (parsed, and its nodes' JSON): for a writer that
        reads each record anew (the summary queue), whose writes would otherwise keep up to
        ``RECORD_CACHE_SIZE`` records parsed, hundreds of MB after a first run.
        """
        self._records.pop(path, None)
        self._encoder.forget(path)
        self._read_json.pop(path, None)
