"""``pbot-watch search``: pbot's history search (literal) and BM25 (terms) over the archive."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from pbot_watch.cli import main
from pbot_watch.cli.answer import answering, emit
from pbot_watch.cli.options import archive_options, json_option, limit_option, match_option, session_option
from pbot_watch.cli.team_answer import team_errors, team_option
from pbot_watch.search.models import MatchMode, SearchResult

if TYPE_CHECKING:
    from pbot_watch.query import QueryContext  # keep --help fast


@main.command("search")
@click.argument("query", required=False, default="")
@match_option("literal: case-insensitive substring (pbot's search); terms: words ranked by BM25.")
@click.option("--workspace", type=click.Path(path_type=Path), help="Only records of this workspace.")
@session_option
@click.option("--from", "from_", metavar="ISO", help="Only nodes ending at or after this date/time.")
@click.option("--to", metavar="ISO", help="Only nodes starting at or before this date/time.")
@click.option("--offset", type=click.IntRange(min=0), default=0, show_default=True)
@limit_option
@json_option("result")
@archive_options
@team_option
def search_command(
    query: str,
    match: MatchMode,
    workspace: Path | None,
    session_id: str | None,
    from_: str | None,
    to: str | None,
    offset: int,
    limit: int,
    as_json: bool,
    sessions: tuple[Path, ...],
    archive: Path | None,
    team: bool,
) -> None:
    """Search exchanges and summaries; without QUERY, list sessions (newest first)."""
    if team:
        from pbot_watch.config import load_settings  # noqa: PLC0415 - keep --help fast
        from pbot_watch.team.ask import search_team  # noqa: PLC0415

        with team_errors():
            found = search_team(
                load_settings(),
                query,
                match,
                session_id=session_id,
                workspace=workspace,
                from_=from_,
                to=to,
                offset=offset,
                limit=limit,
            )
        emit(found, as_json, render)
        return
    from pbot_watch.search.queries import search_history  # noqa: PLC0415 - keep --help fast

    def answer(context: QueryContext) -> SearchResult:
        result = search_history(
            context.index,
            query=query,
            match=match,
            session_id=session_id,
            workspace=workspace,
            from_=from_,
            to=to,
            offset=offset,
            limit=limit,
            folders=context.folder_paths,
        )
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
