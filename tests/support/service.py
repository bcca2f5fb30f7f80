"""The real ``pbot-watch run`` in a subprocess, waits with deadlines, and what it writes.

Everything here works on real files in temporary folders. ``ServiceProcess`` logs to a file
(never a pipe nobody reads) and shows the log's tail when a wait times out or the service dies.
``one_shot`` is the reference a live archive must reach: ``pbot-watch index`` of the same roots.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Self

from pbot_watch import __version__
from pbot_watch.config_paths import default_state_dir
from pbot_watch.service.lock import InstanceLock
from pbot_watch.service.status import Status, iso, read_status, write_status
from tests.support.archive import records
from tests.support.cli import pbot_watch_executable

DEADLINE = 15.0


def age_today(seconds: float) -> float:
    """``seconds``, or less just after midnight: a heartbeat that old is still of today, so a
    note shows it as a time of day (one of yesterday rightly names its date)."""
    now = datetime.now().astimezone()
    since_midnight = (now - now.replace(hour=0, minute=0, second=0, microsecond=0)).total_seconds()
    return min(seconds, since_midnight / 2)


def fake_status(state_dir: Path, *, running: bool = True, age: float = 0.5, **fields: Any) -> float:
    """A status file as the service writes it (this process's pid), its heartbeat ``age`` seconds
    ago; ``running=False`` is the file a stopped service leaves. Returns the heartbeat's time."""
    beat = time.time() - age
    state_dir.mkdir(parents=True, exist_ok=True)
    status = Status(
        running=running,
        pid=os.getpid(),
        version=__version__,
        started=iso(beat - 60),
        uptime_seconds=60,
        heartbeat=iso(beat),
        heartbeat_epoch=beat,
        **fields,
    )
    write_status(state_dir, status)
    return beat


@contextmanager
def service_lock(state_dir: Path) -> Iterator[None]:
    """The service's lock, held by this process as a running service holds it (with ``fake_status``)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    lock = InstanceLock(state_dir)
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


def wait_for(
    predicate: Callable[[], Any],
    timeout: float = DEADLINE,
    what: str = "condition",
    details: Callable[[], str] | None = None,
    poll: float = 0.02,
) -> Any:
    """Poll ``predicate`` until it returns something truthy, and return that.

    After ``timeout`` seconds fail naming ``what``, with ``details()`` (a log tail, a diff) below.
    """
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what}\n{details() if details else ''}"
            )
        time.sleep(poll)


class ServiceProcess:
    """``pbot-watch run`` on given roots; its state in ``state_dir`` (the test's ``$XDG_STATE_HOME``).

    Records go to ``archive``, or with ``None`` to each session's workspace.
    """

    def __init__(
        self,
        sessions: list[Path],
        archive: Path | None,
        *extra: str,
        log: Path | None = None,
        state_dir: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.args = [pbot_watch_executable(), "run", "--log-format", "json"]
        if archive is not None:
            self.args += ["--archive", str(archive)]
        for root in sessions:
            self.args += ["--sessions", str(root)]
        if state_dir is not None:
            self.args += ["--state-dir", str(state_dir)]
        self.args += list(extra)
        self.sessions = sessions
        self.archive = archive
        self.log = log or (archive or sessions[0]).parent / "service.log"
        self.state_dir = state_dir or default_state_dir()
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *, wait: bool = True) -> Self:
        """Start it; with ``wait``, return once it is running and has caught up (idle)."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env
            )
        if wait:
            self.wait_status(
                lambda s: s.running and s.activity == "idle", "the service to start and catch up"
            )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def status(self) -> Status | None:
        """This process's status file (``None`` before it wrote one, or when another process did)."""
        status = read_status(self.state_dir)
        return status if status is not None and status.pid == self.pid else None

    def wait_status(self, check: Callable[[Status], bool], what: str, timeout: float = DEADLINE) -> Status:
        """The first status that passes ``check``; fails at once if the service exits."""

        def ready() -> Status | None:
            self.assert_alive()
            status = self.status()
            return status if status is not None and check(status) else None

        return wait_for(ready, timeout, what, self.log_tail)

    def log_events(self, event: str) -> list[dict[str, Any]]:
        """The service's JSON log lines of ``event``, oldest first (a line being written is skipped)."""
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return []
        found = []
        for line in lines:
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict) and value.get("event") == event:
                found.append(value)
        return found

    def wait_log(self, event: str, what: str, timeout: float = DEADLINE) -> dict[str, Any]:
        """The first log line of ``event``: a wait on what the service reports it did, not on a guess
        of how long that takes; fails at once if the service exits."""

        def seen() -> dict[str, Any] | None:
            self.assert_alive()
            found = self.log_events(event)
            return found[0] if found else None

        line: dict[str, Any] = wait_for(seen, timeout, what, self.log_tail, poll=0.1)
        return line

    def assert_alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"service exited with {self.proc.returncode}:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = DEADLINE) -> int:
        """SIGTERM, as a service manager stops it; its exit code (killed, and failing, after ``timeout``)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"pbot-watch run ignored SIGTERM for {timeout}s\n{self.log_tail()}"
            ) from None

    def kill(self) -> None:
        """``kill -9``: no clean-up of any kind."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(DEADLINE)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()


# ---- the reference ---------------------------------------------------------------------------
def one_shot(
    sessions: list[Path], into: Path, env: dict[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """What ``pbot-watch index`` writes for the same roots, into a fresh folder."""
    args = [pbot_watch_executable(), "index", "--archive", str(into)]
    for root in sessions:
        args += ["--sessions", str(root)]
    result = subprocess.run(args, capture_output=True, text=True, check=False, timeout=120, env=env)
    assert result.returncode == 0, f"pbot-watch index failed ({result.returncode}):\n{result.stderr}"
    return records(into)


class Expect:
    """Compares a live archive with one-shot indexes of the same session roots."""

    def __init__(self, sessions: list[Path], archive: Path, scratch: Path) -> None:
        self.sessions = sessions
        self.archive = archive
        self.scratch = scratch
        self.count = 0
        self.kept: set[str] = set()

    def same(
        self, timeout: float = DEADLINE, service: ServiceProcess | None = None
    ) -> dict[str, dict[str, Any]]:
        """Wait until the live archive equals a one-shot index (plus the records of deleted files)."""
        self.count += 1
        expected = one_shot(self.sessions, self.scratch / f"expected-{self.count}")
        last: dict[str, dict[str, Any]] = {}

        def equal() -> bool:
            nonlocal last
            last = records(self.archive)
            live = {k: v for k, v in last.items() if k not in self.kept or k in expected}
            return live == expected

        def explain() -> str:
            detail = {
                k: ("missing" if k not in last else "differs") for k in expected if last.get(k) != expected[k]
            }
            extra = sorted(set(last) - set(expected) - self.kept)
            tail = service.log_tail() if service else ""
            return f"archive differs: {detail}, unexpected {extra}\n{tail}"

        wait_for(equal, timeout, "the live archive to equal a one-shot index", explain)
        return expected
