"""``pbot-watch search``: pbot's history search (literal) and BM25 (terms) over the archive."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pbot_watch.cli import main
from pbot_watch.cli.answer import answering, emit
from pbot_watch.cli.options import archive_options, json_option, query_options
from pbot_watch.cli.team_answer import team_errors, team_option
from pbot_watch.search.models import SearchResult
from pbot_watch.tools.arguments import HistorySearchArgs

if TYPE_CHECKING:
    from pbot_watch.query import QueryContext  # keep --help fast


@main.command("search")
@query_options(HistorySearchArgs)
@json_option("result")
@archive_options
@team_option
def search_command(
    args: HistorySearchArgs, as_json: bool, sessions: tuple[Path, ...], archive: Path | None, team: bool
) -> None:
    """Search exchanges and summaries; without QUERY, list sessions (newest first)."""
    from pbot_watch.tools import history_search  # noqa: PLC0415 - keep --help fast

    if team:
        from pbot_watch.config import load_settings  # noqa: PLC0415 - keep --help fast

        with team_errors():
            found = history_search.ask_team(args, load_settings())
        emit(found, as_json, render)
        return

    def answer(context: QueryContext) -> SearchResult:
        result = history_search.answer(args, context)
        result.warnings = context.warnings
        return result

    emit(answering(sessions, archive, answer, history=True, human=not as_json), as_json, render)


def render(result: SearchResult) -> None:
    """A list a person can scan: when, what, which session, the hit in context, and the id to read."""
    from rich.text import Text  # noqa: PLC0415

    from pbot_watch.cli.console import human_console  # noqa: PLC0415
    from pbot_watch.search.render import highlight, local_time  # noqa: PLC0415

    console = human_console()
    for warning in result.warnings:
        console.print(f"warning: {warning}", style="yellow", markup=False, highlight=False)
    if not result.matches:
        console.print("no matches" if result.query.strip() else "no sessions")
        return
    terms = result.match == "terms"
    for hit in result.matches:
        kind = hit.kind if hit.kind != "summary" else f"summary L{hit.level}"
        head = Text(local_time(hit.to), style="cyan")
        head.append(f"  {kind:<12}", style="magenta")
        head.append(hit.name, style="bold")
        if hit.score is not None:
            head.append(f"  score {hit.score:.2f}", style="dim")
        console.print(head, overflow="ellipsis", no_wrap=True)
        body = highlight(hit.snippet, result.query, terms=terms)
        body.pad_left(2)
        console.print(body)
        console.print(Text(f"  {hit.id}", style="dim"))
    last = result.total if result.next_offset is None else result.next_offset
    more = f" — next page: --offset {result.next_offset}" if result.next_offset is not None else ""
    console.print(f"{last} of {result.total}{more}", style="dim", highlight=False)
