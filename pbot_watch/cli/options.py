"""Options every command shares, so a central archive is searched as easily as workspaces."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def archive_options(func: F) -> F:
    """``--sessions DIR`` (repeatable) and ``--archive DIR``."""
    func = click.option(
        "--archive",
        type=click.Path(path_type=Path, file_okay=False),
        default=None,
        help="Write/read records in this central folder instead of each workspace's .pi/pbot/history.",
    )(func)
    return click.option(
        "--sessions",
        "sessions",
        multiple=True,
        type=click.Path(path_type=Path, file_okay=False),
        help="A Pi session root to read (repeatable). Default: ${PI_CODING_AGENT_DIR:-~/.pi/agent}/sessions.",
    )(func)


# The query commands' options that mean the same thing in each, declared once.


def match_option(explain: str) -> Callable[[F], F]:
    """``--match literal|terms``; ``explain`` says what each mode matches in this command."""
    return click.option(
        "--match",
        type=click.Choice(["literal", "terms"]),
        default="literal",
        show_default=True,
        help=explain,
    )


session_option = click.option("--session", "session_id", help="Only this Pi session id.")
limit_option = click.option("--limit", type=click.IntRange(1, 50), default=20, show_default=True)


def json_option(what: str) -> Callable[[F], F]:
    """``--json``: print ``what`` (the result, the page) as the documented JSON shape."""
    return click.option(
        "--json", "as_json", is_flag=True, help=f"Print the {what} as JSON (see docs/search.md)."
    )
