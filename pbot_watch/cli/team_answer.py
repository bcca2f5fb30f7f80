"""``--team`` on the query commands: the same question asked of the team index."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click

from pbot_watch.cli.errors import CommandError

team_option = click.option(
    "--team", is_flag=True, help="Ask the team index (PostgreSQL, docs/team.md) instead of this machine's."
)


@contextmanager
def team_errors() -> Iterator[None]:
    """The team index's errors as one line (exit 1); a bad query as any query's (exit 2 or 4, by the group)."""
    from pbot_watch.team.dsn import TeamUnavailable  # noqa: PLC0415 - light, but only for --team

    try:
        yield
    except TeamUnavailable as error:
        raise CommandError(str(error)) from error
