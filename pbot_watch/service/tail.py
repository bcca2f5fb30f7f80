"""The tailer: the service's side of ``Indexer``, with persisted cursors and bounded memory.

``Indexer`` keeps a parsed ``SessionFile`` per file and advances an in-memory cursor. The
service adds three things around it:

* **persistence**: after a batch, the cursors of files whose records are on disk are saved to
  ``StateStore``; a failed record write keeps the old cursor and drops the file from memory,
  so the next attempt re-reads it from 0 and nothing is lost;
* **no work for what did not change**: a file not in memory is compared with its saved cursor
  (stat and two fingerprints) before anything is parsed; at start most files stop there;
* **bounded memory**: at most ``max_sessions_in_memory`` parsed files (and ``MEMORY_BUDGET_BYTES``
  of their estimated parsed state) stay in the indexer, least recently appended first out. Every saved cursor
  also extends the file's resumable form on disk (``service/resume_store.py``), so a dropped
  file that grows again resumes at its saved cursor and parses only the new bytes; only a file
  without a usable log (a rewrite, a first start after an upgrade) is read from 0.
  ``bytes_parsed`` in status shows which.

A session id spread over several files (an ``/import`` copy) gets one record built from all of
them, so before saving such a session every file of it is brought into memory.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import structlog

from pbot_watch.archive.files import ArchiveStore, WorkspaceSkipped
from pbot_watch.archive.marks import MARKS_FOLDER, WrittenMarks
from pbot_watch.archive.stamp import FileStamp
from pbot_watch.history.nodes import SessionHistory
from pbot_watch.indexer import EntriesRead, Indexer, SyncResult, Tracked
from pbot_watch.pi.cursor import Cursor
from pbot_watch.service.allocator import release_free_memory
from pbot_watch.service.hooks import RecordListener
from pbot_watch.service.resume_store import RESUME_FOLDER, ResumeStore
from pbot_watch.service.state import FileState, StateStore
from pbot_watch.sources import SessionTail, WholeDigest

# Parsed state held in memory, estimated per file: a session file's resume log holds its
# steps (texts and ids, no tool output), and measured parsed state, branches included, is
# 3-5x the log's steps before compression (a 200 MB Pi session of tool work: 6.3 MB of
# steps, 28 MB parsed). A file without a log yet counts its bytes, as all files did before:
# 0.4x (tool output) to 4x (conversation text in CJK, stored as 2-byte str) of them. 128 MB of estimated state
# keeps the service under 300 MB RSS, and holds two marathon sessions beside small ones.
MEMORY_BUDGET_BYTES = 128 << 20
STATE_PER_LOG_BYTE = 5
# An unfinished last line (Pi died mid-write) is at most this long before we just re-read.
PARTIAL_PEEK_BYTES = 1 << 20
# New bytes read from one file per visit: a huge file (a 50 MB pasted log) is read over several
# batches, and the files that changed meanwhile are served between them.
READ_BUDGET_BYTES = 8 << 20

log = structlog.get_logger("pbot_watch.service")

# How often at most the freed heap is handed back to the system (see ``release_free_memory``).
RELEASE_SECONDS = 1.0
# Running whole-file fingerprints kept for dropped files (a few hundred bytes each), so that a
# resumed file's next cursor hashes only the new bytes, not the whole file again.
KEPT_DIGESTS = 4096


@dataclass
class Counters:
    """What status shows about indexing; updated by the tailer only."""

    records_written: int = 0
    records_unchanged: int = 0
    bytes_parsed_total: int = 0
    bytes_parsed_last_append: int = 0
    last_append: float | None = None
    last_append_path: Path | None = None
    workspaces_written: set[str] = field(default_factory=set)


@dataclass
class BatchReport:
    """One batch: which paths appended (for the idle clock) and which failed (to retry)."""

    appended: list[Path] = field(default_factory=list)
    failed: dict[Path, str] = field(default_factory=dict)
    # Read up to the budget only: due again at once, their records wait for the rest.
    more: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    changed_state: bool = False


def cursor_plan(path: Path, cursor: Cursor) -> tuple[str, Cursor | None]:
    """``plan_open`` for a file that is not in memory: "nothing", "append", "reread" or "gone".

    An "append" that is only the unfinished last line we already saw is "nothing": its bytes
    become parseable when their newline arrives, and that write brings another event. The
    second value is the cursor refreshed by a same-size check that found the file unchanged.
    Raises ``OSError`` when the file cannot be read or is no longer a regular file.
    """
    try:
        tail = SessionTail(path)
    except FileNotFoundError:
        return "gone", None
    with tail:
        decision, refreshed = tail.plan(cursor)
        if decision == "append" and tail.line_pending(cursor.offset, PARTIAL_PEEK_BYTES):
            return "nothing", None
        return decision, refreshed


@dataclass
class ArchiveWriter(ArchiveStore):
    """``ArchiveStore`` that remembers the last write failure.

    ``Indexer`` reports a record it could not write as a warning and goes on, which suits a
    one-shot index. The service must know, to keep the file's old cursor and retry: a cursor
    saved past bytes whose record is not on disk would lose them.
    """

    last_error: OSError | None = None

    def save(
        self, history: SessionHistory, workspace: str | None
    ) -> tuple[Literal["written", "unchanged"], Path]:
        try:
            return super().save(history, workspace)
        except OSError as error:
            self.last_error = error
            raise


class Tailer:
    """Runs on the service's consumer thread only; nothing here is thread-safe by design."""

    def __init__(
        self,
        store: ArchiveWriter,
        state: StateStore,
        max_in_memory: int,
        on_record: RecordListener | None = None,
        on_error: Callable[[str], None] | None = None,
        memory_budget: int = MEMORY_BUDGET_BYTES,
        on_progress: Callable[[], None] | None = None,
        on_entries: Callable[[EntriesRead], None] | None = None,
        on_touched: Callable[[Path, FileStamp, FileStamp], None] | None = None,
    ) -> None:
        self.store = store
        self.state = state
        self.max_in_memory = max_in_memory
        self.memory_budget = memory_budget
        self.on_record = on_record
        self.on_error = on_error
        self.on_progress = on_progress
        self.on_touched = on_touched
        """Told of a file found unchanged under a new mtime (path, stamp read at, stamp now)."""
        self.indexer = Indexer(store, on_progress=self._progress, on_entries=on_entries)
        self.known: dict[Path, FileState] = {p.path: p for p in state.files()}
        self._by_session: dict[str, set[Path]] = {}
        for known in self.known.values():
            if known.session_id is not None:
                self._by_session.setdefault(known.session_id, set()).add(known.path)
        self._recent: OrderedDict[Path, None] = OrderedDict()
        # Files read up to the budget, not to their end: whether what was read so far changed
        # them, and how many bytes it was.
        self._partial: dict[Path, tuple[bool, int]] = {}
        # What the consumer is doing right now, for a status the heartbeat writes meanwhile.
        self.working_on: str | None = None
        self.counters = Counters()
        self._released = 0.0
        self.resume = ResumeStore(state.path.parent / RESUME_FOLDER)
        if store.marks is None:
            # Records marked as written here keep their nodes' JSON across a restart.
            store.marks = WrittenMarks(state.path.parent / RESUME_FOLDER / MARKS_FOLDER)
        self._digests: OrderedDict[Path, WholeDigest] = OrderedDict()

    # ---- what status shows -----------------------------------------------------------
    @property
    def sessions(self) -> int:
        return len(self._by_session)

    @property
    def in_memory(self) -> int:
        return len(self.indexer.files)

    # ---- deciding what to read ---------------------------------------------------------
    def needs_read(self, path: Path) -> bool:
        """Whether ``path`` may hold bytes the archive does not reflect yet."""
        if path in self.indexer.files:
            return True
        known = self.known.get(path)
        if known is None:
            return path.is_file()
        if self._retry_skipped(known):
            return True  # its cursor is at the end, but its record lacks what was read then
        try:
            decision, refreshed = cursor_plan(path, known.cursor)
        except OSError:
            return True  # reading it reports why, and the file is retried
        if refreshed is not None:
            # Rewritten at the same size but unchanged (a touch): remember, not to check it again.
            self._save([replace(known, cursor=refreshed)])
            self._touched(path, known.cursor, refreshed)
        return decision != "nothing"

    def _touched(self, path: Path, before: Cursor | None, after: Cursor | None) -> None:
        """A cursor moved to a new mtime with nothing read: the file was checked byte for byte
        unchanged (``Cursor.seen``). The followers (raw memory) hear of it, or they would read the
        whole file again to tell: their cursors have no whole-file fingerprint.
        """
        if self.on_touched is None or before is None or after is None:
            return
        if before.offset != after.offset or before.mtime_ns == after.mtime_ns:
            return
        self.on_touched(
            path,
            FileStamp(before.ino, before.offset, before.mtime_ns),
            FileStamp(after.ino, after.offset, after.mtime_ns),
        )

    def _retry_skipped(self, known: FileState) -> bool:
        """A file skipped because its workspace could not take records, which now can.

        Its cursor was saved at the end of what was read, so a plain cursor check finds
        nothing new: it must be read again (from 0, as a file not in memory always is) for its
        record to get what was appended meanwhile.
        """
        return known.skipped and known.workspace is not None and self.takes_records(known.workspace)

    def takes_records(self, workspace: str) -> bool:
        """Whether a session of ``workspace`` can have its record written now."""
        try:
            self.store.folder_for(workspace)
        except (WorkspaceSkipped, OSError):
            return False
        return True

    def skipped_ready(self) -> list[Path]:
        """Files skipped for their workspace whose workspace takes records again (one check each)."""
        ready: dict[str, bool] = {}
        out = []
        for path, known in self.known.items():
            if known.skipped and known.workspace is not None:
                if known.workspace not in ready:
                    ready[known.workspace] = self.takes_records(known.workspace)
                if ready[known.workspace]:
                    out.append(path)
        return out

    def startup_paths(self, present: Iterable[Path], excluded: Callable[[str], bool]) -> list[Path]:
        """Files to read at start: new, changed, or whose record could not be written last time."""
        present = set(present)
        gone = [p for p in self.known if p not in present]
        self._forget(gone)
        out = []
        for path in sorted(present):
            known = self.known.get(path)
            if (
                known is not None and known.skipped and known.workspace and not excluded(known.workspace)
            ) or self.needs_read(path):
                out.append(path)
        return out

    # ---- reading ----------------------------------------------------------------------
    def sync(self, paths: Iterable[Path], *, catching_up: Collection[Path] = ()) -> BatchReport:
        """Bring the records of ``paths`` up to date and persist their cursors.

        Paths in ``catching_up`` (read by the start scan) are not appends the person just made:
        they do not count as activity or as the last append.
        """
        report = BatchReport()
        results: dict[Path, SyncResult] = {}
        to_save: dict[str, SyncResult] = {}
        for path in paths:
            if not self.needs_read(path):
                continue
            known = self.known.get(path)
            retry = known is not None and known.skipped
            result = self._read(path, report, READ_BUDGET_BYTES)
            if result is None:
                continue
            if result.more or path in self._partial:
                result = self._continued(path, result, report)
                if result is None:
                    continue
            results[path] = result
            if result.bytes_read > 0 and path not in catching_up:
                # A re-read (rewrite in place, or an evicted file growing) shows its full cost here.
                report.appended.append(path)
                self.counters.bytes_parsed_last_append = result.bytes_read
                self.counters.last_append = time.time()
                self.counters.last_append_path = path
            if (result.changed or retry) and result.session_id is not None:
                to_save[result.session_id] = result
        done: list[Path] = [p for p, r in results.items() if r.outcome != "gone"]
        skipped: set[Path] = set()
        # One batch of records is written together (concurrent fsyncs, each folder synced once)
        # before any of their cursors is saved or any listener hears of them.
        written: list[tuple[Path, str, list[Path]]] = []
        with self.store.batch() as failures:
            for session_id, result in to_save.items():
                siblings = self._load_siblings(session_id, report)
                files = [result.path, *siblings]
                self.store.last_error = None
                self.working_on = f"writing the record of session {session_id}"
                try:
                    saved = self.indexer.save_session(result)
                    error = self.store.last_error
                except OSError as raised:
                    error = raised
                finally:
                    self.working_on = None
                    self._progress()
                if error is not None:
                    self._write_failed(session_id, files, error, report)
                    continue
                report.warnings.extend(saved.warnings)
                log.debug(
                    "session_indexed",
                    session=session_id,
                    path=str(result.path),
                    outcome=saved.outcome,
                    bytes=result.bytes_read,
                    record=str(saved.record) if saved.record else None,
                )
                if saved.outcome == "written" and saved.record is not None:
                    written.append((saved.record, session_id, files))
                    if result.workspace:
                        self.counters.workspaces_written.add(result.workspace)
                elif saved.outcome == "unchanged":
                    self.counters.records_unchanged += 1
                elif saved.outcome == "skipped":
                    skipped.update(p for p, t in self.indexer.files.items() if t.session_id == session_id)
                done.extend(siblings)
        for record, session_id, files in written:
            error = failures.get(record) or failures.get(record.parent)
            if error is not None:
                self._write_failed(session_id, files, error, report)
                continue
            self.counters.records_written += 1
            if self.on_record is not None:
                self.on_record(record, session_id)
        self._persist([p for p in dict.fromkeys(done) if p not in report.failed], skipped)
        report.changed_state = bool(results or report.more)
        # Files read only to catch up (nobody appended to them since we last ran) are the bulk of
        # a first start; keeping them would make memory grow with the archive, not with activity.
        cold = [p for p in dict.fromkeys(done) if p in catching_up and p not in report.appended]
        self._trim(cold)
        return report

    def _continued(self, path: Path, result: SyncResult, report: BatchReport) -> SyncResult | None:
        """A file read over several visits: its record is saved once, after the last piece."""
        changed, bytes_read = self._partial.pop(path, (False, 0))
        if result.outcome == "gone":
            return result
        changed = changed or result.changed
        bytes_read += result.bytes_read
        if result.more:
            self._partial[path] = (changed, bytes_read)
            report.more.append(path)
            return None
        result.changed, result.bytes_read = changed, bytes_read
        return result

    def _read(self, path: Path, report: BatchReport, budget: int | None = None) -> SyncResult | None:
        self.working_on = f"reading {path}"
        try:
            if path not in self.indexer.files:
                self._resume(path)
            held = self.indexer.files.get(path)
            before = held.cursor if held is not None else None
            result = self.indexer.read(path, budget)
            if result.outcome == "idle" and result.bytes_read == 0 and (now := self.indexer.files.get(path)):
                self._touched(path, before, now.cursor)
        except OSError as error:
            report.failed[path] = f"cannot read {path}: {error}"
            self._drop(path)
            return None
        finally:
            self.working_on = None
        self.counters.bytes_parsed_total += result.bytes_read
        if result.outcome == "gone":
            self._forget([path])
            return result
        if result.outcome == "unreadable":
            # A permission or I/O error: retried later with backoff, from 0.
            report.failed[path] = "; ".join(result.warnings) or f"cannot read {path}"
            log.error("session_read_failed", path=str(path), error=report.failed[path])
            self._drop(path)
            if self.on_error:
                self.on_error(report.failed[path])
            return None
        if result.malformed:
            log.debug("malformed_lines_skipped", path=str(path), count=result.malformed)
        self._recent[path] = None
        self._recent.move_to_end(path)
        return result

    def _load_siblings(self, session_id: str, report: BatchReport) -> list[Path]:
        """Every other file of ``session_id`` into memory, so its record is built from all of them."""
        loaded = []
        for path in sorted(self._by_session.get(session_id, ())):
            if path in self.indexer.files:
                loaded.append(path)
                continue
            result = self._read(path, report)
            if result is not None and result.outcome != "gone":
                loaded.append(path)
        return loaded

    def _resume(self, path: Path) -> None:
        """Bring ``path``'s state back from its log at the saved cursor, when the log reaches it.

        The indexer then plans from that cursor as for a file it never dropped: an append reads
        the new bytes only, anything else (a rewrite, a replaced file) reads from 0 as always.
        """
        known = self.known.get(path)
        if known is None or known.session_id is None:
            return
        resumed = self.resume.load(path, known.cursor)
        if resumed is None:
            return
        state, logged = resumed
        whole = self._digests.pop(path, None)
        if whole is None or whole.upto != known.cursor.offset:
            # From the log's block digests (a restart): the next cursor hashes the last block
            # again; without them, the whole file once (read, not parsed).
            whole = logged or WholeDigest()
        self.indexer.files[path] = Tracked(state, known.cursor, known.session_id, known.workspace, whole)

    def _drop(self, path: Path) -> None:
        """Forget ``path``'s parsed state (not its cursor): the next attempt resumes it from its log."""
        tracked = self.indexer.files.get(path)
        if tracked is not None and tracked.cursor is not None and tracked.whole.upto == tracked.cursor.offset:
            self._digests[path] = tracked.whole
            self._digests.move_to_end(path)
            while len(self._digests) > KEPT_DIGESTS:
                self._digests.popitem(last=False)
        self.indexer.forget(path)
        self._recent.pop(path, None)
        self._partial.pop(path, None)

    def _progress(self, _size: int = 0) -> None:
        if self.on_progress is not None:
            self.on_progress()

    def _write_failed(self, session_id: str, files: list[Path], error: OSError, report: BatchReport) -> None:
        """Keep the old cursors and forget the parsed state: the retry re-reads from 0."""
        message = f"cannot write the record of session {session_id}: {error}"
        log.error("record_write_failed", session=session_id, error=str(error))
        for path in files:
            report.failed[path] = message
            self._drop(path)
        if self.on_error:
            self.on_error(message)

    # ---- persistence and memory -----------------------------------------------------------
    def _persist(self, paths: list[Path], skipped: set[Path]) -> None:
        states = []
        for path in paths:
            tracked = self.indexer.files.get(path)
            if tracked is None or tracked.cursor is None:
                continue
            if tracked.state.is_session:
                self.resume.save(path, tracked.state, tracked.cursor, tracked.whole)
            state = FileState(path, tracked.cursor, tracked.session_id, tracked.workspace, path in skipped)
            if self.known.get(path) == state:
                continue
            states.append(state)
        self._save(states)

    def _save(self, states: list[FileState]) -> None:
        self.state.save(states)
        for state in states:
            old = self.known.get(state.path)
            if old is not None and old.session_id is not None and old.session_id != state.session_id:
                self._by_session.get(old.session_id, set()).discard(state.path)
                if not self._by_session.get(old.session_id):
                    self._by_session.pop(old.session_id, None)
            self.known[state.path] = state
            if state.session_id is not None:
                self._by_session.setdefault(state.session_id, set()).add(state.path)

    def forget_under(self, folder: Path) -> list[Path]:
        """A deleted folder: forget every file known below it."""
        gone = [p for p in self.known if p.is_relative_to(folder) and not p.exists()]
        self._forget(gone)
        return gone

    def _forget(self, paths: list[Path]) -> None:
        if not paths:
            return
        self.state.forget(paths)
        for path in paths:
            self._drop(path)
            self._digests.pop(path, None)
            self.resume.forget(path)
            known = self.known.pop(path, None)
            if known is not None and known.session_id is not None:
                files = self._by_session.get(known.session_id)
                if files is not None:
                    files.discard(path)
                    if not files:
                        del self._by_session[known.session_id]

    def _held_bytes(self, path: Path, tracked: Tracked) -> int:
        """The estimated memory of ``path``'s parsed state (see ``MEMORY_BUDGET_BYTES``)."""
        logged = self.resume.logged_bytes(path, tracked.state)
        return tracked.state.reader.consumed if logged is None else STATE_PER_LOG_BYTE * logged

    def _trim(self, cold: Iterable[Path] = ()) -> None:
        """Drop ``cold`` files, then the least recently read ones beyond the count and byte budgets."""
        # A file read over several visits is never dropped halfway: it would start over at 0.
        evicted = False
        for path in cold:
            if path not in self._partial:
                self._drop(path)
                evicted = True

        def over() -> bool:
            if len(self.indexer.files) > self.max_in_memory:
                return True
            total = sum(self._held_bytes(p, t) for p, t in self.indexer.files.items())
            return total > self.memory_budget and len(self.indexer.files) > 1

        candidates = [p for p in self._recent if p not in self._partial]
        while over() and candidates:
            self._drop(candidates.pop(0))
            evicted = True
        for path in [p for p in self.indexer.files if p not in self._recent and p not in self._partial]:
            if len(self.indexer.files) <= self.max_in_memory:
                break
            self._drop(path)
            evicted = True
        if evicted:
            self.store.forget_cached()
            now = time.monotonic()
            if now - self._released >= RELEASE_SECONDS:
                release_free_memory()
                self._released = now
