"""``pbot-watch reindex``: rebuild the search index from the archive (and session files) alone."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from pbot_watch.cli import main
from pbot_watch.cli.options import archive_options
from pbot_watch.display import plural

if TYPE_CHECKING:
    from pbot_watch.search.index import RefreshReport  # keep --help fast


@main.command("reindex")
@archive_options
def reindex_command(sessions: tuple[Path, ...], archive: Path | None) -> None:
    """Rebuild the search index from scratch (it is derived data; nothing is lost)."""
    import sqlite3  # noqa: PLC0415 - keep --help fast

    from pbot_watch.catalog import Scope  # noqa: PLC0415
    from pbot_watch.cli.progress import progress_bar  # noqa: PLC0415
    from pbot_watch.memory.index import count_sources, optimize_memory, rebuild_memory  # noqa: PLC0415
    from pbot_watch.query import open_index, settings_for_query  # noqa: PLC0415
    from pbot_watch.search.database import asked_again_on_damage, damage_found  # noqa: PLC0415
    from pbot_watch.search.discover import record_folders  # noqa: PLC0415

    settings = settings_for_query(sessions, archive)
    started = time.monotonic()
    index = open_index(settings)
    # The steps are the bar's units: each one is a single call into the index.
    steps = ("finding record folders", "history records", "raw memory", "merging the index")

    def rebuild() -> tuple[RefreshReport, int, dict[str, int], int]:
        with progress_bar("reindexing") as bar:
            bar.update(0, len(steps), steps[0])
            folders = record_folders(index, settings.sessions, Scope.of(settings))
            bar.update(1, len(steps), steps[1])
            report = index.rebuild(folders)
            bar.update(2, len(steps), steps[2])
            memory = rebuild_memory(index, [r for r in settings.sessions if r.is_dir()])
            bar.update(3, len(steps), steps[3])
            index.optimize()
            optimize_memory(index)
            return report, memory, index.counts(), count_sources(index)

    def afresh(damage: sqlite3.DatabaseError | str) -> None:
        # Emptying a damaged index in place reads its damaged pages: start from no file.
        click.echo(f"warning: the search index was damaged ({damage}); building it from no file", err=True)
        index.reset()

    try:
        if (damage := damage_found(index.conn)) is not None:  # a whole pass follows: check every page first
            afresh(damage)
        report, memory, counts, sources = asked_again_on_damage(lambda _: rebuild(), afresh)
    finally:
        index.close()
    click.echo(
        f"{plural(counts['records'], 'record')}, {plural(counts['searchable'], 'searchable node')} "
        f"from {plural(report.folders, 'folder')}; "
        f"{plural(memory, 'session file')}, {plural(sources, 'memory source')} "
        f"({time.monotonic() - started:.1f} s)"
    )
