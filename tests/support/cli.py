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

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from click.testing import CliRunner

from tests.support.paths import REPO


def scratch_user(home: Path) -> dict[str, str]:
    """The environment of a user who lives in ``home``: state, settings, cache and Pi's folder there.

    For a real subprocess, which must not see the test's own ``$HOME`` (``isolated_home`` only
    changes this process's variables). ``PYTHONPATH`` is kept for testing a checkout other than
    the installed one.
    """
    env = {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", ""),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "PI_CODING_AGENT_DIR": str(home / ".pi" / "agent"),
    }
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


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
    return _process([pbot_watch_executable(), *args], env=env, cwd=cwd, timeout=timeout)


def modules_after(*args: str, among: tuple[str, ...]) -> list[str]:
    """The modules of ``among`` (or inside them) a fresh interpreter holds after ``pbot-watch ARGS``.

    For the commands that must stay light: what they import is what a person waits for.
    """
    code = (
        "import json, sys\n"
        "from pbot_watch.cli import main\n"
        "try:\n    main(sys.argv[1:], prog_name='pbot-watch')\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = _process([sys.executable, "-c", code, *args], timeout=60)
    assert done.stdout.strip(), done.stderr
    loaded = json.loads(done.stdout.splitlines()[-1])
    return [m for m in loaded if any(m == name or m.startswith(f"{name}.") for name in among)]


def bench(
    script: str, *args: str, timeout: float = 240, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``bench/SCRIPT ARGS`` from the repository root; ``env`` replaces the environment when given."""
    return _process([sys.executable, str(REPO / "bench" / script), *args], env=env, cwd=REPO, timeout=timeout)


def _process(
    argv: list[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None, timeout: float
) -> subprocess.CompletedProcess[str]:
    """A process to its end, its output captured as text; its exit code is the caller's to check."""
    return subprocess.run(
        argv, capture_output=True, text=True, env=env, cwd=cwd, check=False, timeout=timeout
    )
