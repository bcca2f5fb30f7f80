"""Reconcile scans: a snapshot of every session file's stat, and a pure diff of two snapshots.

Watch events can be lost (inotify queue overflow, a folder created and filled before its
watch was added, a laptop suspended mid-write), so the service rescans at start and every
``reconcile_seconds``. As watchdog's ``DirectorySnapshotDiff`` does, the scan only collects
stats and ``diff`` is a pure function of two snapshots; the tailer then decides per file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from pbot_watch.sources import iter_session_files


@dataclass(frozen=True, slots=True)
class Stat:
    dev: int
    ino: int
    size: int
    mtime_ns: int


Snapshot = dict[Path, Stat]


@dataclass
class Diff:
    created: list[Path] = field(default_factory=list)
    modified: list[Path] = field(default_factory=list)
    deleted: list[Path] = field(default_factory=list)

    @property
    def changed(self) -> list[Path]:
        return self.created + self.modified


def diff(before: Snapshot, after: Snapshot) -> Diff:
    """Files that appeared, changed (any stat field) or disappeared between two scans."""
    out = Diff()
    for path, stat in after.items():
        old = before.get(path)
        if old is None:
            out.created.append(path)
        elif old != stat:
            out.modified.append(path)
    out.deleted = [path for path in before if path not in after]
    out.created.sort()
    out.modified.sort()
    out.deleted.sort()
    return out


def scan(roots: list[Path], skipped: list[str] | None = None) -> Snapshot:
    """Stat every ``*.jsonl`` below the roots that exist now (``skipped``: see ``iter_session_files``)."""
    snapshot: Snapshot = {}
    for root in roots:
        if not root.is_dir():
            continue
        for path in iter_session_files(root, skipped):
            try:
                st = os.stat(path)
            except OSError:
                continue
            snapshot[path] = Stat(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    return snapshot
