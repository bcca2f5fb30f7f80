"""The service: startup, a main loop with a short tick, shutdown (the shape of uvicorn's ``Server``).

One thread does all the reading and writing (the "consumer", the main thread): it drains the
watcher's queue, waits out each file's debounce, calls the tailer, runs reconcile scans, ticks
the idle clock and writes the status file. The observer thread only enqueues; the idle worker
runs on its own thread. Signal handlers only set flags, so a stop request is seen within one
tick (or one batch, which is bounded in time); a second Ctrl-C exits at once.
"""

from __future__ import annotations

import fnmatch
import os
import queue
import signal
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import structlog

from pbot_watch import __version__
from pbot_watch.config import Settings
from pbot_watch.service.hooks import SUMMARIES, Extensions, ServiceContext
from pbot_watch.service.idle import IdleClock
from pbot_watch.service.lock import InstanceLock
from pbot_watch.service.memory import release_free_memory
from pbot_watch.service.snapshot import Snapshot, diff, scan
from pbot_watch.service.state import StateStore
from pbot_watch.service.status import (
    HEARTBEAT_SECONDS,
    MAX_ERRORS,
    MAX_WARNINGS,
    ErrorInfo,
    ObserverInfo,
    Status,
    iso,
    write_status,
)
from pbot_watch.service.tail import ArchiveWriter, Tailer
from pbot_watch.service.watch import Change, Watcher

log = structlog.get_logger("pbot_watch.service")

TICK_SECONDS = 0.1
# A file appended to without pause is still read at least this often (debounce is per quiet gap).
MAX_DEBOUNCE_DELAY = 0.5
# One batch of reads stops after this long so heartbeats and stop requests stay timely.
BATCH_SECONDS = 0.5
CHUNK_FILES = 32
CHUNK_BYTES = 4 << 20
RETRY_SECONDS = (1, 5, 30, 120)
SHUTDOWN_SECONDS = 1.0
EXIT_FORCED = 130


def _chunks(paths: list[Path]) -> Iterator[list[Path]]:
    """Batches of at most CHUNK_FILES files or about CHUNK_BYTES of them.

    One batch is one SQLite commit, so batches amortise the fsync over many small files; the
    byte bound keeps a batch short (a stop request is seen between batches).
    """
    chunk: list[Path] = []
    size = 0
    for path in paths:
        with suppress(OSError):
            size += os.stat(path).st_size
        chunk.append(path)
        if len(chunk) >= CHUNK_FILES or size >= CHUNK_BYTES:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


class StartupError(Exception):
    """The service cannot start (state folder unusable, observer impossible); one line for the person."""


@dataclass
class _Pending:
    first: float
    last: float


@dataclass
class _Retry:
    due: float
    attempts: int


