"""Opening the index for a query from the command line or MCP, service running or not.

One function decides where the index lives (``<state_dir>/search.db``) and which record
folders a query covers; both follow the same settings as ``index`` (``--sessions``,
``--archive``, ``PBOT_WATCH_*``, the config file), so a central archive is searched as
easily as the workspaces'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pbot_watch.config import Settings, load_settings
from pbot_watch.search.discover import record_folders
from pbot_watch.search.index import RecordFolder, SearchIndex


@dataclass
class QueryContext:
    settings: Settings
    index: SearchIndex
    folders: list[RecordFolder]
    warnings: list[str] = field(default_factory=list)

    @property
    def folder_paths(self) -> list[Path]:
        return [f.path for f in self.folders]

    def close(self) -> None:
        self.index.close()


def resolve_settings(sessions: Sequence[Path] = (), archive: Path | None = None) -> Settings:
    return load_settings({"sessions": list(sessions) or None, "archive": archive})


def open_index(settings: Settings) -> SearchIndex:
    return SearchIndex(SearchIndex.default_path(settings.state_dir))


def prepare(settings: Settings, *, refresh: bool = True) -> QueryContext:
    """Open the index and bring it up to date with the archive (cheap when nothing changed)."""
    index = open_index(settings)
    try:
        folders = record_folders(index, settings.sessions, settings.archive)
        warnings = index.update_from_archive(folders).warnings if refresh else []
    except BaseException:
        index.close()
        raise
    return QueryContext(settings, index, folders, warnings)
