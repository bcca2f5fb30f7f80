"""``pbot-watch memory search`` and ``pbot-watch recall``: pi-echo's raw memory of Pi sessions."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from pbot_watch.cli import main
from pbot_watch.cli.answer import answering, emit
from pbot_watch.cli.options import archive_options, json_option, query_options
from pbot_watch.cli.team_answer import team_errors, team_option
from pbot_watch.memory.models import MemorySearchResult, RecallPage
from pbot_watch.tools.arguments import RecallMemoryArgs, SearchMemoryArgs

if TYPE_CHECKING:
    from pbot_watch.query import QueryContext  # keep --help fast


@main.group("memory")
def memory_group() -> None:
    """Raw memory: every message of a session branch (tool calls and results too)."""


@memory_group.command("search")
@query_options(SearchMemoryArgs)
@json_option("result")
@archive_options
@team_option
def memory_search_command(
    args: SearchMemoryArgs, as_json: bool, sessions: tuple[Path, ...], archive: Path | None, team: bool
) -> None:
    """Search raw session memory along the current branch; without QUERY, list sources."""
    from pbot_watch.tools import search_memory  # noqa: PLC0415

    if team:
        from pbot_watch.config import load_settings  # noqa: PLC0415 - keep --help fast

        with team_errors():
            found = search_memory.ask_team(args, load_settings())
        emit(found, as_json, render_search)
        return

    def answer(context: QueryContext) -> MemorySearchResult:
        for warning in context.skipped_files:  # a name that is not UTF-8
            click.echo(f"warning: {warning}", err=True)
        return search_memory.answer(args, context)

    result = answering(sessions, archive, answer, memory=True)
    if note := search_memory.not_searched_note(result):
        click.echo(f"note: {note}", err=True)
    emit(result, as_json, render_search)


@main.command("recall")
@query_options(RecallMemoryArgs)
@json_option("page")
@archive_options
@team_option
def recall_command(
    args: RecallMemoryArgs, as_json: bool, sessions: tuple[Path, ...], archive: Path | None, team: bool
) -> None:
    """Whole source lines of a memory HANDLE from a line, and where to continue."""
    from pbot_watch.tools import recall_memory  # noqa: PLC0415

    if team:
        from pbot_watch.config import load_settings  # noqa: PLC0415 - keep --help fast

        with team_errors():
            page = recall_memory.ask_team(args, load_settings())
        emit(page, as_json, render_recall)
        return

    def answer(context: QueryContext) -> RecallPage:
        return recall_memory.answer(args, context)

    emit(answering(sessions, archive, answer, memory=True), as_json, render_recall)


def render_search(result: MemorySearchResult) -> None:
    from rich.text import Text  # noqa: PLC0415

    from pbot_watch.cli.console import human_console  # noqa: PLC0415
    from pbot_watch.display import plural  # noqa: PLC0415
    from pbot_watch.search.render import highlight, local_time  # noqa: PLC0415

    console = human_console()
    if not result.hits:
        console.print("no matches" if result.query.strip() else "no sources")
        return
    for hit in result.hits:
        # One line count per hit: where the hit is, out of how many lines the source has.
        where = plural(hit.total_lines, "line")
        if hit.line is not None:
            where = f"line {hit.line} of {hit.total_lines}"
            if hit.section and hit.section.last_line > hit.section.first_line:
                where += f", in {hit.section.title} {hit.section.first_line}-{hit.section.last_line}"
        head = Text(f"{local_time(hit.timestamp)} ", style="cyan")
        head.append(hit.label)
        head.append(f"  {hit.context}", style="yellow" if hit.context == "historical" else "dim")
        head.append(f"  [{where}]", style="dim")
        if hit.machine:
            head.append(f"  {hit.user}@{hit.machine} · {hit.workspace}", style="magenta")
        console.print(head)
        console.print(Text("  handle ", style="dim") + Text(hit.handle))
        body = (
            highlight(hit.snippet, result.query, terms=result.match == "terms")
            if result.query.strip()
            else Text(hit.snippet)
        )
        body.pad_left(4)
        console.print(body)
    more = f" — more: --after {result.next_cursor}" if result.next_cursor else ""
    console.print(f"{len(result.hits)} of {result.total}{more}", style="dim", highlight=False)


def render_recall(page: RecallPage) -> None:
    click.echo(f"# {page.label}")
    sections = ", ".join(f"{s.title} {s.first_line}-{s.last_line}" for s in page.sections)
    click.echo(f"# lines {page.from_line}-{page.to_line} of {page.total_lines} ({sections})")
    width = len(str(page.to_line))
    for number, text in enumerate(page.text.split("\n"), page.from_line):
        click.echo(f"{number:>{width}}  {text}")
    if page.next_line is not None:
        click.echo(f"# continue: pbot-watch recall {page.handle} --from {page.next_line}")
