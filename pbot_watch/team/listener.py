"""The service's side of the team index: push each written record soon, in batches, and catch up.

A ``RecordListener`` only queues the record's path (it runs on the listener thread, which the
search index also uses); a thread of its own pushes what is queued, a batch at a time, so a
record is in the team index a moment after it is written. At start, every ``CATCH_UP_SECONDS``
and after the server comes back, a catch-up pass pushes every record file that changed since
the ledger saw it: what was written while offline, what a stop left queued, and records that
arrived from another machine by git, Syncthing or rsync. Failures never stop the service: the
queue is kept, the pusher waits (doubling, up to a minute) and tries again; status says so.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from pbot_watch.config import Settings
from pbot_watch.team.dsn import TeamUnavailable, describe
from pbot_watch.team.gate import secret_gate
from pbot_watch.team.push import PushReport, TeamPusher, backoff

if TYPE_CHECKING:
    from pbot_watch.search.index import SearchIndex

log = structlog.get_logger("pbot_watch.team")

CATCH_UP_SECONDS = 30.0
MEMORY_SECONDS = 1.0
"""How often raw memory is looked at for new sources (``team.raw_memory``): a look that finds
nothing costs one read of raw memory's file stamps."""
BATCH_WAIT_SECONDS = 0.2
"""How long the pusher lets records gather after the first one is queued: one transaction
for a burst of writes, still well inside the few seconds a team search may lag behind."""


class TeamListener:
    """Queues written records and pushes them from its own thread; a status provider too."""

    def __init__(self, settings: Settings, dsn: str) -> None:
        self.settings = settings
        self.pusher = TeamPusher(settings, dsn, secret_gate())
        self.server = describe(dsn)
        self._queue: dict[Path, None] = {}
        self._wake = threading.Condition()
        self._stopping = False
        self._totals = PushReport()
        self._last_error: str | None = None
        self._last_push: float | None = None
        self._attempt = 0
        self._held = 0
        self._memory_pushed = 0
        self._index: SearchIndex | None = None
        self._thread = threading.Thread(target=self._run, name="pbot-team-push", daemon=True)
        self._thread.start()

    # ---- the listener and status ---------------------------------------------------------
    def __call__(self, record: Path, session_id: str) -> None:  # noqa: ARG002 - the listener's signature
        with self._wake:
            self._queue[record] = None
            self._wake.notify()

    def status(self) -> dict[str, Any]:
        with self._wake:
            pending = len(self._queue)
        out: dict[str, Any] = {
            "server": self.server,
            "connected": self._last_error is None and self._last_push is not None,
            "pushed": self._totals.pushed,
            "pending": pending,
            "held_back": self._held,
        }
        if self.settings.team.raw_memory:
            out["memory_pushed"] = self._memory_pushed
        if self._last_error:
            out["last_error"] = self._last_error
        return out

    def stop(self, timeout: float = 5.0) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify()
        self._thread.join(timeout)
        self.pusher.close()

    def wait_idle(self, timeout: float) -> bool:
        """Until nothing is queued and the last push succeeded (tests and benchmarks)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._wake:
                if not self._queue and self._last_error is None and self._last_push is not None:
                    return True
            time.sleep(0.05)
        return False

    # ---- the pushing thread ------------------------------------------------------------------
    def _run(self) -> None:
        from pbot_watch.team.access import local_folders  # noqa: PLC0415 - opens SQLite on this thread

        next_catch_up = next_memory = 0.0
        while True:
            with self._wake:
                if self._stopping:
                    self._close_index()
                    return
                wait = max(0.0, next_catch_up - time.monotonic())
                if self.settings.team.raw_memory:
                    wait = min(wait, max(0.0, next_memory - time.monotonic()))
                if not self._queue:
                    self._wake.wait(wait)
                if self._stopping:
                    self._close_index()
                    return
            if self._queue:
                time.sleep(BATCH_WAIT_SECONDS)
            paths: list[Path] = []
            try:
                if time.monotonic() >= next_catch_up:
                    self.pusher.folders = local_folders(self.settings)
                    self._count(self.pusher.catch_up())
                    next_catch_up = time.monotonic() + CATCH_UP_SECONDS
                with self._wake:
                    paths, self._queue = list(self._queue), {}
                if paths:
                    self._count(self._push(paths))
                if self.settings.team.raw_memory and time.monotonic() >= next_memory:
                    self._push_memory()
                    next_memory = time.monotonic() + MEMORY_SECONDS
                self._held = self.pusher.ledger().held()
                self._last_error = None
                self._last_push = time.monotonic()
                self._attempt = 0
            except TeamUnavailable as error:
                self._failed(str(error), paths)
                next_catch_up = 0.0  # back online: look for everything missed
            except Exception as error:  # a bug here must not stop the service's other work
                log.exception("team_push_failed")
                self._failed(f"team push failed: {error!r}", [])

    def _push_memory(self) -> None:
        if self._index is None:
            from pbot_watch.search.index import SearchIndex  # noqa: PLC0415 - opened on this thread

            self._index = SearchIndex(SearchIndex.default_path(self.settings.state_dir))
        report = self.pusher.push_memory(self._index)
        self._memory_pushed += report.pushed
        if report.pushed or report.removed:
            log.info(
                "team_memory_pushed", sources=report.pushed, removed=report.removed, held_back=report.held
            )

    def _close_index(self) -> None:
        index, self._index = self._index, None
        if index is not None:
            index.close()

    def _push(self, paths: list[Path]) -> PushReport:
        allowed_folders = {folder for folder, _ in self.pusher.folders}
        unknown = [p for p in paths if p.parent not in allowed_folders]
        if unknown:
            # A record folder met for the first time (a new workspace): learn it now.
            from pbot_watch.team.access import local_folders  # noqa: PLC0415

            self.pusher.folders = local_folders(self.settings)
        return self.pusher.push(paths)

    def _count(self, report: PushReport) -> None:
        self._totals.pushed += report.pushed
        self._totals.held_nodes += report.held_nodes
        self._totals.held_records += report.held_records
        if report.pushed:
            log.info("team_pushed", records=report.pushed, held_back=report.held_nodes + report.held_records)

    def _failed(self, message: str, paths: list[Path]) -> None:
        if message != self._last_error:
            log.warning("team_push_unavailable", error=message)
        self._last_error = message
        with self._wake:
            for path in paths:
                self._queue.setdefault(path, None)
        wait = backoff(self._attempt, self.settings.team.retry_seconds)
        self._attempt += 1
        with self._wake:
            self._wake.wait_for(lambda: self._stopping, wait)
