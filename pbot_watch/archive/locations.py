"""Where records live: a workspace's record folder, and which workspaces take records.

pbot keeps a workspace's records in ``<workspace>/.pi/pbot/history``; ``--archive`` puts every
record in one central folder instead. The ``include``/``exclude`` globs of the settings choose
the workspaces pbot-watch writes for. Writing asks here, and every other command through the
catalog (``pbot_watch/catalog.py``), so they never disagree about a folder.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Sequence
from pathlib import Path

HISTORY_SUBDIR = Path(".pi") / "pbot" / "history"


def workspace_folder(workspace: str) -> Path:
    """The folder of ``workspace``'s records (pbot's place; without a central archive)."""
    return Path(workspace) / HISTORY_SUBDIR


def relative_workspace(workspace: str) -> bool:
    """Whether a header's ``cwd`` is relative, so names no folder of its own.

    Resolved against the caller's folder, ``index`` run from two folders would write the same
    session's record in two places. Pi always writes an absolute ``cwd``; pbot, which works in
    the workspace it was started in, has no record for such a session either.
    """
    return not os.path.isabs(workspace)


def link_out_of(workspace: str) -> Path | None:
    """The first of ``.pi``, ``.pi/pbot``, ``.pi/pbot/history`` that is a symlink out of ``workspace``.

    Records go where the workspace's owner keeps them. A ``.pi`` linked elsewhere (another
    person's folder, a shared drive, a checkout's template) would have pbot-watch write every
    conversation of this workspace there. A link that stays inside the workspace is followed.
    """
    root = Path(workspace).resolve()
    part = Path(workspace)
    for name in HISTORY_SUBDIR.parts:
        part = part / name
        if part.is_symlink() and not part.resolve().is_relative_to(root):
            return part
    return None


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
