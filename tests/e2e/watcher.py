"""``pbot-watch run`` as a real subprocess, and the archive comparisons the end-to-end test waits on."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e.pi_harness import pbot_watch_executable

STOP_TIMEOUT_S = 20
START_TIMEOUT_S = 20
POLL_S = 0.05


@dataclass
class Watcher:
    """The live service following ``sessions`` into the central ``archive``; logs kept in ``logs``."""

    sessions: Path
    archive: Path
    state_dir: Path
    logs: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Watcher:
        self.logs.mkdir(parents=True, exist_ok=True)
        argv = [
            pbot_watch_executable(),
            "run",
            "--sessions",
            str(self.sessions),
            "--archive",
            str(self.archive),
            "--state-dir",
            str(self.state_dir),
            # Re-read a file soon after Pi's last append; never go idle during the test, so no
            # summary is written and the archive must equal a one-shot index byte for byte.
            "--debounce-seconds",
            "0.05",
            "--idle-seconds",
            "3600",
            "--reconcile-seconds",
            "3600",  # every change must come from a watch event, not a rescan
            "--log-format",
            "json",
            "--log-level",
            "info",
        ]
        with (
            (self.logs / "watcher.stdout").open("wb") as out,
            (self.logs / "watcher.stderr").open("wb") as err,
        ):
            self.proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        # Ready once `pbot-watch status` says so (the status file is written after the observer
        # started), so Pi's first appends are seen as watch events, not by the start scan.
        wait_until(
            self.running, "pbot-watch status to report the service running", START_TIMEOUT_S, self.output
        )
        return self

    def status(self) -> dict[str, Any]:
        """``pbot-watch status --json``: the service's own account of what it did."""
        done = subprocess.run(
            [pbot_watch_executable(), "status", "--json", "--state-dir", str(self.state_dir)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.stdout.strip(), f"pbot-watch status printed nothing ({done.returncode}): {done.stderr}"
        return dict(json.loads(done.stdout))

    def status_when(self, condition: Callable[[dict[str, Any]], bool], timeout: float = 10) -> dict[str, Any]:
        """The first status that satisfies ``condition`` (the status file is rewritten as work is done)."""
        seen: list[dict[str, Any]] = []

        def check() -> bool:
            seen.append(self.status())
            return condition(seen[-1])

        wait_until(
            check, "a pbot-watch status that matches", timeout, lambda: json.dumps(seen[-1:], indent=1)
        )
        return seen[-1]

    def running(self) -> bool:
        self.assert_alive()
        status = subprocess.run(
            [pbot_watch_executable(), "status", "--state-dir", str(self.state_dir)],
            capture_output=True,
            timeout=30,
            check=False,
        )
        return status.returncode == 0

    def output(self) -> str:
        parts = []
        for name in ("watcher.stdout", "watcher.stderr"):
            path = self.logs / name
            if path.exists():
                parts.append(f"--- {name} (tail)\n" + path.read_text(errors="replace")[-4000:])
        return "\n".join(parts)

    def assert_alive(self) -> None:
        assert self.proc is not None
        code = self.proc.poll()
        assert code is None, f"pbot-watch run exited early with {code}\n{self.output()}"

    def stop(self) -> int:
        """SIGTERM, as a service manager stops it; returns the exit code (killed after a deadline)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
                raise AssertionError(
                    f"pbot-watch run ignored SIGTERM for {STOP_TIMEOUT_S} s\n{self.output()}"
                ) from None
        return self.proc.returncode


def one_shot_index(sessions: Path, archive: Path, env: dict[str, str] | None = None) -> str:
    """``pbot-watch index`` of the same folder into another archive; returns its summary line."""
    done = subprocess.run(
        [pbot_watch_executable(), "index", "--sessions", str(sessions), "--archive", str(archive)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 0, f"pbot-watch index failed ({done.returncode}):\n{done.stderr}"
    return done.stdout.strip()


def archive_files(archive: Path) -> dict[str, bytes]:
    """Every record file of an archive by name (temporary files of an atomic write are not records)."""
    if not archive.is_dir():
        return {}
    return {p.name: p.read_bytes() for p in sorted(archive.iterdir()) if p.is_file() and p.suffix == ".json"}


def wait_until(
    condition: Callable[[], bool],
    what: str,
    timeout: float,
    on_timeout: Callable[[], str],
    poll: float = POLL_S,
) -> None:
    """Poll ``condition`` until it holds; fail after ``timeout`` seconds with ``on_timeout()``'s details."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{on_timeout()}")
        time.sleep(poll)


def caught_up(watcher: Watcher, reference: Path, timeout: float = 20) -> dict[str, bytes]:
    """Wait until the watcher's archive equals a one-shot index of the same sessions; return it.

    The one-shot index is made once, after Pi has finished writing, so it is the target the live
    archive must reach; the watcher's debounce means it gets there a little later.
    """
    if reference.exists():
        for path in reference.iterdir():
            path.unlink()
    one_shot_index(watcher.sessions, reference)
    expected = archive_files(reference)
    assert expected, f"the one-shot index wrote no record for {watcher.sessions}"

    def equal() -> bool:
        watcher.assert_alive()
        return archive_files(watcher.archive) == expected

    def explain() -> str:
        live = archive_files(watcher.archive)
        differing = sorted(
            set(live) ^ set(expected) | {k for k in live.keys() & expected.keys() if live[k] != expected[k]}
        )
        return f"records that differ: {differing}\n{watcher.output()}"

    wait_until(equal, "the live archive to equal a one-shot index", timeout, explain)
    return expected
