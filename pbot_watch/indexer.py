"""The one pipeline from a session file's new bytes to its record on disk.

``pbot-watch index`` and ``pbot-watch run`` both call ``Indexer.sync(path)``: stat the file,
ask the cursor what changed, feed only the new bytes to the file's ``SessionFile``, and save
the session's record if its exchanges changed. A session id written by several files (an
``/import`` copy) gets one record built from all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pbot_watch.archive.files import ArchiveStore, WorkspaceSkipped
from pbot_watch.archive.legacy import drop_legacy_fields, import_legacy, legacy_folders
from pbot_watch.archive.stamp import FileStamp
from pbot_watch.catalog import Catalog, HeaderCache
from pbot_watch.display import plural
from pbot_watch.errors import PbotWatchError
from pbot_watch.history.project import SessionFile, merge_histories
from pbot_watch.pi.cursor import Cursor
from pbot_watch.pi.entries import SessionHeader
from pbot_watch.sources import SessionTail, WholeDigest

# New bytes are read in one piece up to this size (the common case: one read, one feed).
WHOLE_READ = 64 << 20

Outcome = Literal["written", "unchanged", "empty", "skipped", "not-session", "gone", "unreadable", "idle"]


@dataclass
class Tracked:
    """A file the indexer has read: its parsing state and how far it got."""

    state: SessionFile
    cursor: Cursor | None = None
    session_id: str | None = None
    workspace: str | None = None
    whole: WholeDigest = field(default_factory=WholeDigest)


@dataclass
class SyncResult:
    path: Path
    outcome: Outcome
    session_id: str | None = None
    workspace: str | None = None
    record: Path | None = None
    bytes_read: int = 0
    reread: bool = False
    # Read only up to the caller's budget: bytes remain, and the record waits for them.
    more: bool = False
    malformed: int = 0
    changed: bool = False
    warnings: list[str] = field(default_factory=list)


@dataclass
class EntriesRead:
    """The entries one read of a session file parsed, for a consumer other than the record.

    ``start`` is where they begin in the file (0: the file from its start, replacing what was
    held for it), ``cursor`` where reading left it, ``stamp`` the file as it was read (its size
    is where reading stopped when a budget left bytes for later).
    """

    path: Path
    header: SessionHeader
    start: int
    entries: list[dict[str, Any]]
    cursor: Cursor
    stamp: FileStamp


@dataclass
class Indexer:
    store: ArchiveStore
    files: dict[Path, Tracked] = field(default_factory=dict)
    on_record: Callable[[Path, str], None] | None = None
    # Called with each piece's size as it is parsed: the service's proof that reading progresses.
    on_progress: Callable[[int], None] | None = None
    # Called with the entries of each read that parsed some: the service hands them to raw
    # memory, so an append is decoded once for the record and for raw memory.
    on_entries: Callable[[EntriesRead], None] | None = None

    def sync(self, path: Path) -> SyncResult:
        """Bring ``path``'s record up to date with the file; never raises for bad input."""
        result = self.read(path)
        if result.changed and result.session_id is not None:
            return self.save_session(result)
        return result

    def read(self, path: Path, budget: int | None = None) -> SyncResult:
        """Read what is new in ``path`` into its state; ``changed`` says whether exchanges may differ.

        ``budget`` bounds the bytes read in this call (``more`` says some remain), so that one
        huge file is read over several calls while other files get their turn in between.
        Reading never goes past the size the file had when it was opened.
        """
        try:
            tail = SessionTail(path)
        except FileNotFoundError:
            self.forget(path)
            return SyncResult(path, "gone")
        except OSError as error:
            # Unreadable, or a folder, FIFO or device in its place: report it, keep the old state.
            return SyncResult(path, "unreadable", warnings=[f"{path}: cannot read: {error.strerror}"])
        with tail:
            try:
                return self._read_tail(path, tail, budget)
            except OSError as error:
                # An I/O error: report it and keep the old state.
                return SyncResult(path, "unreadable", warnings=[f"{path}: cannot read: {error.strerror}"])

    def _read_tail(self, path: Path, tail: SessionTail, budget: int | None) -> SyncResult:
        """Plan from the cursor, feed the new bytes, move the cursor (one open file)."""
        tracked = self.files.get(path)
        cursor = tracked.cursor if tracked else None
        decision, refreshed = tail.plan(cursor)
        if tracked is None or decision == "reread":
            tracked = Tracked(SessionFile())
            self.files[path] = tracked
        if decision == "nothing" and tracked.cursor is not None:
            tracked.cursor = refreshed or tracked.cursor
            return SyncResult(path, "idle", tracked.session_id, tracked.workspace)
        state = tracked.state
        first = state.reader.consumed  # where the first entry parsed now begins
        start = first + state.reader.lines.pending
        added = 0
        sink: list[dict[str, Any]] | None = [] if self.on_entries is not None else None

        def parse(chunk: bytes) -> None:
            nonlocal added
            added += state.feed(chunk, sink)

        bytes_read = tail.feed(start, parse, budget, WHOLE_READ, self.on_progress)
        offset = state.reader.consumed
        tracked.cursor = tail.cursor(offset, tracked.whole)
        result = SyncResult(path, "idle", bytes_read=bytes_read, reread=decision == "reread")
        result.more = budget is not None and start + budget < tail.size
        result.malformed = state.reader.malformed
        if not state.is_session:
            result.outcome = "not-session" if state.reader.not_session or offset > 0 else "empty"
            return result
        assert state.header is not None
        if self.on_entries is not None and sink is not None and (bytes_read or decision == "reread"):
            stamp = FileStamp.of(tail.st)
            if result.more:
                stamp = stamp._replace(size=start + bytes_read)
            self.on_entries(EntriesRead(path, state.header, first, sink, tracked.cursor, stamp))
        tracked.session_id = state.header.id
        tracked.workspace = state.header.workspace
        result.session_id, result.workspace = tracked.session_id, tracked.workspace
        result.changed = added > 0 or decision == "reread" or cursor is None
        return result

    def save_session(self, result: SyncResult) -> SyncResult:
        session_id = result.session_id
        assert session_id is not None
        siblings = sorted(p for p, t in self.files.items() if t.session_id == session_id)
        histories = [h for p in siblings if (h := self.files[p].state.history()) is not None]
        for p in siblings:
            tree = self.files[p].state.tree
            if tree.cycles:
                result.warnings.append(f"{p}: parentId cycle cut at {sorted(tree.cycles)}")
            elif not histories and tree.tipless():
                result.warnings.append(
                    f"{p}: parentId cycle through every entry ({len(tree.by_id)} entries): no branch to index"
                )
        if not histories:
            result.outcome = "empty"
            return result
        try:
            outcome, record = self.store.save(merge_histories(histories), result.workspace)
        except WorkspaceSkipped as skipped:
            result.outcome = "skipped"
            result.warnings.append(str(skipped))
            return result
        except OSError as error:
            # Disk full, a folder made read-only mid-run: this session waits, the others go on.
            result.outcome = "skipped"
            result.warnings.append(f"cannot write the record of session {session_id}: {error}")
            return result
        result.outcome, result.record = outcome, record
        if self.on_record is not None and outcome == "written":
            self.on_record(record, session_id)
        return result

    def forget(self, path: Path) -> None:
        """A deleted file: drop its state; its record stays on disk."""
        self.files.pop(path, None)


