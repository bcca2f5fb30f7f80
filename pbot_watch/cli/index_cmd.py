"""``pbot-watch index``: one pass over all session files."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from pbot_watch.cli import main
from pbot_watch.cli.errors import CommandError
from pbot_watch.cli.options import archive_options

if TYPE_CHECKING:
    from pbot_watch.archive.files import ArchiveStore
    from pbot_watch.indexer import IndexReport


@main.command("index")
@archive_options
@click.option("--include", multiple=True, help="Only workspaces matching this glob (repeatable).")
@click.option("--exclude", multiple=True, help="Skip workspaces matching this glob (repeatable).")
def index_command(
    sessions: tuple[Path, ...], archive: Path | None, include: tuple[str, ...], exclude: tuple[str, ...]
) -> None:
    """Index every Pi session once and write the history archive.

    Roots, archive and workspace globs come from the flags, else from the settings
    (config.toml, PBOT_WATCH_* variables), as for `pbot-watch run`.
    """
    # Imported here: the click group loads every command module, and `status` must stay light.
    from pbot_watch.archive.files import ArchiveStore  # noqa: PLC0415
    from pbot_watch.config import load_settings  # noqa: PLC0415
    from pbot_watch.indexer import MissingRoot  # noqa: PLC0415
    from pbot_watch.sources import default_session_roots  # noqa: PLC0415

    settings = load_settings(
        {"sessions": list(sessions), "archive": archive, "include": list(include), "exclude": list(exclude)}
    )
    roots = list(settings.sessions) or default_session_roots()
    store = ArchiveStore(
        central=settings.archive,
        include=tuple(settings.include),
        exclude=tuple(settings.exclude),
        provenance=(settings.machine, settings.user),
    )
    try:
        report = _run(roots, store)
    except MissingRoot as error:
        raise CommandError(f"{error}; pass --sessions DIR or set PI_CODING_AGENT_DIR") from error
    for warning in report.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(report.line())


def _run(roots: list[Path], store: ArchiveStore) -> IndexReport:
    from pbot_watch.cli.progress import progress_bar  # noqa: PLC0415
    from pbot_watch.indexer import IndexProgress, index_all  # noqa: PLC0415

    with progress_bar("indexing", data=True) as bar:

        def update(state: IndexProgress) -> None:
            bar.update(state.bytes_done, state.bytes_total, f"{state.files_done}/{state.files_total} files")

        return index_all(roots, store, update)
