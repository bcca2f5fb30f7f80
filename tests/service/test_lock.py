"""One instance per user: the flock'ed lock file, held by a real second process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pbot_watch.service.lock import LOCK_FILE, AlreadyRunning, InstanceLock, is_held

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
