"""Helpers for the service tests: the real ``pbot-watch run`` in a subprocess, Pi-like writes, archive checks.

Everything here works on real files in temporary folders. ``ServiceProcess`` logs to a file
(never a pipe nobody reads) and shows its tail when a wait times out.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from pbot_watch.config import default_state_dir
from pbot_watch.service.status import Status, read_status

DEADLINE = 15.0


def wait_for(predicate: Callable[[], Any], timeout: float = DEADLINE, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns something truthy; fail with ``what`` after ``timeout``."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


class ServiceProcess:
    """``pbot-watch run`` on given roots; state under the test's ``$XDG_STATE_HOME``."""

    def __init__(self, sessions: list[Path], archive: Path, *extra: str, log: Path | None = None) -> None:
        self.args = ["pbot-watch", "run", "--log-format", "json", "--archive", str(archive)]
        for root in sessions:
            self.args += ["--sessions", str(root)]
        self.args += list(extra)
        self.log = log or archive.parent / "service.log"
        self.state_dir = default_state_dir()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *, wait: bool = True) -> ServiceProcess:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT)
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
        status = read_status(self.state_dir)
        return status if status is not None and status.pid == self.pid else None

    def wait_status(self, check: Callable[[Status], bool], what: str, timeout: float = DEADLINE) -> Status:
        def ready() -> Status | None:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"service exited with {self.proc.returncode}:\n{self.log_tail()}")
            status = self.status()
            return status if status is not None and check(status) else None

        try:
            return wait_for(ready, timeout, what)
        except AssertionError as error:
            raise AssertionError(f"{error}\n{self.log_tail()}") from None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 5.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


# ---- the archive -------------------------------------------------------------------------------
def records(folder: Path) -> dict[str, dict[str, Any]]:
    """Every record in ``folder`` by session id; a torn file or a second file per session fails."""
    out: dict[str, dict[str, Any]] = {}
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.json")):
        record = json.loads(path.read_bytes())
        assert record["sessionId"] not in out, f"two records for session {record['sessionId']}"
        out[record["sessionId"]] = record
    return out


def one_shot(sessions: list[Path], into: Path) -> dict[str, dict[str, Any]]:
    """What ``pbot-watch index`` writes for the same files, into a fresh folder."""
    args = ["pbot-watch", "index", "--archive", str(into)]
    for root in sessions:
        args += ["--sessions", str(root)]
    result = subprocess.run(args, capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 0, result.stderr
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

        try:
            wait_for(equal, timeout, "the live archive to equal a one-shot index")
        except AssertionError:
            detail = {
                k: ("missing" if k not in last else "differs") for k in expected if last.get(k) != expected[k]
            }
            extra = sorted(set(last) - set(expected) - self.kept)
            tail = service.log_tail() if service else ""
            raise AssertionError(f"archive differs: {detail}, unexpected {extra}\n{tail}") from None
        return expected


# ---- writing like Pi ---------------------------------------------------------------------------
def lines_of(path: Path) -> list[bytes]:
    return [line + b"\n" for line in path.read_bytes().split(b"\n") if line]


def append(path: Path, data: bytes) -> None:
    """One ``appendFileSync``: a single write with ``O_APPEND``."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def append_split(path: Path, line: bytes, rng: random.Random, pieces: int = 3, pause: float = 0.05) -> None:
    """One line in several writes with pauses between them (any cut point, even inside a character)."""
    cuts = sorted(rng.sample(range(1, len(line)), min(pieces - 1, len(line) - 1)))
    for start, end in zip([0, *cuts], [*cuts, len(line)], strict=True):
        append(path, line[start:end])
        time.sleep(pause)  # the pause is the scenario (a slow writer), not a wait for a result


def rewrite_in_place(path: Path, data: bytes) -> None:
    """Pi's ``writeFileSync`` on load after a migration: same inode, new content."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def with_session_id(header: bytes, session_id: str, **fields: Any) -> bytes:
    value = json.loads(header)
    value["id"] = session_id
    value.update(fields)
    return (json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
