"""``pbot-watch run`` started by a person on a terminal says, in one plain line, that it caught up."""

from __future__ import annotations

import os
import pty
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.paths import FIXTURES

pytestmark = pytest.mark.slow


def test_terminal_gets_one_plain_caught_up_line(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    shutil.copytree(FIXTURES / "real-v3", sessions)
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        ["pbot-watch", "run", "--sessions", str(sessions), "--archive", str(tmp_path / "archive")],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"},
    )
    os.close(follower)
    shown = b""
    deadline = time.monotonic() + 60
    try:
        while b"following them" not in shown and time.monotonic() < deadline:
            if select.select([leader], [], [], 0.2)[0]:
                shown += os.read(leader, 65536)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        os.close(leader)
    lines = shown.decode(errors="replace").splitlines()
    assert "pbot-watch: indexed 9 sessions (9 records written), following them; Ctrl-C stops" in lines, lines
