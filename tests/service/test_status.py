"""``pbot-watch status``: running, not running and stale, from the real status file; exit codes 0 and 3."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pbot_watch.config_paths import default_state_dir
from pbot_watch.service.lock import InstanceLock
from pbot_watch.service.status import Status, iso, read_status, write_status
from pbot_watch.service.status_file import assess
from tests.support.cli import invoke, modules_after, run
from tests.support.paths import FIXTURES
from tests.support.pi_sessions import PiSession, jsonl
from tests.support.service import ServiceProcess

pytestmark = pytest.mark.timeout(60)


def status_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``pbot-watch status`` as a real process: it must see a running service from outside."""
    return run("status", *args, timeout=30)


def status_here(*args: str) -> subprocess.CompletedProcess[str]:
    """``pbot-watch status`` in this process: nothing runs, only files are read."""
    return invoke("status", *args)


def fake_status(pid: int, age: float) -> Status:
    """A status file as the service writes it, ``age`` seconds after its last heartbeat."""
    beat = time.time() - age
    return Status(
        running=True,
        pid=pid,
        version="0.1.0",
        started=iso(beat - 60),
        uptime_seconds=60,
        heartbeat=iso(beat),
        heartbeat_epoch=beat,
    )


class TestStatusCommand:
    @pytest.mark.slow
    def test_running_service(self, tmp_path: Path) -> None:
        """While the service runs: exit 0, and the JSON has every documented field."""
        sessions = tmp_path / "sessions" / "--p--"
        sessions.mkdir(parents=True)
        shutil.copy(FIXTURES / "real-v3" / "01-plain-multiturn.jsonl", sessions)
        with ServiceProcess([sessions.parent], tmp_path / "archive").start() as service:
            result = status_cli("--json")
            assert result.returncode == 0, result.stdout + result.stderr
            document = json.loads(result.stdout)
            assert (document["state"], document["running"], document["pid"]) == ("running", True, service.pid)
            assert document["observer"]["kind"] == "inotify"
            assert document["roots"] == [{"path": str(sessions.parent), "exists": True, "watched": True}]
            assert (document["files_tracked"], document["sessions_tracked"], document["records_written"]) == (
                1,
                1,
                1,
            )
            assert document["bytes_parsed_total"] == (sessions / "01-plain-multiturn.jsonl").stat().st_size
            assert document["activity"] in ("idle", "busy")
            assert document["summaries"]["model"] == "offline"
            for key in (
                "version",
                "uptime_seconds",
                "heartbeat",
                "workspaces_written",
                "last_append",
                "bytes_parsed_last_append",
                "pending_files",
                "idle_worker",
                "errors",
                "warnings",
            ):
                assert key in document
            human = status_cli()
            assert human.returncode == 0
            assert human.stdout.startswith(f"pbot-watch: running (pid {service.pid})")
            assert "observer   inotify" in human.stdout
            assert service.stop() == 0
        stopped = status_cli()
        assert stopped.returncode == 3
        assert "not running (stopped at" in stopped.stdout

    def test_never_ran(self) -> None:
        """No status file: not running, exit 3, and no state folder is created."""
        result = status_here()
        assert result.returncode == 3
        assert "not running" in result.stdout
        assert not default_state_dir().exists()

    def test_stale_heartbeat(self) -> None:
        """An old heartbeat from a live pid is stale (exit 3), not running."""
        write_status(_state_dir(), fake_status(os.getpid(), age=60))
        result = status_here("--json")
        assert result.returncode == 3
        document = json.loads(result.stdout)
        assert (document["state"], document["running"]) == ("stale", False)
        assert "heartbeat" in document["detail"]

    def test_dead_pid(self) -> None:
        """A status file left by a killed service (its pid gone) reads as not running."""
        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        gone.wait()
        write_status(_state_dir(), fake_status(gone.pid, age=0))
        result = status_here()
        assert result.returncode == 3
        assert f"pid {gone.pid} is gone" in result.stdout

    def test_fresh_heartbeat_without_the_lock_is_stale(self) -> None:
        """A live pid that does not hold the service lock is not our service (pid reuse)."""
        folder = _state_dir()
        status = fake_status(os.getpid(), age=0)
        write_status(folder, status)
        assert assess(folder, read_status(folder))[0] == "stale"

    def test_stuck_reading_thread_is_stale(self) -> None:
        """A fresh heartbeat from a service whose reading thread made no progress for long is stale."""
        folder = _state_dir()
        lock = InstanceLock(folder)
        lock.acquire()
        try:
            status = fake_status(os.getpid(), age=0)
            stuck = status.model_copy(
                update={"progress_epoch": time.time() - 60, "working_on": "reading /s.jsonl"}
            )
            write_status(folder, stuck)
            result = status_here("--json")
            document = json.loads(result.stdout)
            assert (3, "stale") == (result.returncode, document["state"])
            assert re.search(r"made no progress for 6\ds \(reading /s\.jsonl\)", document["detail"])
            write_status(folder, status.model_copy(update={"progress_epoch": time.time()}))
            assert 0 == status_here().returncode
        finally:
            lock.release()

    def test_state_dir_flag(self, tmp_path: Path) -> None:
        """``--state-dir`` reads another folder's status."""
        write_status(tmp_path, fake_status(os.getpid(), age=60))
        result = status_here("--state-dir", str(tmp_path))
        assert result.returncode == 3
        assert "stale" in result.stdout

    def test_imports_stay_light(self) -> None:
        """``status`` never imports pydantic, search, SQLite, litellm, watchdog, the indexer or the service."""
        heavy = (
            "pydantic",
            "pbot_watch.search",
            "pbot_watch.config",
            "sqlite3",
            "litellm",
            "watchdog",
            "pbot_watch.indexer",
            "pbot_watch.service.run",
        )
        assert [] == modules_after("status", among=heavy)


def _state_dir() -> Path:
    folder = default_state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def big_session(path: Path, megabytes: int) -> None:
    """A session of question/answer pairs with long answers, written in one go."""
    text = "lorem ipsum dolor sit amet 会话 " * 120
    pi = PiSession("0b0b0b0b-0000-7000-8000-00000000b0b0", "/big")
    turn = size = 0
    while size < megabytes * 1_000_000:
        pi.turn(f"q {turn}", f"{turn} {text}")
        size += len(jsonl(pi.entries[-2:]))
        turn += 1
    pi.write(path)


class TestHeartbeat:
    @pytest.mark.slow
    def test_heartbeat_stays_fresh_during_a_long_read(self, tmp_path: Path) -> None:
        """While one large session is read for the first time, status stays "running", never stale."""
        sessions = tmp_path / "sessions" / "--big--"
        sessions.mkdir(parents=True)
        big_session(sessions / "big.jsonl", 8)
        with ServiceProcess([sessions.parent], tmp_path / "archive").start(wait=False) as service:
            service.wait_status(lambda s: s.running, "the first status")
            states = set()
            while True:
                status = read_status(default_state_dir())
                states.add(assess(default_state_dir(), status)[0])
                if status is not None and status.records_written == 1:
                    break
                time.sleep(0.2)
            assert states == {"running"}
            assert service.stop() == 0