@dataclass
class IndexReport:
    """What one pass did; the CLI prints it as one summary line."""

    files: int = 0
    sessions: int = 0
    written: int = 0
    unchanged: int = 0
    skipped: int = 0
    empty: int = 0
    not_session: int = 0
    malformed: int = 0
    bytes_read: int = 0
    # Records copied from personal-bot's old user-level folder (None: there is no such folder).
    imported: int | None = None
    warnings: list[str] = field(default_factory=list)

    def line(self) -> str:
        legacy = "" if self.imported is None else f", {self.imported} imported from pbot's old history"
        return (
            f"{plural(self.sessions, 'session')}, {plural(self.written, 'record')} written, "
            f"{self.unchanged} unchanged, {self.skipped} skipped, {self.empty} without exchanges, "
            f"{plural(self.not_session, 'not a session', 'not sessions')}, "
            f"{plural(self.malformed, 'malformed line')}{legacy} "
            f"({plural(self.files, 'file')}, {self.bytes_read / 1e6:.1f} MB)"
        )


class MissingRoot(PbotWatchError):
    """A configured session root does not exist."""


@dataclass
class IndexProgress:
    """How far one pass is, in session files and their bytes; ``pbot-watch index`` draws it."""

    files_done: int = 0
    files_total: int = 0
    bytes_done: int = 0
    bytes_total: int = 0
    last: Path | None = None
    """The session file read last."""


