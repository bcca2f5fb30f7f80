"""How another program starts this very pbot-watch: an absolute command line.

A service manager and Pi both start pbot-watch without the shell's ``PATH`` or working
directory, and must start the same installation that set them up (its venv, pipx or uv tool),
so the command is absolute: the ``pbot-watch`` script beside the current interpreter when there
is one, else ``<python> -P -m pbot_watch`` (``-P``: the working directory must not shadow the
package).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pbot_watch.config_paths import APP


def pbot_watch_command(args: list[str], executable: str | None = None) -> list[str]:
    """``pbot-watch ARGS`` as an absolute argv, for ``executable`` (default: this interpreter)."""
    python = os.path.abspath(executable or sys.executable)  # not resolve(): a venv's python is a symlink
    script = Path(python).parent / APP
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script), *args]
    return [python, "-P", "-m", "pbot_watch", *args]
