"""Which records on disk are still exactly as this service wrote them, known across restarts.

After a restart the writer knows nothing of the records it wrote: the first append to a long
session read its record back as if another tool had written it, and encoded every node of it
anew (a third of what that append cost at 300 MB). A record this service wrote is its own
``dumps_utf8`` bytes, so each node's JSON can be cut out of the file and kept as it is,
provided the file is still the one written. Each write leaves a mark here: the file's device,
inode, size, modification and change times right after it. ``st_ctime`` cannot be set back by
any tool (``touch``, an editor, ``git checkout``, pbot writing in place all move it), so a file
with the same mark holds the bytes written; anything else (a record merged from another
machine, edited by hand, rewritten by pbot) is read and encoded as before.

The marks are a cache, like the resume logs beside them: not fsynced, and a mark that is
missing, torn or of another version only means the record is treated as foreign once.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from pbot_watch.archive.atomic import FILE_MODE, ensure_dir

MARKS_VERSION = 1
MARKS_FOLDER = "records"


class WrittenMark(BaseModel):
    """One record file as this service left it (the file format of a mark)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = MARKS_VERSION
    path: str
    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, path: Path, st: os.stat_result) -> WrittenMark:
        return cls(
            path=os.fsdecode(path),
            dev=st.st_dev,
            ino=st.st_ino,
            size=st.st_size,
            mtime_ns=st.st_mtime_ns,
            ctime_ns=st.st_ctime_ns,
        )


class WrittenMarks:
    """The marks of one service's records, one small file each under ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _file(self, path: Path) -> Path:
        key = hashlib.blake2b(os.fsencode(path), digest_size=16).hexdigest()
        return self.folder / f"{key}.mark"

    def put(self, path: Path) -> None:
        """``path`` was just written by us: remember how it stands."""
        target = self._file(path)
        scratch = target.with_suffix(".tmp")
        try:
            mark = WrittenMark.of(path, path.stat())
            ensure_dir(self.folder)
            # Replaced, never fsynced: a mark lost or torn by a power cut only means one record
            # read as foreign, and an fsync per record write would slow a first index down.
            fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
            try:
                os.write(fd, mark.model_dump_json().encode())
            finally:
                os.close(fd)
            os.replace(scratch, target)
        except OSError:
            self.forget(path)

    def ours(self, path: Path, st: os.stat_result) -> bool:
        """Whether ``path`` (stat'ed as ``st``) is still exactly the record we last wrote there."""
        try:
            mark = WrittenMark.model_validate_json(self._file(path).read_bytes())
        except (OSError, ValidationError):
            return False
        return mark == WrittenMark.of(path, st)

    def forget(self, path: Path) -> None:
        with contextlib.suppress(OSError):
            self._file(path).unlink(missing_ok=True)
