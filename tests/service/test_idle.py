"""The idle clock runs the idle worker after quiet and cancels it on the next append."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from pbot_watch.service.hooks import NoIdleWork
from pbot_watch.service.idle import IdleClock
from tests.memory.test_index import busy_session
from tests.support.service import ServiceProcess, wait_for


class Blocking:
    """A worker that runs until cancelled, like a summary pass waiting on a model."""

    name = "blocking"

    def __init__(self) -> None:
        self.started = threading.Event()
        self.saw_cancel = threading.Event()

    def run(self, cancel: threading.Event) -> None:
        self.started.set()
        if cancel.wait(10):
            self.saw_cancel.set()


class Failing:
    name = "failing"

    def run(self, cancel: threading.Event) -> None:
        raise RuntimeError("model unreachable")


class TestIdleClock:
    def test_worker_starts_after_quiet_and_is_cancelled_by_activity(self) -> None:
        """No run before ``idle_seconds``; one run after; an append cancels it at once."""
        worker = Blocking()
        clock = IdleClock(worker, idle_seconds=30, now=0)
        clock.tick(29)
        assert not clock.running
        clock.tick(30)
        assert worker.started.wait(5)
        clock.activity(31)
        assert worker.saw_cancel.wait(5)
        wait_for(lambda: not clock.running, what="the worker to return")
        assert (clock.runs, clock.cancelled) == (1, 1)

    def test_runs_once_per_idle_period(self) -> None:
        """After a run, the worker waits for activity and a new quiet period."""
        clock = IdleClock(NoIdleWork(), idle_seconds=1, now=0)
        clock.tick(5)
        wait_for(lambda: not clock.running, what="the run to end")
        clock.tick(10)
        assert clock.runs == 1
        clock.activity(11)
        clock.tick(11.5)
        assert clock.runs == 1
        clock.tick(12)
        assert clock.runs == 2
        assert clock.stop(1)

    def test_worker_failure_is_reported(self) -> None:
        """An exception in the worker is kept for status and passed to ``on_error``."""
        errors: list[str] = []
        clock = IdleClock(Failing(), idle_seconds=0, on_error=errors.append, now=0)
        clock.tick(0)
        wait_for(lambda: errors, what="the error")
        assert "model unreachable" in errors[0]
        assert clock.info()["last_error"] is not None


class TestIdleWorkWaitsForTheCatchUp:
    def test_no_idle_work_before_caught_up(self, tmp_path: Path) -> None:
        """With ``--idle-seconds 0`` the summaries could start on the first tick; they start only
        after the start's catch-up (records, history index and raw memory) is done."""
        sessions = tmp_path / "sessions"
        for n in range(6):
            busy_session(sessions / f"--proj-{n}--" / "s.jsonl", turns=300)
        with ServiceProcess([sessions], tmp_path / "archive", "--idle-seconds", "0").start() as service:
            wait_for(lambda: service.log_events("idle_work_started"), 60, "the idle work")
            events = [json.loads(line).get("event") for line in service.log.read_text().splitlines() if line]
            assert "caught_up" in events
            assert events.index("caught_up") < events.index("idle_work_started")
            assert service.stop() == 0