@dataclass
class Server:
    settings: Settings
    extensions: Extensions = field(default_factory=Extensions)
    context: ServiceContext | None = None

    should_exit: bool = False
    force_exit: bool = False

    def __post_init__(self) -> None:
        self.context = self.context or ServiceContext(self.settings)
        self.changes: queue.SimpleQueue[Change] = queue.SimpleQueue()
        self.lock = InstanceLock(self.settings.state_dir)
        self.pending: dict[Path, _Pending] = {}
        self.retries: dict[Path, _Retry] = {}
        self.errors: deque[ErrorInfo] = deque(maxlen=MAX_ERRORS)
        self.warnings: dict[str, None] = {}
        self.started = time.time()
        self.activity = "starting"
        self.last_reconcile: float | None = None
        self._snapshot: Snapshot = {}
        self._catching_up: set[Path] = set()
        self._next_reconcile = 0.0
        self._status_due = 0.0
        self._status_dirty = True
        self.state: StateStore | None = None
        self._status_lock = threading.Lock()
        self._last_status: Status | None = None
        self._last_write = 0.0
        self._heartbeat_stop = threading.Event()
        self._heartbeat_thread = threading.Thread(target=self._heartbeat, name="pbot-heartbeat", daemon=True)
        self.tailer: Tailer | None = None
        self.watcher: Watcher | None = None
        self.idle = IdleClock(self.extensions.idle_worker, self.settings.idle_seconds, self.record_error)

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
        if self.should_exit and sig == signal.SIGINT:
            # The second Ctrl-C: the person wants out now. Cursors are only ever written after
            # their records, so leaving mid-batch loses nothing.
            os.write(2, b"pbot-watch: forced exit\n")
            os._exit(EXIT_FORCED)
        self.should_exit = True

    # ---- startup -----------------------------------------------------------------------------
    def startup(self) -> None:
        settings = self.settings
        try:
            self.lock.acquire()
        except OSError as error:
            raise StartupError(f"cannot use the state folder {settings.state_dir}: {error}") from error
        try:
            try:
                self.state = StateStore(settings.state_dir)
            except (OSError, sqlite3.Error) as error:
                raise StartupError(
                    f"cannot open the service state in {settings.state_dir}: {error} (deleting"
                    " state.sqlite3 there is safe: the next start re-reads every session file"
                    " and rewrites only records that differ)"
                ) from error
            store = ArchiveWriter(
                central=settings.archive, include=tuple(settings.include), exclude=tuple(settings.exclude)
            )
            self.tailer = Tailer(
                store,
                self.state,
                settings.max_sessions_in_memory,
                self.extensions.listeners,
                self.record_error,
            )
            self.watcher = Watcher(settings.sessions, self.changes, settings.poll, settings.poll_seconds)
            self.watcher.start()
        except BaseException:
            self.lock.release()
            raise
        log.info(
            "service started",
            pid=os.getpid(),
            version=__version__,
            roots=[str(r) for r in settings.sessions],
            archive=str(settings.archive) if settings.archive else None,
            state=str(settings.state_dir),
            migrations=self.state.applied,
            allocator=os.environ.get("PYTHONMALLOC", "pymalloc"),
        )
        self.write_status()
        self._heartbeat_thread.start()
        # The start scan: every file whose stat and fingerprints match its cursor is left alone.
        self._snapshot = scan(settings.sessions)
        todo = self.tailer.startup_paths(self._snapshot, self._excluded)
        now = time.monotonic()
        for path in todo:
            self.pending[path] = _Pending(now - MAX_DEBOUNCE_DELAY, now - MAX_DEBOUNCE_DELAY)
        self._catching_up = set(todo)
        self.last_reconcile = time.time()
        self._next_reconcile = now + settings.reconcile_seconds
        log.info("start scan", files=len(self._snapshot), to_read=len(todo), known=len(self.tailer.known))
        self.activity = "busy" if todo else "idle"

    def _excluded(self, workspace: str) -> bool:
        settings = self.settings
        if settings.include and not any(fnmatch.fnmatchcase(workspace, p) for p in settings.include):
            return True
        return any(fnmatch.fnmatchcase(workspace, p) for p in settings.exclude)

    # ---- main loop ---------------------------------------------------------------------------
    def main_loop(self) -> None:
        while not self.should_exit:
            self.drain(self._wait_seconds())
            if self.should_exit:
                break
            self.on_tick()

    def _wait_seconds(self) -> float:
        if not self.pending:
            return TICK_SECONDS
        now = time.monotonic()
        soonest = min(self._due(p) for p in self.pending.values())
        return max(0.0, min(TICK_SECONDS, soonest - now))

    def _due(self, pending: _Pending) -> float:
        return min(pending.last + self.settings.debounce_seconds, pending.first + MAX_DEBOUNCE_DELAY)

    def drain(self, timeout: float) -> None:
        """Move queued changes into ``pending`` (waiting up to ``timeout`` for the first one)."""
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
            self._mark(change.path, now)
            if change.path in self.tailer.known or change.path in self.tailer.indexer.files:
                # A write to a session we follow: the person is active (cancel idle work now).
                self.idle.activity(now)
        elif change.kind == "folder":
            # A new (or moved-in) folder: its files may predate the watch on it.
            for path in scan([change.path]):
                self._mark(path, now)
        else:
            for path in [p for p in self.tailer.known if p.is_relative_to(change.path)]:
                self._mark(path, now)

    def _mark(self, path: Path, now: float) -> None:
        pending = self.pending.get(path)
        if pending is None:
            self.pending[path] = _Pending(now, now)
        else:
            pending.last = now

    def on_tick(self) -> None:
        assert self.watcher is not None
        now = time.monotonic()
        self.process_due(now)
        appeared, vanished = self.watcher.check()
        for root in appeared:
            self._status_dirty = True
            for path in scan([root]):
                self._mark(path, now)
        for root in vanished:
            self._status_dirty = True
            self._accept(Change("folder-gone", root))
        if now >= self._next_reconcile:
            self.reconcile()
        self.idle.tick(time.monotonic())
        # A file that keeps failing (unreadable, workspace full) is retried but is not "busy".
        self.activity = "busy" if self.pending else "idle"
        self.maybe_write_status()

    def process_due(self, now: float) -> None:
        assert self.tailer is not None
        due = [p for p, pending in self.pending.items() if self._due(pending) <= now]
        due += [p for p, retry in self.retries.items() if retry.due <= now and p not in self.pending]
        if not due:
            return
        due.sort()
        deadline = time.monotonic() + BATCH_SECONDS
        for chunk in _chunks(due):
            if self.should_exit:
                break
            for path in chunk:
                self.pending.pop(path, None)
            self._sync(chunk)
            if time.monotonic() > deadline:
                self.maybe_write_status()
                deadline = time.monotonic() + BATCH_SECONDS

    def _sync(self, paths: list[Path]) -> None:
        assert self.tailer is not None
        assert self.context is not None
        with self.context.records_lock:
            report = self.tailer.sync(paths, catching_up=self._catching_up)
        if self._catching_up:
            self._catching_up.difference_update(paths)
            if not self._catching_up:
                self._caught_up()
        now = time.monotonic()
        if report.appended:
            self.idle.activity(now)
        for path in paths:
            if path in report.failed:
                retry = self.retries.get(path)
                attempts = retry.attempts + 1 if retry else 1
                delay = RETRY_SECONDS[min(attempts, len(RETRY_SECONDS)) - 1]
                self.retries[path] = _Retry(now + delay, attempts)
            else:
                self.retries.pop(path, None)
        for warning in report.warnings:
            self.warn(warning)
        if report.changed_state:
            self._status_dirty = True

    def _caught_up(self) -> None:
        """One summary line for the start scan, as ``pbot-watch index`` prints one per pass."""
        assert self.tailer is not None
        release_free_memory()
        counters = self.tailer.counters
        log.info(
            "caught up",
            files=len(self.tailer.known),
            sessions=self.tailer.sessions,
            records_written=counters.records_written,
            records_unchanged=counters.records_unchanged,
            bytes_parsed=counters.bytes_parsed_total,
            seconds=round(time.time() - self.started, 2),
        )

    def reconcile(self) -> None:
        """The periodic rescan: anything that changed without an event is looked at again."""
        started = time.monotonic()
        snapshot = scan(self.settings.sessions)
        changes = diff(self._snapshot, snapshot)
        self._snapshot = snapshot
        now = time.monotonic()
        for path in changes.changed + changes.deleted:
            self._mark(path, now - MAX_DEBOUNCE_DELAY)
        self.last_reconcile = time.time()
        self._next_reconcile = now + self.settings.reconcile_seconds
        log.info(
            "reconcile",
            files=len(snapshot),
            created=len(changes.created),
            modified=len(changes.modified),
            deleted=len(changes.deleted),
            seconds=round(now - started, 3),
        )

    # ---- errors, warnings, status ------------------------------------------------------------
    def record_error(self, message: str) -> None:
        log.error("error", message=message)
        self.errors.append(ErrorInfo(time=iso(time.time()), message=message))
        self._status_dirty = True

    def warn(self, message: str) -> None:
        if message in self.warnings:
            return
        log.warning("warning", message=message)
        self.warnings[message] = None
        while len(self.warnings) > MAX_WARNINGS:
            del self.warnings[next(iter(self.warnings))]
        self._status_dirty = True

    def maybe_write_status(self) -> None:
        now = time.monotonic()
        if self._status_dirty or now >= self._status_due:
            self.write_status()

    def build_status(self, *, running: bool = True) -> Status:
        now = time.time()
        tailer, watcher = self.tailer, self.watcher
        counters = tailer.counters if tailer else None
        summaries: dict[str, object] = {}
        extensions: dict[str, dict[str, object]] = {}
        for name, provider in self.extensions.status_providers.items():
            try:
                value = provider()
            except Exception as error:  # noqa: BLE001 - a provider's bug shows in status, not as a crash
                value = {"error": repr(error)}
            if name == SUMMARIES:
                summaries = value
            else:
                extensions[name] = value
        return Status(
            running=running,
            pid=os.getpid(),
            version=__version__,
            started=iso(self.started),
            uptime_seconds=round(now - self.started, 1),
            heartbeat=iso(now),
            heartbeat_epoch=now,
            heartbeat_seconds=HEARTBEAT_SECONDS,
            observer=watcher.info if watcher else ObserverInfo(kind="none", reason=None),
            roots=watcher.root_info() if watcher else [],
            archive=str(self.settings.archive) if self.settings.archive else None,
            files_tracked=len(tailer.known) if tailer else 0,
            files_in_memory=tailer.in_memory if tailer else 0,
            sessions_tracked=tailer.sessions if tailer else 0,
            workspaces_written=sorted(counters.workspaces_written)[:200] if counters else [],
            records_written=counters.records_written if counters else 0,
            records_unchanged=counters.records_unchanged if counters else 0,
            bytes_parsed_total=counters.bytes_parsed_total if counters else 0,
            bytes_parsed_last_append=counters.bytes_parsed_last_append if counters else 0,
            last_append=iso(counters.last_append) if counters and counters.last_append else None,
            last_append_path=str(counters.last_append_path)
            if counters and counters.last_append_path
            else None,
            last_reconcile=iso(self.last_reconcile) if self.last_reconcile else None,
            activity=self.activity if running else "stopped",  # type: ignore[arg-type]
            pending_files=len(self.pending),
            retrying_files=len(self.retries),
            idle_worker=self.idle.info(),
            summaries=summaries,
            extensions=extensions,
            errors=list(self.errors),
            warnings=list(self.warnings),
        )

    def write_status(self, *, running: bool = True) -> None:
        status = self.build_status(running=running)
        with self._status_lock:
            self._write(status)
            self._last_status = status if running else None
        self._status_dirty = False
        self._status_due = time.monotonic() + HEARTBEAT_SECONDS

    def _write(self, status: Status) -> None:
        try:
            write_status(self.settings.state_dir, status)
        except OSError as error:
            log.error("status_write_failed", error=str(error))  # noqa: TRY400 - expected (disk full), no traceback
        self._last_write = time.monotonic()

    def _heartbeat(self) -> None:
        """Keep the heartbeat fresh while the consumer is inside one long read.

        The first read of a very large session (about 7 s per 50 MB) runs without a tick; the
        status would look stale although the service is working. This thread rewrites the last
        status the consumer built, with a new heartbeat and uptime, only when the consumer has
        not written one for a beat; it never builds a status itself (that reads the consumer's
        state).
        """
        while not self._heartbeat_stop.wait(HEARTBEAT_SECONDS / 2):
            with self._status_lock:
                last = self._last_status
                if last is None or time.monotonic() - self._last_write < HEARTBEAT_SECONDS:
                    continue
                now = time.time()
                self._write(
                    last.model_copy(
                        update={
                            "heartbeat": iso(now),
                            "heartbeat_epoch": now,
                            "uptime_seconds": round(now - self.started, 1),
                            "activity": "busy",
                        }
                    )
                )

    # ---- shutdown ----------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop within a second or two: cancel idle work, stop the observer, final status, unlock."""
        self.activity = "stopping"
        log.info("stopping", pending=len(self.pending))
        if not self.idle.stop(SHUTDOWN_SECONDS):
            log.warning("idle worker did not stop in time; abandoning it", worker=self.idle.worker.name)
        if self.watcher is not None:
            self.watcher.stop(SHUTDOWN_SECONDS)
        self._heartbeat_stop.set()
        if self._heartbeat_thread.is_alive():
            self._heartbeat_thread.join(SHUTDOWN_SECONDS)
        self.write_status(running=False)
        if self.state is not None:
            self.state.close()
        self.lock.release()
        log.info("service stopped")
