"""Opening the team index for a command, and finding the record folders a push reads.

Every entry point (``team`` commands, ``search --team``, the tools with ``scope: "team"``, the
service) comes through here, so they agree on the DSN, on the messages when the index is off or
unreachable, and on which record folders this machine has.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from pbot_watch.catalog import Scope
from pbot_watch.config import Settings
from pbot_watch.search.discover import record_folders
from pbot_watch.search.index import SearchIndex
from pbot_watch.team.dsn import TeamUnavailable, team_dsn
from pbot_watch.team.push import check_schema, connect_team


def require_enabled(settings: Settings) -> str:
    """The DSN, when the team index is on; ``TeamUnavailable`` saying how to turn it on otherwise."""
    if not settings.team.enabled:
        raise TeamUnavailable("the team index is off: set enabled = true in the [team] table of the config")
    return team_dsn(settings.team)


@contextmanager
def team_connection(settings: Settings) -> Iterator[psycopg.Connection]:
    """A connection to an initialised team index, closed after use."""
    dsn = require_enabled(settings)
    conn = connect_team(dsn)
    try:
        check_schema(conn)
        yield conn
    finally:
        conn.close()


def local_folders(settings: Settings) -> list[tuple[Path, str | None]]:
    """This machine's record folders (as search finds them) with their workspaces."""
    index = SearchIndex(SearchIndex.default_path(settings.state_dir))
    try:
        return [(f.path, f.workspace) for f in record_folders(index, settings.sessions, Scope.of(settings))]
    finally:
        index.close()
