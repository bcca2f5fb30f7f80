"""Where records live: a workspace's record folder, and which workspaces take records.

pbot keeps a workspace's records in ``<workspace>/.pi/pbot/history``; ``--archive`` puts every
record in one central folder instead. The ``include``/``exclude`` globs of the settings choose
the workspaces pbot-watch writes for. Writing, the service's start scan, search and the summary
worker all ask here, so they never disagree about a folder.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from pathlib import Path

HISTORY_SUBDIR = Path(".pi") / "pbot" / "history"


def workspace_folder(workspace: str) -> Path:
    """The folder of ``workspace``'s records (pbot's place; without a central archive)."""
    return Path(workspace) / HISTORY_SUBDIR


def folder_workspace(folder: Path) -> str | None:
    """The workspace whose record folder ``folder`` is, or ``None`` when it is no workspace's."""
    return str(folder.parents[2]) if folder.parts[-3:] == HISTORY_SUBDIR.parts else None


def exclusion(workspace: str, include: Sequence[str], exclude: Sequence[str]) -> str | None:
    """Why ``workspace`` takes no records under these globs, or ``None`` when it takes them.

    With ``include`` globs, a workspace must match one; one matching ``exclude`` glob excludes
    it. Globs match the whole path, case-sensitively (``fnmatchcase``): ``*`` crosses ``/``.
    """
    if include and not any(fnmatch.fnmatchcase(workspace, pattern) for pattern in include):
        return "not included"
    if any(fnmatch.fnmatchcase(workspace, pattern) for pattern in exclude):
        return "excluded"
    return None
