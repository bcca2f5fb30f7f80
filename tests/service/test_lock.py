"""One instance per user: the flock'ed lock file, held by a real second process."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pbot_watch.service.lock import LOCK_FILE, AlreadyRunning, InstanceLock, is_held
from tests.support.archive import records
from tests.support.cli import run
from tests.support.pi_sessions import PiSession
from tests.support.service import ServiceProcess, wait_for

HOLD = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from pbot_watch.service.lock import InstanceLock\n"
    "InstanceLock(Path(sys.argv[1])).acquire()\n"
    "print('held', flush=True)\n"
    "time.sleep(60)\n"
)


class TestInstanceLock:
    def test_refused_while_another_process_holds_it(self, tmp_path: Path) -> None:
        """The refusal names the holder's pid; after it dies (even by SIGKILL) the lock is free."""
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert holder.stdout is not None
            assert holder.stdout.readline().strip() == "held"
            assert is_held(tmp_path)
            with pytest.raises(AlreadyRunning) as refused:
                InstanceLock(tmp_path).acquire()
            assert refused.value.pid == holder.pid
            assert f"pid {holder.pid}" in str(refused.value)
        finally:
            holder.kill()
            holder.wait()
            if holder.stdout is not None:
                holder.stdout.close()
        lock = InstanceLock(tmp_path)
        lock.acquire()
        lock.release()
        assert (tmp_path / LOCK_FILE).exists()
        assert not is_held(tmp_path)

    def test_is_held_never_creates_the_file(self, tmp_path: Path) -> None:
        """Asking (as ``status`` does) leaves no lock file behind."""
        assert not is_held(tmp_path)
        assert not (tmp_path / LOCK_FILE).exists()


class TestStateFolderRemoved:
    """The state folder is "safe to delete": deleted under a running service, it still is one service."""

    def test_status_still_sees_it_and_a_second_run_is_refused(self, tmp_path: Path) -> None:
        pi = PiSession("s-lock", "/w")
        pi.exchanges(2)
        session = pi.write(tmp_path / "sessions" / "--w--" / "s.jsonl")
        archive = tmp_path / "archive"
        with ServiceProcess([session.parent.parent], archive).start() as service:
            # Moved away first: an rm -rf can race the service's own status writes into it.
            gone = service.state_dir.rename(tmp_path / "removed-state")
            shutil.rmtree(gone)

            def running() -> dict[str, object] | None:
                shown = json.loads(run("status", "--json").stdout)
                return shown if shown["state"] == "running" and shown.get("pid") == service.pid else None

            wait_for(running, what="status to see the running service again", details=service.log_tail)
            second = run(
                "run", "--sessions", str(session.parent.parent), "--archive", str(archive), timeout=30
            )
            assert second.returncode != 0
            assert f"already running (pid {service.pid}" in second.stderr
            assert any(
                "was removed while running; locked again" in w
                for w in service.wait_status(lambda s: bool(s.warnings), "the warning").warnings
            )
            pi.exchanges(1, start=2)
            session.write_bytes(pi.data())
            wait_for(
                lambda: sum(n["kind"] == "exchange" for n in records(archive)["s-lock"]["nodes"]) == 3,
                what="the first service to go on writing records",
                details=service.log_tail,
            )
            assert service.stop() == 0
