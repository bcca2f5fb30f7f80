"""The catalog: which sessions exist, which workspace and record folder each has, is it included.

Every command asks here: ``index`` (which files make which session), ``run`` (which skipped
files to read again at start), ``summarize`` and the service's summary worker (which record
folders to work on, which sessions are this machine's), search and ``reindex`` (which record
folders to refresh and show) and the team push (which of this machine's folders to offer).
So they never disagree about a session or a workspace.

- **Which sessions exist**: every ``*.jsonl`` below the session roots (``sources``), named by
  its header (``sources.read_header``), read through one ``HeaderCache``: a file's header is
  read again only when the file was replaced (new inode), or named no session and changed size. The cache
  lives in memory for one command; search keeps its rows in ``search.db`` (``session_files``,
  ``search/discover.py``), so a query reads no header of an unchanged file. The service's
  ``files`` table and raw memory's ``mem_files`` also hold a session id and a workspace, but
  as what their reader parsed from the bytes it read (a cursor's companions), not as a
  catalog: nothing else looks them up.
- **Which workspace and record folder**: the header's ``cwd``; its records are in
  ``<cwd>/.pi/pbot/history``, or all in the central archive (``archive.locations``). A
  relative ``cwd`` names no folder.
- **Is it included**: ``Scope.exclusion``, the ``include``/``exclude`` globs of the settings
  by ``archive.locations.exclusion``, the rule the archive applies when it writes. A
  workspace left out has no record written, is not summarized, and is not searched (records
  found there anyway, written before the setting or shipped in a cloned repository, are not
  shown); a central archive holds only what was written under the settings.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pbot_watch.archive.locations import exclusion, relative_workspace, workspace_folder
from pbot_watch.archive.stamp import FileStamp
from pbot_watch.sources import iter_session_files, read_header

if TYPE_CHECKING:
    from pbot_watch.config import Settings

Kind = Literal["session", "not-session", "no-header", "unreadable"]
"""What a ``*.jsonl`` is: a session, a file that is no session (``read_header`` said so), one
without a header yet (empty, or its first line not written whole), one that cannot be read."""


@dataclass(frozen=True)
class SessionSighting:
    """One ``*.jsonl`` below a session root, as its header names it."""

    path: Path
    stamp: FileStamp | None
    """``None`` only when the file could not even be ``stat``ed (``unreadable``)."""
    kind: Kind
    session_id: str | None = None
    workspace: str | None = None
    problem: str | None = None
    """Why it could not be read (``unreadable`` only)."""


CachedRow = tuple[str, int, int, int, str | None, str | None]
"""``(path, ino, size, mtime_ns, session_id, workspace)``: a sighting as a store keeps it."""


@dataclass
class HeaderCache:
    """What each session file's header said, and the one rule for when to read it again.

    The header is a file's first line and never changes once written; only a new inode (a
    rewrite) or a file that named no session and changed size can name another session. ``changed`` collects the sightings read since the cache was made (or ``rows``
    last taken), for a store that keeps them (search's ``session_files``).
    """

    known: dict[Path, SessionSighting] = field(default_factory=dict)
    changed: list[SessionSighting] = field(default_factory=list)

    @classmethod
    def from_rows(cls, rows: Iterable[CachedRow]) -> HeaderCache:
        """A cache of kept rows: a row without a session id is a file to look at again when it grows."""
        known = {
            Path(path): SessionSighting(
                Path(path),
                FileStamp(ino, size, mtime),
                "session" if sid is not None else "no-header",
                sid,
                ws,
            )
            for path, ino, size, mtime, sid, ws in rows
        }
        return cls(known)

    def take_rows(self) -> list[CachedRow]:
        """The sightings read since the last call, as rows to keep (unreadable files are not kept)."""
        rows = [
            (str(s.path), *s.stamp, s.session_id, s.workspace) for s in self.changed if s.stamp is not None
        ]
        self.changed = []
        return rows

    def sight(self, path: Path) -> SessionSighting:
        """``path`` as its header names it, read only when the cache cannot answer."""
        try:
            stamp = FileStamp.of(os.stat(path))
        except OSError as error:
            self.known.pop(path, None)
            return SessionSighting(path, None, "unreadable", problem=f"cannot read: {error.strerror}")
        before = self.known.get(path)
        if (
            before is not None
            and before.stamp is not None
            and before.kind != "unreadable"
            and before.stamp.ino == stamp.ino
            and (before.kind == "session" or before.stamp.size == stamp.size)
        ):
            return before
        try:
            header = read_header(path)
        except OSError as error:
            sighting = SessionSighting(path, stamp, "unreadable", problem=f"cannot read: {error.strerror}")
        else:
            if header is False:
                sighting = SessionSighting(path, stamp, "not-session")
            elif header is None:
                sighting = SessionSighting(path, stamp, "no-header")
            else:
                sighting = SessionSighting(path, stamp, "session", header.id, header.workspace)
        self.known[path] = sighting
        self.changed.append(sighting)
        return sighting


@dataclass(frozen=True)
class Scope:
    """The ``include``/``exclude`` globs of the settings, and the central archive if there is one."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    archive: Path | None = None

    @classmethod
    def of(cls, settings: Settings) -> Scope:
        return cls(tuple(settings.include), tuple(settings.exclude), settings.archive)

    def exclusion(self, workspace: str) -> str | None:
        """Why ``workspace`` takes no records (``"not included"``, ``"excluded"``), ``None`` when it does."""
        return exclusion(workspace, self.include, self.exclude)

    def excludes(self, workspace: str) -> bool:
        return self.exclusion(workspace) is not None

    def record_folder(self, workspace: str | None) -> Path | None:
        """Where ``workspace``'s records are: the central archive, its own folder, or nowhere.

        Nowhere for a session without a ``cwd``, with a relative one (looking it up would read
        the records of whatever folder the caller stands in), or left out by the globs.
        """
        if workspace is None or relative_workspace(workspace) or self.excludes(workspace):
            return None
        return self.archive if self.archive is not None else workspace_folder(workspace)


@dataclass
class Catalog:
    """The session files below ``roots``, read through ``cache``, under ``scope``."""

    roots: Sequence[Path]
    scope: Scope = field(default_factory=Scope)
    cache: HeaderCache = field(default_factory=HeaderCache)

    @classmethod
    def of(cls, settings: Settings, cache: HeaderCache | None = None) -> Catalog:
        return cls(list(settings.sessions), Scope.of(settings), cache or HeaderCache())

    def sightings(self, skipped: list[str] | None = None) -> Iterator[SessionSighting]:
        """Every ``*.jsonl`` below the roots that exist, in root then path order (``iter_session_files``).

        Files left out for their names (``iter_session_files``) are said in ``skipped``.
        """
        for root in self.roots:
            if not root.is_dir():
                continue
            for path in iter_session_files(root, skipped):
                yield self.cache.sight(path)

    def sessions(self, skipped: list[str] | None = None) -> list[SessionSighting]:
        """Which sessions exist: the files whose header names a session (an id may have several)."""
        return [s for s in self.sightings(skipped) if s.kind == "session"]

    def session_ids(self) -> set[str]:
        """The ids of the sessions that have a file on this machine, included or not."""
        return {s.session_id for s in self.sessions() if s.session_id is not None}

    def record_folders(self, skipped: list[str] | None = None) -> dict[Path, str | None]:
        """``folder -> workspace`` of every included session's records (``None``: the central archive).

        With a central archive it is that one folder, whatever the sessions.
        """
        if self.scope.archive is not None:
            return {self.scope.archive: None}
        folders: dict[Path, str | None] = {}
        for sighting in self.sessions(skipped):
            folder = self.scope.record_folder(sighting.workspace)
            if folder is not None:
                folders.setdefault(folder, sighting.workspace)
        return dict(sorted(folders.items(), key=lambda item: str(item[0])))
