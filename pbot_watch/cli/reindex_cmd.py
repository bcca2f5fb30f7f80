"""``pbot-watch reindex``: rebuild the search index from the archive (and session files) alone."""

from __future__ import annotations

import time
from pathlib import Path

import click

from pbot_watch.cli import main
from pbot_watch.cli.errors import EXIT_USAGE, CommandError
from pbot_watch.cli.options import archive_options


@main.command("reindex")
@archive_options
def reindex_command(sessions: tuple[Path, ...], archive: Path | None) -> None:
    """Rebuild the search index from scratch (it is derived data; nothing is lost)."""
    from pbot_watch.cli.progress import progress_bar  # noqa: PLC0415
    from pbot_watch.config import SettingsError  # noqa: PLC0415
    from pbot_watch.memory.index import count_sources, optimize_memory, rebuild_memory  # noqa: PLC0415
    from pbot_watch.query import open_index, resolve_settings  # noqa: PLC0415
    from pbot_watch.search.discover import record_folders  # noqa: PLC0415

    try:
        settings = resolve_settings(sessions, archive)
    except SettingsError as error:
        raise CommandError(str(error), EXIT_USAGE) from error
    started = time.monotonic()
    index = open_index(settings)
    # The steps are the bar's units: each one is a single call into the index.
    steps = ("finding record folders", "history records", "raw memory", "merging the index")
    try:
        with progress_bar("reindexing") as bar:
            bar.update(0, len(steps), steps[0])
            folders = record_folders(index, settings.sessions, settings.archive)
            bar.update(1, len(steps), steps[1])
            report = index.rebuild(folders)
            bar.update(2, len(steps), steps[2])
            memory = rebuild_memory(index, [r for r in settings.sessions if r.is_dir()])
            bar.update(3, len(steps), steps[3])
            index.optimize()
            optimize_memory(index)
            counts = index.counts()
            sources = count_sources(index)
    finally:
        index.close()
    click.echo(
        f"{counts['records']} records, {counts['searchable']} searchable nodes from {report.folders} folders; "
        f"{memory} session files, {sources} memory sources "
        f"({time.monotonic() - started:.1f} s)"
    )
