"""The idle clock: run the ``IdleWorker`` once the person has stopped appending, stop it when they resume.

The service tells the clock about every append it sees (``activity``) and ticks it from its
main loop. After ``idle_seconds`` of quiet the worker starts on its own thread; the next
``activity`` sets its cancel event at once, so a summary never competes with a live session.
The worker runs once per idle period: after it returns, it waits for activity and quiet again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

from pbot_watch.service.hooks import IdleWorker
from pbot_watch.summarize.base import describe_error

log = structlog.get_logger("pbot_watch.service")


class IdleClock:
    def __init__(
        self,
        worker: IdleWorker,
        idle_seconds: float,
        on_error: Callable[[str], None] | None = None,
        now: float | None = None,
    ) -> None:
        self.worker = worker
        self.idle_seconds = idle_seconds
        self.on_error = on_error
        self.last_activity = time.monotonic() if now is None else now
        self.runs = 0
        self.cancelled = 0
        self.last_error: str | None = None
        self._armed = True  # a period of quiet after start counts as idle
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def idle(self, now: float) -> bool:
        return now - self.last_activity >= self.idle_seconds

    def activity(self, now: float) -> None:
        """An append was seen: reset the clock and cancel a running worker now."""
        self.last_activity = now
        self._armed = True
        if self.running and not self._cancel.is_set():
            self._cancel.set()
            self.cancelled += 1
            log.info("idle_work_cancelled", worker=self.worker.name, reason="append seen")

    def tick(self, now: float) -> None:
        if self._armed and not self.running and self.idle(now):
            self._armed = False
            self._cancel = threading.Event()
            self._thread = threading.Thread(
                target=self._run, args=(self._cancel,), name="pbot-idle", daemon=True
            )
            self.runs += 1
            log.info("idle_work_started", worker=self.worker.name, run=self.runs)
            self._thread.start()

    def _run(self, cancel: threading.Event) -> None:
        try:
            self.worker.run(cancel)
        except Exception as error:  # the worker's failure is reported, the service goes on
            # One bounded line: an exception's repr can hold megabytes (a model's whole answer).
            described = describe_error(error)
            self.last_error = f"{self.worker.name}: {described}"
            log.exception("idle_worker_failed", worker=self.worker.name, error=described)
            if self.on_error is not None:
                self.on_error(f"idle worker {self.worker.name} failed: {described}")

    def stop(self, timeout: float) -> bool:
        """Cancel and wait up to ``timeout``; ``False`` if the worker did not return in time."""
        self._cancel.set()
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def info(self) -> dict[str, Any]:
        return {
            "name": self.worker.name,
            "running": self.running,
            "runs": self.runs,
            "cancelled": self.cancelled,
            "idle_seconds": self.idle_seconds,
            "last_error": self.last_error,
        }
