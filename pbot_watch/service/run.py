"""The service: startup, a main loop with a short tick, shutdown (the shape of uvicorn's ``Server``).

One thread does all the reading and writing (the "consumer", the main thread): it drains the
watcher's queue into the ``ReadSchedule``, reads what falls due with the tailer, runs reconcile
scans, ticks the idle clock and has the ``StatusReporter`` write the status file. The observer
thread only enqueues; the idle worker and the heartbeat run on their own threads. Signal
handlers only set a flag, so a stop request is seen within one tick (or one batch, which is
bounded in time); a second Ctrl-C exits at once.
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import structlog

from pbot_watch import __version__
from pbot_watch.archive.legacy import drop_legacy_fields, import_legacy, legacy_folders
from pbot_watch.archive.stamp import FileStamp
from pbot_watch.catalog import Scope
from pbot_watch.config import Settings
from pbot_watch.display import plural
from pbot_watch.errors import PbotWatchError
from pbot_watch.indexer import EntriesRead
from pbot_watch.service import allocator
from pbot_watch.service.allocator import release_free_memory
from pbot_watch.service.catchup import CatchUp
from pbot_watch.service.hooks import BuildingFollower, Extensions, ServiceContext, TouchedFollower
from pbot_watch.service.idle import IdleClock
from pbot_watch.service.listeners import ListenerThread
from pbot_watch.service.lock import AlreadyRunning, InstanceLock
from pbot_watch.service.reporter import StatusReporter
from pbot_watch.service.schedule import ReadSchedule, batches
from pbot_watch.service.snapshot import Snapshot, diff, scan
from pbot_watch.service.state import StateStore
from pbot_watch.service.status import Activity
from pbot_watch.service.tail import ArchiveWriter, Tailer
from pbot_watch.service.watch import Change, Watcher
from pbot_watch.sqlite import SQLiteTooOld

log = structlog.get_logger("pbot_watch.service")

TICK_SECONDS = 0.1
# Reading due files pauses after this long to write status, so the heartbeat stays timely.
BATCH_SECONDS = 0.5
SHUTDOWN_SECONDS = 1.0
# Put on the change queue by a stop signal, to end the consumer's wait; it changes nothing.
WAKE = Change("wake", Path())
EXIT_FORCED = 130
# How often files skipped because their workspace could not take records (read-only, deleted)
# are looked at again: one check per workspace, and nothing appended meanwhile is lost.
SKIPPED_RETRY_SECONDS = 2.0


class StartupError(PbotWatchError):
    """The service cannot start (state folder unusable, observer impossible); one line for the person."""


@dataclass
class Service:
    """The service's lifecycle; what to read when is ``schedule``'s, the status file ``reporter``'s."""

    settings: Settings
    extensions: Extensions = field(default_factory=Extensions)
    context: ServiceContext | None = None

    should_exit: bool = False

    def __post_init__(self) -> None:
        settings = self.settings
        self.context = self.context or ServiceContext(settings)
        self.changes: queue.SimpleQueue[Change] = queue.SimpleQueue()
        self.lock = InstanceLock(settings.state_dir)
        self.started = time.time()
        self.progress_at = self.started
        self.activity: Activity = "starting"
        self.last_reconcile: float | None = None
        self.schedule = ReadSchedule(settings.debounce_seconds)
        self.reporter = StatusReporter(
            self, settings.state_dir, settings.archive, self.extensions.status_providers
        )
        self.idle = IdleClock(self.extensions.idle_worker, settings.idle_seconds, self.reporter.error)
        self.listeners = ListenerThread(self.extensions.listeners, self.reporter.error)
        self.state: StateStore | None = None
        self.tailer: Tailer | None = None
        self.watcher: Watcher | None = None
        self._snapshot: Snapshot = {}
        self.catch_up: CatchUp | None = None
        self.legacy_imported: int | None = None
        self._next_reconcile = 0.0
        self._next_skipped_retry = 0.0

    # ---- entry point -----------------------------------------------------------------------
    def run(self) -> None:
        """Run until a signal or ``should_exit``; raises ``AlreadyRunning`` when another instance runs."""
        with self.capture_signals():
            self.startup()
            try:
                self.main_loop()
            finally:
                self.shutdown()

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Install flag-setting handlers for SIGINT/SIGTERM; restore the old ones afterwards."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:  # noqa: ARG002 - signal API
        """The first signal asks for a clean stop; a second Ctrl-C leaves from the handler itself.

        uvicorn sets a ``force_exit`` flag instead; here nothing could look at it in time, as the
        consumer may be inside one long read (seconds for a large session) with no tick.
        """
        if self.should_exit and sig == signal.SIGINT:
            # The second Ctrl-C: the person wants out now. Cursors are only ever written after
            # their records, so leaving mid-batch loses nothing.
            os.write(2, b"pbot-watch: forced exit\n")
            os._exit(EXIT_FORCED)
        self.should_exit = True
        # The consumer may be waiting on the change queue; a handler run inside that wait has
        # been seen to leave it waiting (a stop ignored for 15 s on a loaded machine, with every
        # other thread idle). A change put from another thread ends the wait for sure. Not put
        # from here: the handler may run while this thread holds the queue's lock.
        threading.Thread(target=self.changes.put, args=(WAKE,), name="pbot-wake", daemon=True).start()

    # ---- startup -----------------------------------------------------------------------------
    def startup(self) -> None:
        settings = self.settings
        try:
            self.lock.acquire()
        except OSError as error:
            raise StartupError(f"cannot use the state folder {settings.state_dir}: {error}") from error
        try:
            try:
                # Never fails on the database itself: it degrades to memory (see StateStore).
                self.state = StateStore(settings.state_dir, on_error=self.reporter.error)
            except SQLiteTooOld as error:
                raise StartupError(str(error)) from error
            for warning in self.state.warnings:
                self.reporter.warn(warning)
            store = ArchiveWriter(
                central=settings.archive,
                include=tuple(settings.include),
                exclude=tuple(settings.exclude),
                provenance=(settings.machine, settings.user),
                fresh=self.context.fresh if self.context is not None else None,
            )
            self.tailer = Tailer(
                store,
                self.state,
                settings.max_sessions_in_memory,
                self.listeners.written,
                self.reporter.error,
                on_progress=self.progressed,
                on_entries=self._entries_read if self.extensions.followers else None,
                on_touched=self._touched,
            )
            for follower in self._building():
                follower.on_ready = self._wake
                follower.on_error = self.reporter.error
            self.listeners.start()
            for companion in self.extensions.companions:
                companion.start()
            self.watcher = Watcher(settings.sessions, self.changes, settings.poll, settings.poll_seconds)
            self.watcher.start()
        except BaseException:
            self.lock.release()
            raise
        log.info(
            "service_started",
            pid=os.getpid(),
            version=__version__,
            roots=[str(r) for r in settings.sessions],
            archive=str(settings.archive) if settings.archive else None,
            state=str(settings.state_dir),
            migrations=self.state.applied,
            allocator=allocator.current(),
        )
        self._import_legacy(store)
        self.reporter.write()
        self.reporter.start_heartbeat()
        # The start scan: every file whose stat and fingerprints match its cursor is left alone.
        skipped: list[str] = []
        self._snapshot = scan(settings.sessions, skipped)
        for warning in skipped:  # said once, at start: every rescan would repeat it
            log.warning("session_warning", message=warning)
        todo = self.tailer.startup_paths(self._snapshot, Scope.of(settings).excludes)
        now = time.monotonic()
        for path in todo:
            self.schedule.mark_overdue(path, now)
        self.catch_up = CatchUp(
            {path: self._snapshot[path].size for path in todo},
            memory=self._memory_backlog(todo),
            searchable=lambda: self.listeners.backlog == 0 and not self._memory_pending(),
        )
        self.last_reconcile = time.time()
        self._next_reconcile = now + settings.reconcile_seconds
        log.info(
            "start_scan_finished", files=len(self._snapshot), to_read=len(todo), known=len(self.tailer.known)
        )
        self.activity = "busy" if todo or self.catch_up.pending else "idle"

    def _import_legacy(self, store: ArchiveWriter) -> None:
        """personal-bot's old user-level records, copied into their workspaces before any is indexed."""
        folders = legacy_folders(self.settings.sessions)
        if not folders:
            return
        report = import_legacy(folders, store)
        self.legacy_imported = report.imported
        for path, session_id in report.imported_paths:
            self.listeners.written(path, session_id)
        for warning in report.warnings:
            if self.reporter.warn(warning):
                log.warning("legacy_warning", message=warning)
        log.info("legacy_imported", folders=[str(f) for f in folders], records=report.imported)

    def _memory_backlog(self, todo: list[Path]) -> dict[Path, int]:
        """Session files the start scan will not read whose raw memory is missing or stale, newest first.

        Their records are current, so only raw memory reads them (``EntriesFollower.sync``),
        after the files that changed: a first start after an upgrade makes every session
        searchable in raw memory too, without re-reading a byte for the records.
        """
        assert self.tailer is not None
        reading = set(todo)
        stamps = {
            path: FileStamp(stat.ino, stat.size, stat.mtime_ns)
            for path, stat in self._snapshot.items()
            if path not in reading
            and not ((known := self.tailer.known.get(path)) is not None and known.session_id is None)
        }
        stale: set[Path] = set()
        for follower in self.extensions.followers:
            try:
                stale.update(follower.stale(stamps))
            except Exception as error:  # a follower's bug must not stop the service
                log.exception("entries_follower_failed", follower=type(follower).__name__)
                self.reporter.error(f"{type(follower).__name__} cannot list what it lacks: {error!r}")
        newest = sorted(stale, key=lambda path: (-self._snapshot[path].mtime_ns, path))
        return {path: self._snapshot[path].size for path in newest}

    def _entries_read(self, read: EntriesRead) -> None:
        """The entries of one read, to every follower (raw memory) before the record is written."""
        for follower in self.extensions.followers:
            try:
                follower(read)
            except Exception as error:  # the record is written all the same
                log.exception(
                    "entries_follower_failed", follower=type(follower).__name__, path=str(read.path)
                )
                self.reporter.error(f"{type(follower).__name__} failed on {read.path}: {error!r}")

    def _touched(self, path: Path, before: FileStamp, after: FileStamp) -> None:
        """A file found unchanged under a new mtime (a ``touch``): the followers take the new stamp."""
        for follower in self.extensions.followers:
            if not isinstance(follower, TouchedFollower):
                continue
            try:
                follower.touched(path, before, after)
            except Exception as error:  # at worst the follower reads the file again
                log.exception("entries_follower_failed", follower=type(follower).__name__, path=str(path))
                self.reporter.error(f"{type(follower).__name__} failed on {path}: {error!r}")

    def _wake(self) -> None:
        """A follower has work ready for the reading thread (from another thread): end its wait."""
        self.changes.put(WAKE)

    def _building(self) -> list[BuildingFollower]:
        """The followers that finish their work on the reading thread (raw memory's build worker)."""
        return [f for f in self.extensions.followers if isinstance(f, BuildingFollower)]

    def _memory_pending(self) -> int:
        """Files the followers (raw memory's build worker) have not made searchable yet."""
        return sum(follower.pending() for follower in self._building())

    def _collect_memory(self) -> None:
        """Store what raw memory's build worker made, for at most a batch's time: reads come first."""
        deadline = time.monotonic() + BATCH_SECONDS
        for follower in self._building():
            try:
                stored = follower.collect(deadline)
            except Exception as error:  # a follower's bug must not stop the service
                log.exception("entries_follower_failed", follower=type(follower).__name__)
                self.reporter.error(f"{type(follower).__name__} failed to store a build: {error!r}")
                continue
            if stored:
                self.progressed()
                self.reporter.changed()

    def _read_for_memory(self) -> None:
        """Files only raw memory lacks, read a batch at a time once no change waits, newest first."""
        if self.catch_up is None or self.catch_up.finished is not None:
            return
        due = self.catch_up.memory_due()
        if due and not self.schedule.busy:
            deadline = time.monotonic() + BATCH_SECONDS
            for path in due:
                for follower in self.extensions.followers:
                    try:
                        follower.sync(path)
                    except Exception as error:
                        log.exception(
                            "entries_follower_failed", follower=type(follower).__name__, path=str(path)
                        )
                        self.reporter.error(f"{type(follower).__name__} failed on {path}: {error!r}")
                self.catch_up.done([path])
                self.progressed()
                self.reporter.changed()
                if self.should_exit or time.monotonic() > deadline:
                    break
        if self.catch_up.check():
            self._caught_up()

    # ---- main loop ---------------------------------------------------------------------------
    def main_loop(self) -> None:
        while not self.should_exit:
            self.drain(self.schedule.wait_seconds(time.monotonic(), TICK_SECONDS))
            if self.should_exit:
                break
            self.on_tick()

    def drain(self, timeout: float) -> None:
        """Move queued changes into the schedule (waiting up to ``timeout`` for the first one)."""
        try:
            change = self.changes.get(timeout=timeout) if timeout > 0 else self.changes.get_nowait()
        except queue.Empty:
            return
        while True:
            self._accept(change)
            try:
                change = self.changes.get_nowait()
            except queue.Empty:
                return

    def _accept(self, change: Change) -> None:
        assert self.tailer is not None
        now = time.monotonic()
        if change.kind == "file":
            self.schedule.mark(change.path, now)
            if change.path in self.tailer.known or change.path in self.tailer.indexer.files:
                # A write to a session we follow: the person is active (cancel idle work now).
                self.idle.activity(now)
        elif change.kind == "wake":
            return
        elif change.kind == "folder":
            # A new (or moved-in) folder: its files may predate the watch on it.
            if change.path.is_symlink() and self.watcher is not None:
                self.watcher.refresh_links()  # watched where it points
            for path in scan([change.path]):
                self.schedule.mark(path, now)
        else:
            for path in [p for p in self.tailer.known if p.is_relative_to(change.path)]:
                self.schedule.mark(path, now)

    def progressed(self) -> None:
        """The consumer did a step of work (status tells a busy service from a stuck one by this)."""
        self.progress_at = time.time()

    def on_tick(self) -> None:
        assert self.watcher is not None
        self.progressed()
        self.check_lock()
        now = time.monotonic()
        self.process_due(now)
        appeared, vanished = self.watcher.check()
        for root in appeared:
            self.reporter.changed()
            for path in scan([root]):
                self.schedule.mark(path, now)
        for root in vanished:
            self.reporter.changed()
            self._accept(Change("folder-gone", root))
        self._collect_memory()
        self._read_for_memory()
        if now >= self._next_reconcile:
            self.reconcile()
        if now >= self._next_skipped_retry:
            self._next_skipped_retry = now + SKIPPED_RETRY_SECONDS
            for path in self.tailer.skipped_ready() if self.tailer is not None else ():
                self.schedule.mark_overdue(path, now)
        assert self.state is not None
        self.state.retry()
        if self.catch_up is None or self.catch_up.finished is not None:
            # Idle work waits for the start's catch-up: summaries read and rewrite records, and
            # each rewrite is indexed again. On a first run over 634 MB they started after the
            # default 30 s, mid catch-up: caught up took 108 s instead of about 75, the service
            # 85 s of CPU instead of about 45, and its RSS reached 369 MB.
            self.idle.tick(time.monotonic())
        for companion in self.extensions.companions:
            companion.check()
        self.activity = "busy" if self.schedule.busy else "idle"
        self.reporter.maybe_write()

    def check_lock(self) -> None:
        """The state folder (or its lock file) deleted while running: lock it again, at once.

        Without this, ``status`` found no lock and no status file and said "not running", and a
        second ``run`` started beside this one. Cursors already saved are in the deleted
        database: the next start reads every file again and finds its record unchanged.
        """
        try:
            if self.lock.still_held():
                return
        except AlreadyRunning as error:
            log.error("lock_lost", error=str(error))  # noqa: TRY400 - a state, no traceback
            self.reporter.error(f"the state folder was removed and another service took it over: {error}")
            self.should_exit = True  # two services would write the same records
            return
        except OSError as error:
            if self.reporter.warn(f"cannot lock {self.lock.path} again: {error}"):
                log.warning("lock_not_retaken", error=str(error))
            return
        log.warning(
            "lock_retaken", path=str(self.lock.path), reason="the lock file or state folder was removed"
        )
        self.reporter.warn(f"{self.lock.path} was removed while running; locked again")
        self.reporter.write()

    def process_due(self, now: float) -> None:
        due = self.schedule.due(now)
        if not due:
            return
        self.listeners.reader_busy(True)
        try:
            self._process(due)
        finally:
            self.listeners.reader_busy(False)

    def _process(self, due: list[Path]) -> None:
        deadline = time.monotonic() + BATCH_SECONDS
        for batch in batches(self._in_order(due)):
            if self.should_exit:
                break
            self.schedule.take(batch)
            self._sync(batch)
            if self._catching_up() or time.monotonic() > deadline:
                # Back to the loop: what was appended meanwhile is read before the rest, and
                # status shows the progress. While catching up that is after every batch, so a
                # first run over a long history never keeps a person's new message waiting.
                break

    def _catching_up(self) -> dict[Path, int]:
        """Files the start scan found changed and not yet read to their end (path: size)."""
        return self.catch_up.pending if self.catch_up is not None else {}

    def _in_order(self, due: list[Path]) -> list[Path]:
        """Appends first (someone is writing there now), the smallest first, then the start
        scan's files newest first.

        On a first run the sessions modified last are the ones a person looks for: they become
        searchable within seconds, the years-old ones after them. Among appends, a person's
        next message (a few KB) is not kept waiting behind a new file holding a pasted 50 MB log
        (seconds of decoding and redaction), and ``batches`` gives such a read a batch of its own.
        """
        catching_up = self._catching_up()
        assert self.tailer is not None
        known = self.tailer.known

        def key(path: Path) -> tuple[int, int]:
            if path not in catching_up:
                state = known.get(path)
                try:
                    size = os.stat(path).st_size
                except OSError:
                    return (0, 0)  # gone or unreadable: the read says so, at no cost
                return (0, size - state.cursor.offset if state is not None else size)
            stat = self._snapshot.get(path)
            return (1, -stat.mtime_ns if stat is not None else 0)

        return sorted(due, key=key)

    def _sync(self, paths: list[Path]) -> None:
        assert self.tailer is not None
        assert self.context is not None
        with self.context.records_lock:
            report = self.tailer.sync(paths, catching_up=self._catching_up())
        now = time.monotonic()
        for path in report.more:
            self.schedule.mark_overdue(path, now)
        if self.catch_up is not None and self.catch_up.done(p for p in paths if p not in report.more):
            self._caught_up()
        if report.appended:
            self.idle.activity(now)
        self.schedule.finished(paths, report.failed, now)
        for warning in report.warnings:
            if self.reporter.warn(warning):
                log.warning("session_warning", message=warning)
        if report.changed_state:
            self.reporter.changed()
        self.progressed()

    def _caught_up(self) -> None:
        """One summary line for the start scan, as ``pbot-watch index`` prints one per pass."""
        assert self.tailer is not None
        release_free_memory()
        if self.legacy_imported is not None:
            # The records of sessions the start scan did not rewrite (their files are gone).
            sessions = {k.session_id for k in self.tailer.known.values() if k.session_id is not None}
            cleaned = drop_legacy_fields(self.tailer.store, self.tailer.store.folders(), sessions)
            for warning in cleaned.warnings:
                self.reporter.warn(warning)
        counters = self.tailer.counters
        log.info(
            "caught_up",
            files=len(self.tailer.known),
            sessions=self.tailer.sessions,
            records_written=counters.records_written,
            records_unchanged=counters.records_unchanged,
            bytes_parsed=counters.bytes_parsed_total,
            seconds=round(time.time() - self.started, 2),
        )
        if sys.stderr.isatty():  # a person started it: one plain line beside the log
            written = plural(counters.records_written, "record")
            sys.stderr.write(
                f"pbot-watch: indexed {plural(self.tailer.sessions, 'session')} ({written} written), following them; Ctrl-C stops\n"
            )
            sys.stderr.flush()

    def reconcile(self) -> None:
        """The periodic rescan: anything that changed without an event is looked at again."""
        started = time.monotonic()
        if self.watcher is not None:
            self.watcher.refresh_links()  # a symlinked folder retargeted or removed unseen
        snapshot = scan(self.settings.sessions)
        changes = diff(self._snapshot, snapshot)
        self._snapshot = snapshot
        now = time.monotonic()
        for path in changes.changed + changes.deleted:
            self.schedule.mark_overdue(path, now)
        self.last_reconcile = time.time()
        self._next_reconcile = now + self.settings.reconcile_seconds
        log.info(
            "reconcile_finished",
            files=len(snapshot),
            created=len(changes.created),
            modified=len(changes.modified),
            deleted=len(changes.deleted),
            seconds=round(now - started, 3),
        )

    # ---- shutdown ----------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop within a second or two: cancel idle work, stop the observer, final status, unlock."""
        self.activity = "stopping"
        log.info("service_stopping", pending=self.schedule.pending)
        if not self.idle.stop(SHUTDOWN_SECONDS):
            log.warning(
                "idle_worker_abandoned", worker=self.idle.worker.name, waited_seconds=SHUTDOWN_SECONDS
            )
        if self.watcher is not None:
            self.watcher.stop(SHUTDOWN_SECONDS)
        if not self.listeners.stop(SHUTDOWN_SECONDS):
            log.warning("record_listeners_abandoned", waited_seconds=SHUTDOWN_SECONDS)
        for follower in self._building():
            follower.close()  # raw memory's build worker; a file half built is built at the next start
        for companion in self.extensions.companions:
            companion.close()  # the warm query server: before the lock, which guards its socket
        self.reporter.stop_heartbeat(SHUTDOWN_SECONDS)
        self.reporter.write(running=False)
        if self.state is not None:
            self.state.close()
        self.lock.release()
        log.info("service_stopped")
