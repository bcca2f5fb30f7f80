"""The ``pbot-watch`` command in tests: in this process through click's runner, or as a real subprocess.

``invoke`` runs a command in this process, as the console script would: the same exit code,
stdout and stderr apart, without starting an interpreter. It is for commands that finish on their
own and only read and write files (search, read, memory search, recall, reindex, index, config,
cues, ``service install`` with stand-in tools, ``pi install --print``, ``status`` while nothing
runs). ``run`` starts the installed console
script: for signals, locks, the service, MCP over stdio, what a command imports, and the real Pi.
Both answer with a ``CompletedProcess``, so a test reads the same whichever it uses.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from click.testing import CliRunner


def pbot_watch_executable() -> str:
    """The installed console script as an absolute path: beside the test's python, else on PATH."""
    beside = Path(sys.executable).with_name("pbot-watch")
    if beside.is_file():
        return str(beside)
    found = shutil.which("pbot-watch")
    if found is None:
        raise FileNotFoundError("pbot-watch is not installed beside the test's python nor on PATH")
    return os.path.abspath(found)


def invoke(*args: str, env: Mapping[str, str | None] | None = None) -> subprocess.CompletedProcess[str]:
    """``pbot-watch ARGS`` in this process; ``env`` sets (or, with ``None``, unsets) variables for it.

    An exception the command does not turn into an exit code is raised here with its traceback,
    rather than becoming an exit code 1 for the test to decode.
    """
    from pbot_watch.cli import main

    result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False, prog_name="pbot-watch")
    return subprocess.CompletedProcess(["pbot-watch", *args], result.exit_code, result.stdout, result.stderr)


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
