"""Where Pi keeps sessions, and which files under a root are candidates.

Default root: ``${PI_CODING_AGENT_DIR:-~/.pi/agent}/sessions``. Pi puts sessions one level
down (``--<cwd>--/``), but a custom ``sessionDir`` is flat and ``/import`` keeps any name,
so every ``*.jsonl`` below a root is a candidate; the header decides whether it is a session.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path


def agent_dir() -> Path:
    configured = os.environ.get("PI_CODING_AGENT_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".pi" / "agent"


def default_session_roots() -> list[Path]:
    return [agent_dir() / "sessions"]


def iter_session_files(root: Path) -> Iterator[Path]:
    """Every ``*.jsonl`` below ``root``, sorted, following directory symlinks once (as Pi's listAll does)."""
    seen: set[tuple[int, int]] = set()
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            st = folder.stat()
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        try:
            children = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        subfolders: list[Path] = []
        for child in children:
            try:
                if child.is_dir():
                    subfolders.append(Path(child.path))
                elif child.name.endswith(".jsonl") and child.is_file():
                    yield Path(child.path)
            except OSError:
                continue
        stack.extend(reversed(subfolders))
