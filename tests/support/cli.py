"""The ``pbot-watch`` command in tests, as a real subprocess of the installed console script."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def pbot_watch_executable() -> str:
    """The installed console script as an absolute path: beside the test's python, else on PATH."""
    beside = Path(sys.executable).with_name("pbot-watch")
    if beside.is_file():
        return str(beside)
    found = shutil.which("pbot-watch")
    if found is None:
        raise FileNotFoundError("pbot-watch is not installed beside the test's python nor on PATH")
    return os.path.abspath(found)


def run(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``pbot-watch ARGS`` as a real process; ``env`` replaces the environment when given."""
    return subprocess.run(
        [pbot_watch_executable(), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=False,
        timeout=timeout,
    )
