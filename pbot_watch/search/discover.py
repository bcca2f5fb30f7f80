"""Which record folders a query must look at, found cheaply, with or without the service.

With ``--archive`` the answer is that one folder. Otherwise records live in each workspace
(``<cwd>/.pi/pbot/history``), and the workspaces are named by the ``cwd`` in the headers of the
session files under the session roots. Reading every header on every query would be slow, so
each session file's header is remembered in the index with its ``stat``; a file is re-read
only when it changed. Workspaces already in the index are always kept, so a session file that
was deleted does not make its workspace's records disappear from search.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from pbot_watch.archive.locations import exclusion, relative_workspace, workspace_folder
from pbot_watch.archive.stamp import FileStamp
from pbot_watch.search.index import RecordFolder, SearchIndex
from pbot_watch.sources import iter_session_files, known_header


def session_headers(
    index: SearchIndex, roots: Iterable[Path], skipped: list[str] | None = None
) -> dict[Path, tuple[str | None, str | None]]:
    """Every session file under ``roots`` with its (session id, workspace), re-reading only changed files.

    Files left out for their names (``iter_session_files``) are said in ``skipped``.
    """
    conn = index.conn
    known = {
        Path(p): (ino, size, mtime, sid, ws)
        for p, ino, size, mtime, sid, ws in conn.execute(
            "SELECT path, ino, size, mtime_ns, session_id, workspace FROM session_files"
        )
    }
    out: dict[Path, tuple[str | None, str | None]] = {}
    changed: list[tuple[str, int, int, int, str | None, str | None]] = []
    for root in roots:
        for path in iter_session_files(root, skipped):
            try:
                st = os.stat(path)
            except OSError:
                continue
            before = known.get(path)
            # The header is the first line and never changes once written; only a new inode
            # (a rewrite) or a file that was empty before can change it.
            if (
                before is not None
                and before[0] == st.st_ino
                and (before[3] is not None or before[1] == st.st_size)
            ):
                out[path] = (before[3], before[4])
                continue
            header = known_header(path)
            sid, ws = (header.id, header.workspace) if header else (None, None)
            out[path] = (sid, ws)
            changed.append((str(path), *FileStamp.of(st), sid, ws))
    if changed:
        with index.transaction():
            conn.executemany(
                "INSERT INTO session_files(path, ino, size, mtime_ns, session_id, workspace) VALUES (?,?,?,?,?,?) "
                "ON CONFLICT(path) DO UPDATE SET ino=excluded.ino, size=excluded.size, mtime_ns=excluded.mtime_ns, "
                "session_id=excluded.session_id, workspace=excluded.workspace",
                changed,
            )
    return out


def record_folders(
    index: SearchIndex,
    roots: Iterable[Path],
    archive: Path | None,
    skipped: list[str] | None = None,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> list[RecordFolder]:
    """The record folders to refresh before a query (``skipped``: as ``session_headers``).

    A workspace that ``index``, ``run`` and ``summarize`` leave out by ``include``/``exclude``
    is not searched either, by the same rule (``archive.locations.exclusion``): records found
    there (written before the setting, or shipped in a cloned repository) are not shown. A
    central archive holds only what was written under the settings, so it is searched whole.
    """
    if archive is not None:
        return [RecordFolder(archive, None)]
    found = _record_folders(index, roots, skipped)
    return [f for f in found if f.workspace is None or exclusion(f.workspace, include, exclude) is None]


def _record_folders(
    index: SearchIndex, roots: Iterable[Path], skipped: list[str] | None
) -> list[RecordFolder]:
    folders: dict[Path, RecordFolder] = {}
    for _sid, workspace in session_headers(index, [r for r in roots if r.is_dir()], skipped).values():
        # A relative cwd has no record (index skips it): looking it up would read the records of
        # whatever folder the caller stands in.
        if workspace is not None and not relative_workspace(workspace):
            folder = workspace_folder(workspace)
            folders.setdefault(folder, RecordFolder(folder, workspace))
    for known in index.known_folders():
        if known.workspace is not None:
            folders.setdefault(known.path, known)
    return sorted(folders.values(), key=lambda f: str(f.path))


def refresh(index: SearchIndex, roots: Iterable[Path], archive: Path | None) -> None:
    """Bring the index up to date with the archive before answering a query."""
    index.update_from_archive(record_folders(index, roots, archive))
