"""A file's stamp: what changes when a file is replaced or written, so a cache knows to re-read.

An atomic replace (how records are written) gives the path a new inode; an append or an edit
in place changes the size or the modification time. The record cache, the summary queue and
the search index keep a file's stamp beside what they read from it, and read it again only
when the stamp differs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple


class FileStamp(NamedTuple):
    """Inode, size and modification time (ns) of a file, compared whole."""

    ino: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileStamp:
        return cls(st.st_ino, st.st_size, st.st_mtime_ns)


def file_stamp(path: Path) -> FileStamp | None:
    """``path``'s stamp now, or ``None`` when it cannot be stat'ed (gone, unreadable folder)."""
    try:
        return FileStamp.of(path.stat())
    except OSError:
        return None
