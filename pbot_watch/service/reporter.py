"""The status file as the running service keeps it: built from its parts, rewritten on a heartbeat.

``StatusReporter`` owns everything between the service and ``status.json``: the errors and
warnings status shows, when the file is due again (at once after a visible change, otherwise
every ``HEARTBEAT_SECONDS``), and a heartbeat thread that keeps the file fresh while the
service's one consumer thread is inside a long read. The model and the file format are in
``status``; this module is only for ``pbot-watch run``.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import structlog

from pbot_watch import __version__
from pbot_watch.service.catchup import CatchUp
from pbot_watch.service.hooks import SUMMARIES, StatusProvider
from pbot_watch.service.idle import IdleClock
from pbot_watch.service.schedule import ReadSchedule
from pbot_watch.service.status import (
    MAX_ERRORS,
    MAX_WARNINGS,
    Activity,
    ErrorInfo,
    ObserverInfo,
    Status,
    iso,
    write_status,
)
from pbot_watch.service.status_file import HEARTBEAT_SECONDS

if TYPE_CHECKING:  # for the annotations only: they pull in the indexer, watchdog or SQLite
    from pbot_watch.service.listeners import ListenerThread
    from pbot_watch.service.state import StateStore
    from pbot_watch.service.tail import Tailer
    from pbot_watch.service.watch import Watcher

log = structlog.get_logger("pbot_watch.service")


class StatusSource(Protocol):
    """What the reporter reads from the service (``Service``) each time it builds a status."""

    started: float
    progress_at: float
    activity: Activity
    last_reconcile: float | None
    schedule: ReadSchedule
    catch_up: CatchUp | None
    idle: IdleClock
    tailer: Tailer | None
    watcher: Watcher | None
    state: StateStore | None
    listeners: ListenerThread
    legacy_imported: int | None


class StatusReporter:
    """Builds and writes ``status.json``; called on the consumer thread, except the heartbeat."""

    def __init__(
        self,
        service: StatusSource,
        state_dir: Path,
        archive: Path | None,
        providers: Mapping[str, StatusProvider],
    ) -> None:
        self.service = service
        self.state_dir = state_dir
        self.archive = archive
        self.providers = providers
        self.errors: deque[ErrorInfo] = deque(maxlen=MAX_ERRORS)
        self.warnings: dict[str, None] = {}
        self._dirty = True
        self._due = 0.0
        self._lock = threading.Lock()
        self._last: Status | None = None
        self._last_write = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._heartbeat, name="pbot-heartbeat", daemon=True)

    # ---- what status shows beyond the service's own parts ------------------------------------
    def error(self, message: str) -> None:
        """Keep ``message`` among the last errors; the caller has logged its own event."""
        self.errors.append(ErrorInfo(time=iso(time.time()), message=message))
        self._dirty = True

    def warn(self, message: str) -> bool:
        """Keep ``message`` among the warnings; ``True`` when it is new (and worth a log line)."""
        if message in self.warnings:
            return False
        self.warnings[message] = None
        while len(self.warnings) > MAX_WARNINGS:
            del self.warnings[next(iter(self.warnings))]
        self._dirty = True
        return True

    def changed(self) -> None:
        """Something status shows has changed: write at the next ``maybe_write``."""
        self._dirty = True

    # ---- writing -----------------------------------------------------------------------------
    def maybe_write(self) -> None:
        """Write if something changed or the heartbeat is due."""
        if self._dirty or time.monotonic() >= self._due:
            self.write()

    def write(self, *, running: bool = True) -> None:
        status = self.build(running=running)
        with self._lock:
            self._write(status)
            self._last = status if running else None
        self._dirty = False
        self._due = time.monotonic() + HEARTBEAT_SECONDS

    def _write(self, status: Status) -> None:
        try:
            write_status(self.state_dir, status)
        except OSError as error:
            log.error("status_write_failed", error=str(error))  # noqa: TRY400 - expected (disk full), no traceback
        self._last_write = time.monotonic()

    def build(self, *, running: bool = True) -> Status:
        service = self.service
        now = time.time()
        tailer, watcher = service.tailer, service.watcher
        counters = tailer.counters if tailer else None
        summaries: dict[str, object] = {}
        extensions: dict[str, dict[str, object]] = {}
        for name, provider in self.providers.items():
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
            started=iso(service.started),
            uptime_seconds=round(now - service.started, 1),
            heartbeat=iso(now),
            heartbeat_epoch=now,
            heartbeat_seconds=HEARTBEAT_SECONDS,
            progress_epoch=service.progress_at,
            working_on=tailer.working_on if tailer else None,
            observer=watcher.info if watcher else ObserverInfo(kind="none", reason=None),
            roots=watcher.root_info() if watcher else [],
            archive=str(self.archive) if self.archive else None,
            files_tracked=len(tailer.known) if tailer else 0,
            files_in_memory=tailer.in_memory if tailer else 0,
            sessions_tracked=tailer.sessions if tailer else 0,
            workspaces_written=sorted(counters.workspaces_written)[:200] if counters else [],
            records_written=counters.records_written if counters else 0,
            records_unchanged=counters.records_unchanged if counters else 0,
            legacy_imported=service.legacy_imported,
            bytes_parsed_total=counters.bytes_parsed_total if counters else 0,
            bytes_parsed_last_append=counters.bytes_parsed_last_append if counters else 0,
            last_append=iso(counters.last_append) if counters and counters.last_append else None,
            last_append_path=str(counters.last_append_path)
            if counters and counters.last_append_path
            else None,
            last_reconcile=iso(service.last_reconcile) if service.last_reconcile else None,
            activity=service.activity if running else "stopped",
            pending_files=service.schedule.pending,
            catch_up=service.catch_up.info(now) if service.catch_up is not None else None,
            retrying_files=service.schedule.retrying,
            listener_backlog=service.listeners.backlog,
            state_error=service.state.error if service.state else None,
            unsaved_cursors=service.state.unsaved if service.state else 0,
            idle_worker=service.idle.info(),
            summaries=summaries,
            extensions=extensions,
            errors=list(self.errors),
            warnings=list(self.warnings),
        )

    # ---- the heartbeat -----------------------------------------------------------------------
    def start_heartbeat(self) -> None:
        self._thread.start()

    def stop_heartbeat(self, timeout: float) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _heartbeat(self) -> None:
        """Keep the heartbeat fresh while the consumer is inside one long read.

        A long step (the first read of a very large session, a slow record listener) runs
        without a tick; the status would look stale although the service is working. This thread
        rewrites the last status the consumer built, with a new heartbeat and uptime, only when
        the consumer has not written one for a beat; it never builds a status itself (that reads
        the consumer's state). It also copies when the consumer last made progress and what it is
        on, so a consumer stuck in one call shows as stuck, not as running.
        """
        while not self._stop.wait(HEARTBEAT_SECONDS / 2):
            with self._lock:
                last = self._last
                if last is None or time.monotonic() - self._last_write < HEARTBEAT_SECONDS:
                    continue
                now = time.time()
                self._write(
                    last.model_copy(
                        update={
                            "heartbeat": iso(now),
                            "heartbeat_epoch": now,
                            "uptime_seconds": round(now - self.service.started, 1),
                            "activity": "busy",
                            "progress_epoch": self.service.progress_at,
                            "working_on": tailer.working_on if (tailer := self.service.tailer) else None,
                        }
                    )
                )
