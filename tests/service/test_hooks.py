"""The extension points, on a real ``Service`` running in a thread over temporary folders.

The listener and the idle worker here are small real implementations (they record what they
saw); the service around them is the production code, unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pbot_watch.config import load_settings
from pbot_watch.service.hooks import SUMMARIES, Extensions, ServiceContext
from pbot_watch.service.run import Service
from pbot_watch.service.status import read_status
from tests.service.test_idle import Blocking
from tests.support.paths import FIXTURES
from tests.support.pi_sessions import append, lines_of
from tests.support.service import wait_for

pytestmark = pytest.mark.timeout(60)

PLAIN = FIXTURES / "real-v3" / "01-plain-multiturn.jsonl"


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[Service, Path, list[tuple[Path, str]], Blocking]]:
    sessions = tmp_path / "sessions"
    (sessions / "--p--").mkdir(parents=True)
    settings = load_settings(
        {
            "sessions": [sessions],
            "archive": tmp_path / "archive",
            "idle_seconds": 0.5,
            "debounce_seconds": 0.05,
        }
    )
    seen: list[tuple[Path, str]] = []
    worker = Blocking()
    extensions = Extensions(
        listeners=[lambda record, session: seen.append((record, session))],
        idle_worker=worker,
        status_providers={SUMMARIES: lambda: {"pending": 3, "failed": 1}, "search": lambda: {"documents": 7}},
    )
    service = Service(settings, extensions, ServiceContext(settings))
    thread = threading.Thread(target=service.run, name="service")
    thread.start()
    wait_for(lambda: service.activity == "idle", what="the service to start")
    try:
        yield service, sessions / "--p--" / "s.jsonl", seen, worker
    finally:
        service.should_exit = True
        thread.join(5)
        assert not thread.is_alive()


class TestHooks:
    def test_listener_called_after_each_written_record(
        self, running: tuple[Service, Path, list[tuple[Path, str]], Blocking]
    ) -> None:
        """A record listener gets the record's path (already on disk) and the session id."""
        _, path, seen, _ = running
        lines = lines_of(PLAIN)
        append(path, b"".join(lines))
        wait_for(lambda: seen, what="a listener call")
        record, session = seen[-1]
        assert record.is_file()
        assert session in lines[0].decode()

    def test_idle_worker_runs_when_quiet_and_stops_on_append(
        self, running: tuple[Service, Path, list[tuple[Path, str]], Blocking]
    ) -> None:
        """After ``idle_seconds`` the worker runs; the next append sets its cancel event."""
        service, path, _, worker = running
        assert worker.started.wait(5)
        append(path, b"".join(lines_of(PLAIN)[:3]))
        assert worker.saw_cancel.wait(5)
        assert service.idle.cancelled == 1

    def test_status_embeds_providers(
        self, running: tuple[Service, Path, list[tuple[Path, str]], Blocking]
    ) -> None:
        """The "summaries" provider fills ``summaries``; others go under ``extensions``."""
        service, _, _, _ = running
        status = wait_for(lambda: read_status(service.settings.state_dir), what="a status file")
        assert status.summaries == {"pending": 3, "failed": 1}
        assert status.extensions == {"search": {"documents": 7}}
