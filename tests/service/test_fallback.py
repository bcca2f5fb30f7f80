"""inotify out of instances: the service falls back to polling, says why, and keeps working.

The limit is real: a helper process of an otherwise unused user takes every inotify instance
that user may have (``fs.inotify.max_user_instances`` is per user), then the service starts
as that user. This needs root (to run as another user) and a system Python of our version
that the other user may execute (the venv's interpreter may live in root's home); the
package and its dependencies come from this checkout and the venv's site-packages.
Elsewhere the test is skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.archive import records
from tests.support.paths import FIXTURES
from tests.support.pi_sessions import append, lines_of
from tests.support.service import one_shot, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]

NOBODY = 65534
SYSTEM_PYTHON = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
REPO = Path(__file__).resolve().parents[2]
RUN = "import sys; from pbot_watch.cli import main; sys.argv[0] = 'pbot-watch'; main()"
HOG = (
    "import ctypes, sys, time\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "fds = []\n"
    "while len(fds) < 100000:\n"
    "    fd = libc.inotify_init()\n"
    "    if fd < 0:\n"
    "        break\n"
    "    fds.append(fd)\n"
    "print(len(fds), ctypes.get_errno(), flush=True)\n"
    "time.sleep(120)\n"
)


def _environment(base: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PBOT_WATCH_", "XDG_", "PYTHON"))}
    env.update(
        HOME=str(base / "home"),
        XDG_STATE_HOME=str(base / "state"),
        XDG_CONFIG_HOME=str(base / "config"),
        PYTHONPATH=os.pathsep.join([str(REPO), sysconfig.get_paths()["purelib"]]),
        PYTHONDONTWRITEBYTECODE="1",
        # The service runs as another user than the one-shot index it is compared with: one
        # user label for both, so the records differ in nothing but what the service did.
        PBOT_WATCH_USER="pbot-test",
    )
    return env


def _can_switch_user() -> bool:
    if os.geteuid() != 0 or not Path("/proc/sys/fs/inotify").is_dir() or not SYSTEM_PYTHON.exists():
        return False
    try:
        probe = subprocess.run(
            [str(SYSTEM_PYTHON), "-c", "import pbot_watch.service.run"],
            user=NOBODY,
            group=NOBODY,
            extra_groups=[],
            env=_environment(Path("/nonexistent")),
            cwd="/",
            capture_output=True,
            check=False,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0


@pytest.fixture
def as_nobody() -> Iterator[Path]:
    """A folder the other user owns (pytest's tmp_path is private to root)."""
    base = Path(tempfile.mkdtemp(prefix="pbot-watch-fallback-"))
    try:
        for sub in ("home", "state", "config", "sessions/--p--"):
            (base / sub).mkdir(parents=True)
        for folder, dirs, files in os.walk(base):
            for name in [
                folder,
                *(os.path.join(folder, d) for d in dirs),
                *(os.path.join(folder, f) for f in files),
            ]:
                os.chown(name, NOBODY, NOBODY)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(not _can_switch_user(), reason="needs root to run the service as another user")
def test_no_inotify_instance_left_falls_back_to_polling(as_nobody: Path) -> None:
    """With every inotify instance taken, the service polls, names EMFILE in status, and follows appends."""
    base = as_nobody
    as_user = {"user": NOBODY, "group": NOBODY, "extra_groups": []}
    hog = subprocess.Popen(
        [str(SYSTEM_PYTHON), "-c", HOG], stdout=subprocess.PIPE, text=True, cwd="/", **as_user
    )
    env = _environment(base)
    service: subprocess.Popen[bytes] | None = None
    try:
        assert hog.stdout is not None
        taken, _ = hog.stdout.readline().split()
        assert int(taken) >= 0
        sessions, archive = base / "sessions", base / "archive"
        with (base / "service.log").open("wb") as log:
            service = subprocess.Popen(
                [
                    str(SYSTEM_PYTHON),
                    "-c",
                    RUN,
                    "run",
                    "--sessions",
                    str(sessions),
                    "--archive",
                    str(archive),
                    "--poll-seconds",
                    "0.2",
                    "--log-format",
                    "json",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=base,
                **as_user,
            )
        status_file = base / "state" / "pbot-watch" / "status.json"

        def observer() -> dict[str, str] | None:
            try:
                value = json.loads(status_file.read_bytes())
            except (OSError, ValueError):
                return None
            return value["observer"] if value.get("pid") == service.pid else None  # type: ignore[union-attr]

        seen = wait_for(observer, what="the service's status")
        assert seen["kind"] == "polling", (base / "service.log").read_text()
        assert "inotify could not start" in seen["reason"]
        assert "EMFILE" in seen["reason"]
        path = sessions / "--p--" / "s.jsonl"
        for line in lines_of(FIXTURES / "real-v3" / "01-plain-multiturn.jsonl"):
            append(path, line)
        expected = one_shot([sessions], base / "expected", env={**os.environ, "PBOT_WATCH_USER": "pbot-test"})
        wait_for(lambda: records(archive) == expected, what="the polled append in the archive")
    finally:
        for proc in (service, hog):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(10)
        if hog.stdout is not None:
            hog.stdout.close()
