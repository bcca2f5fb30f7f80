"""``pbot-watch read``: pbot's read() of one node — a page of text, parents and children."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from pbot_watch.cli import main
from pbot_watch.cli.answer import answering, emit
from pbot_watch.cli.options import archive_options, json_option
from pbot_watch.cli.team_answer import team_errors, team_option
from pbot_watch.search.models import NodeBrief, NodePage

if TYPE_CHECKING:
    from pbot_watch.query import QueryContext  # keep --help fast


@main.command("read")
@click.argument("node_id")
@click.option(
    "--offset", type=click.IntRange(min=0), default=0, show_default=True, help="Text offset (UTF-16 units)."
)
@click.option(
    "--limit",
    type=click.IntRange(1, 24000),
    default=12000,
    show_default=True,
    help="Text length (UTF-16 units).",
)
@click.option(
    "--children-offset",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="First child to list (20 per page).",
)
@json_option("page")
@archive_options
@team_option
def read_command(
    node_id: str,
    offset: int,
    limit: int,
    children_offset: int,
    as_json: bool,
    sessions: tuple[Path, ...],
    archive: Path | None,
    team: bool,
) -> None:
    """Read NODE_ID (from search or from another node's parents/children)."""
    if team:
        from pbot_watch.config import load_settings  # noqa: PLC0415 - keep --help fast
        from pbot_watch.team.ask import read_team  # noqa: PLC0415

        with team_errors():
            page = read_team(
                load_settings(), node_id, offset=offset, limit=limit, children_offset=children_offset
            )
        emit(page, as_json, render)
        return
    from pbot_watch.search.queries import read_node  # noqa: PLC0415

    def answer(context: QueryContext) -> NodePage:
        page = read_node(context.index, node_id, offset=offset, limit=limit, children_offset=children_offset)
        page.warnings = context.warnings
        return page

    emit(answering(sessions, archive, answer, history=True, human=not as_json), as_json, render)


def _line(brief: NodeBrief) -> str:
    kind = brief.kind if brief.kind != "summary" else f"summary L{brief.level}"
    return f"  {brief.id}  [{kind}] {brief.preview}"


def render(page: NodePage) -> None:
    from rich.markup import escape  # noqa: PLC0415

    from pbot_watch.cli.console import human_console  # noqa: PLC0415
    from pbot_watch.search.render import local_time  # noqa: PLC0415

    console = human_console()
    kind = page.kind if page.kind != "summary" else f"summary L{page.level}"
    ready = "" if page.ready else " (summary not written yet)"
    done = "" if page.completed else " (not completed)"
    console.print(
        f"[bold]{escape(page.name)}[/bold] — {kind}{ready}{done}\n"
        f"[cyan]{local_time(page.from_)} → {local_time(page.to)}[/cyan]  "
        f"session {page.source.session_id}  entries {', '.join(page.source.entry_ids) or '-'}",
        highlight=False,
    )
    console.rule()
    console.print(page.text, markup=False, highlight=False)
    console.rule()
    if page.next_offset is not None:
        console.print(f"more text: --offset {page.next_offset} (of {page.total_length})", style="dim")
    if page.parents:
        console.print("parents:", style="bold")
        for parent in page.parents:
            console.print(_line(parent), markup=False, highlight=False)
    if page.children:
        console.print("children:", style="bold")
        for child in page.children:
            console.print(_line(child), markup=False, highlight=False)
    if page.next_children_offset is not None:
        console.print(f"more children: --children-offset {page.next_children_offset}", style="dim")
