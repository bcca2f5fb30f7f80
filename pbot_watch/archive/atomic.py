"""Atomic file replacement: a reader sees the old file or the new one, never a torn one."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

FILE_MODE = 0o600
DIR_MODE = 0o700


def ensure_dir(path: Path) -> None:
    """Create ``path`` and any missing parents as 0700; folders that exist keep their mode.

    ``mkdir(parents=True, mode=...)`` gives the mode to the last folder only, and the umask
    can lower it; records hold conversations, so every folder we create is private.
    """
    if path.is_dir():
        return
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(folder, DIR_MODE)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, mode: int = FILE_MODE, *, sync_dir: bool = True) -> None:
    """Temp file in the same folder, fsync, ``os.replace``, fsync of the folder.

    ``sync_dir=False`` leaves the folder's fsync to the caller, who batches many writes into
    one folder and syncs it once (the replacement is atomic for readers either way; the folder
    fsync only makes the new name survive a power cut).

    The temp name starts with a dot and ends in ``.tmp`` so that readers globbing ``*.json``
    never pick it up; a crash leaves at most such a file behind, which the next write ignores.
    """
    import tempfile  # noqa: PLC0415 - a query process opens databases here (ensure_dir) and writes no file

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode != FILE_MODE:  # mkstemp already creates the file 0600
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if sync_dir:
        fsync_dir(path.parent)
