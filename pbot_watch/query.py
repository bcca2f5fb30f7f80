"""One way to run a query: open the search index, bring up to date what it reads, query, close.

The query commands (``search``, ``read``, ``memory search``, ``recall``) and the tools (MCP,
and any other transport) all open their index here, so they agree on where it lives
(``<state_dir>/search.db``), on which record folders a history query covers (the same settings
as ``index``: ``--sessions``, ``--archive``, ``PBOT_WATCH_*``, the config file), and on what is
refreshed first: the records for history, the session files for raw memory (only the pinned
session's file when the caller pins a ``MemoryScope``; none of the files the running service
is still reading into raw memory during its catch-up). Refreshing is cheap when nothing
changed. The index is opened per query and closed after it, so a query works whether or not
the service is running, and a long-lived server never holds the database open between calls.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from pbot_watch.config import Settings, load_settings
from pbot_watch.search.database import asked_again_on_damage, index_path, start_afresh
from pbot_watch.search.index import RecordFolder, SearchIndex

if TYPE_CHECKING:  # imported where used: a history query needs no raw memory, a memory query no catalog
    from pbot_watch.memory.index import MemoryProgress
    from pbot_watch.memory.query import MemoryScope

T = TypeVar("T")

REBUILT_WARNING = "the search index was damaged ({error}); it was deleted and rebuilt from the archive"


@dataclass
class QueryContext:
    """An index brought up to date for one query, and what the refresh found on the way."""

    settings: Settings
    index: SearchIndex
    folders: list[RecordFolder] = field(default_factory=list)
    """The record folders a history query covers (empty unless history was refreshed)."""
    warnings: list[str] = field(default_factory=list)
    """Records that could not be read while refreshing; the CLI shows them with the result."""
    skipped_files: list[str] = field(default_factory=list)
    """Session files left out for their names (``iter_session_files``); history warnings hold them too."""
    memory_left: list[Path] = field(default_factory=list)
    """Session files not searched as they are now: the running service is still building their raw memory."""

    @property
    def folder_paths(self) -> list[Path]:
        return [f.path for f in self.folders]


def settings_for_query(sessions: Sequence[Path] = (), archive: Path | None = None) -> Settings:
    """The settings a query runs under: command-line roots first, then the usual sources.

    Not ``config.resolve_settings``, which merges every layer and keeps where each value came
    from (for ``pbot-watch config``); this is ``load_settings`` with a query's two flags.
    """
    return load_settings({"sessions": list(sessions) or None, "archive": archive})


def open_index(settings: Settings) -> SearchIndex:
    return SearchIndex(SearchIndex.default_path(settings.state_dir))


@contextmanager
def open_query(
    settings: Settings,
    *,
    history: bool = False,
    memory: bool = False,
    scope: MemoryScope | None = None,
    progress: MemoryProgress | None = None,
) -> Iterator[QueryContext]:
    """The index, with the records (``history``) and the session files (``memory``) brought up to date.

    A memory query pinned to one session file (``scope``) can see nothing else, so only that
    file is synced: a tool call from inside Pi does not pay for every other session. While the
    running service is still building raw memory of its roots, an unpinned query reads none of
    their files: it answers from what is there, and ``memory_left`` says what is not yet.
    ``progress`` follows the session files read (the CLI draws a bar of it on a terminal).
    """
    index = open_index(settings)
    try:
        context = QueryContext(settings, index)
        skipped = context.skipped_files
        if history:
            from pbot_watch.catalog import Scope  # noqa: PLC0415 - a memory query lists no record folders
            from pbot_watch.search.discover import record_folders  # noqa: PLC0415

            context.folders = record_folders(index, settings.sessions, Scope.of(settings), skipped)
            context.warnings = index.update_from_archive(context.folders).warnings
        if memory:
            # Only a memory query reads session files into raw memory (a history query needs none of it).
            from pbot_watch.memory.index import (  # noqa: PLC0415
                MemorySync,
                ensure_memory_tables,
                refresh_memory,
                sync_memory_file,
            )
            from pbot_watch.service.status_file import roots_being_built  # noqa: PLC0415
        if memory and scope is not None and scope.session_file is not None:
            ensure_memory_tables(index)
            report = MemorySync()
            sync_memory_file(index, scope.session_file, report, budget=scope.read_at_most, pinned=True)
            if report.bytes_left:  # the rest is being built ahead (the Pi child): said, not waited for
                context.memory_left.append(scope.session_file)
        elif memory:
            building = {root.resolve() for root in roots_being_built(settings.state_dir)}
            refresh_memory(
                index,
                settings.sessions,
                skipped=None if history else skipped,
                progress=progress,
                leave=[root for root in settings.sessions if root.resolve() in building],
                left=context.memory_left,
            )
        context.warnings[:0] = skipped  # said once, even when both were refreshed
        yield context
    finally:
        index.close()


def run_query(
    settings: Settings,
    answer: Callable[[QueryContext], T],
    *,
    history: bool = False,
    memory: bool = False,
    scope: MemoryScope | None = None,
    progress: MemoryProgress | None = None,
) -> T:
    """``answer`` on an up-to-date index (``open_query``); a damaged index is rebuilt and asked again.

    The index is derived data and its documentation promises a rebuild: a damaged page
    (``database disk image is malformed``) shows only when a query or a refresh reads it, so
    the whole question is asked again, once, of an index built afresh. The warning says so.
    """

    def ask(damage: sqlite3.DatabaseError | None) -> T:
        with open_query(settings, history=history, memory=memory, scope=scope, progress=progress) as context:
            if damage is not None:
                context.warnings.append(REBUILT_WARNING.format(error=damage))
            return answer(context)

    return asked_again_on_damage(ask, lambda _: start_afresh(index_path(settings.state_dir)))
