"""``--team`` on the query commands: the same question asked of the team index."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from pbot_watch.cli.answer import query_errors
from pbot_watch.cli.errors import CommandError
from pbot_watch.config import load_settings

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T")

team_option = click.option(
    "--team", is_flag=True, help="Ask the team index (PostgreSQL, docs/team.md) instead of this machine's."
)


def answering_team(answer: Callable[[psycopg.Connection[Any]], T]) -> T:
    """``answer`` on a connection to the team index; its errors as one line each."""
    from pbot_watch.team.dsn import TeamUnavailable, require_driver  # noqa: PLC0415 - only for --team

    with query_errors():
        try:
            require_driver()
            from pbot_watch.team.access import team_connection  # noqa: PLC0415 - psycopg only for --team

            with team_connection(load_settings()) as conn:
                return answer(conn)
        except TeamUnavailable as error:
            raise CommandError(str(error)) from error
