"""``pbot-watch read``: pbot's read() of one node — a page of text, parents and children."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pbot_watch.cli import main
from pbot_watch.cli.answer import answering, emit
from pbot_watch.cli.options import archive_options, json_option, query_options
from pbot_watch.cli.team_answer import team_errors, team_option
from pbot_watch.search.models import NodeBrief, NodePage
from pbot_watch.tools.arguments import HistoryReadArgs

if TYPE_CHECKING:
    from pbot_watch.query import QueryContext  # keep --help fast


@main.command("read")
@query_options(HistoryReadArgs)
@json_option("page")
@archive_options
@team_option
def read_command(
    args: HistoryReadArgs, as_json: bool, sessions: tuple[Path, ...], archive: Path | None, team: bool
) -> None:
    """Read NODE_ID (from search or from another node's parents/children)."""
    from pbot_watch.tools import history_read  # noqa: PLC0415 - keep --help fast

    if team:
        from pbot_watch.config import load_settings  # noqa: PLC0415 - keep --help fast

        with team_errors():
            page = history_read.ask_team(args, load_settings())
        emit(page, as_json, render)
        return

    def answer(context: QueryContext) -> NodePage:
        page = history_read.answer(args, context)
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
