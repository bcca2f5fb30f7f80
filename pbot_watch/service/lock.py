"""One service per user: an exclusive ``flock`` on ``state_dir/run.lock``.

The lock file is never deleted. Deleting it would let a second process lock a new inode
while the first still holds the old one; a kernel lock on a file that always exists dies
with its process (even after ``kill -9``), so there is no stale lock to clean up. The file
holds the pid of its holder only so the refusal can name it.

Someone may still delete it: the state folder is documented as safe to delete, and a person
does so while the service runs. The running service then holds a lock on a file no name leads
to, and a second ``run`` would lock a new one beside it. So the holder re-checks, every tick,
that its path still leads to the file it locked (``still_held``), and locks the path afresh
when it does not; the window a second ``run`` could use is one tick.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from pbot_watch.archive.atomic import ensure_dir
from pbot_watch.errors import PbotWatchError

LOCK_FILE = "run.lock"


class AlreadyRunning(PbotWatchError):
    """Another process holds the lock."""

    def __init__(self, path: Path, pid: int | None) -> None:
        who = f"pid {pid}" if pid is not None else "another process"
        super().__init__(f"pbot-watch is already running ({who}, lock {path})")
        self.pid = pid


def read_pid(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def is_held(state_dir: Path) -> bool:
    """Whether some process holds the lock now; never creates the file (``status`` calls this)."""
    try:
        fd = os.open(state_dir / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


class InstanceLock:
    """Held from ``acquire()`` to ``release()`` (or the death of the process)."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        self._fd = self._lock()

    def _lock(self) -> int:
        ensure_dir(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise AlreadyRunning(self.path, read_pid(self.path)) from None
        # The pid only names the holder in a refusal: on a full disk, hold the lock without it.
        with contextlib.suppress(OSError):
            pid = f"{os.getpid()}\n".encode("ascii")
            os.pwrite(fd, pid, 0)
            os.ftruncate(fd, len(pid))
        return fd

    def still_held(self) -> bool:
        """``True`` while the path leads to the locked file; else lock the path again, ``False``.

        Raises ``AlreadyRunning`` when another process locked the new file first, and
        ``OSError`` when the folder cannot be made again (the old lock is kept meanwhile).
        """
        if self._fd is None:
            return True
        try:
            on_disk = os.stat(self.path)
        except FileNotFoundError:
            on_disk = None
        held = os.fstat(self._fd)
        if on_disk is not None and (on_disk.st_dev, on_disk.st_ino) == (held.st_dev, held.st_ino):
            return True
        fd = self._lock()
        os.close(self._fd)
        self._fd = fd
        return False

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None