def index_all(
    roots: list[Path],
    store: ArchiveStore,
    progress: Callable[[IndexProgress], None] | None = None,
    headers: HeaderCache | None = None,
) -> IndexReport:
    """One pass over every session file below ``roots``, newest first; a second pass writes nothing.

    Which files make which session is the catalog's (``headers``: a cache to read them through,
    which a caller asking the catalog again afterwards passes so they are read once).

    The sessions modified last are read and written first: on a first run over a long history
    those are the ones a person looks for, and a search made meanwhile finds them early.
    """
    for root in roots:
        if not root.is_dir():
            raise MissingRoot(f"session root {root} does not exist")
    skipped: list[str] = []
    sightings = list(Catalog(roots, cache=headers or HeaderCache()).sightings(skipped))
    report = IndexReport(files=len(sightings), warnings=skipped)
    state = IndexProgress(files_total=len(sightings))
    # A session id spread over several files (an /import copy) makes one record, so files are
    # grouped by their header first; then one session at a time is read whole and saved, and
    # its parsed state dropped: memory stays bounded by the largest session, not the corpus.
    by_session: dict[str, list[Path]] = {}
    newest: dict[str, int] = {}
    for sighting in sightings:
        if sighting.kind == "unreadable":
            report.warnings.append(f"{sighting.path}: {sighting.problem}")
        elif sighting.kind == "not-session":
            report.not_session += 1
        elif sighting.session_id is not None and sighting.stamp is not None:
            sid = sighting.session_id
            by_session.setdefault(sid, []).append(sighting.path)
            newest[sid] = max(newest.get(sid, 0), sighting.stamp.mtime_ns)
            state.bytes_total += sighting.stamp.size
            continue
        state.files_done += 1
    report.sessions = len(by_session)
    if progress is not None:
        progress(state)
    indexer = Indexer(store)
    written: dict[Path, str] = {}
    saved_sessions: set[str] = set()
    # First, and each write on its own, so that the pass finds the imported records on disk
    # and keeps their ids and summaries.
    legacy = legacy_folders(roots)
    imported = import_legacy(legacy, store)
    report.warnings.extend(imported.warnings)
    report.imported = imported.imported if legacy else None
    with store.batch() as failures:
        for session_id in sorted(by_session, key=lambda sid: (-newest[sid], sid)):
            files = by_session[session_id]
            readable: list[Path] = []
            for path in files:
                result = indexer.read(path)
                report.bytes_read += result.bytes_read
                report.malformed += result.malformed
                report.warnings.extend(result.warnings)
                if result.session_id == session_id:
                    readable.append(path)
                state.files_done += 1
                state.bytes_done += result.bytes_read
                state.last = path
                if progress is not None:
                    progress(state)
            if not readable:
                report.skipped += 1
                continue
            tracked = indexer.files[readable[0]]
            saved = indexer.save_session(SyncResult(readable[0], "idle", session_id, tracked.workspace))
            report.warnings.extend(saved.warnings)
            if saved.outcome in ("written", "unchanged"):
                saved_sessions.add(session_id)
            if saved.outcome == "written":
                report.written += 1
                if saved.record is not None:
                    written[saved.record] = session_id
            elif saved.outcome == "unchanged":
                report.unchanged += 1
            elif saved.outcome == "skipped":
                report.skipped += 1
            else:
                report.empty += 1
            for path in files:
                indexer.forget(path)
    for path, failure in sorted(failures.items()):
        if path in written:
            report.written -= 1
            report.skipped += 1
            report.warnings.append(f"cannot write the record of session {written[path]}: {failure}")
        else:
            report.warnings.append(f"cannot sync {path}: {failure}")
    report.warnings.extend(drop_legacy_fields(store, store.folders(), saved_sessions).warnings)
    return report
