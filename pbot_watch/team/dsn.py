"""The team index's DSN: read from the environment or a file, never shown.

A DSN can hold a password. It is never a setting's value and never printed: messages name the
server as ``host:port/database`` at most (``describe``), and errors from the driver, which may
quote the DSN, are cut to their first line after the DSN is blanked out of them.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from pbot_watch.config import TeamSettings
from pbot_watch.search.errors import QueryError


class TeamUnavailable(QueryError):
    """The team index is not configured, cannot be reached, or has no schema yet.

    A ``QueryError``: the tools answer it as a message to the caller, as any query they cannot
    run, and the service carries on.
    """


def require_driver() -> None:
    """The team modules need psycopg (the ``team`` extra); say how to get it rather than fail on import."""
    try:
        import psycopg  # noqa: F401, PLC0415 - only to learn whether it can be imported
    except ImportError as error:
        raise TeamUnavailable("the team index needs psycopg: pip install 'pbot-watch[team]'") from error


def team_dsn(team: TeamSettings) -> str:
    """The ``postgresql://`` DSN the settings point at; raises ``TeamUnavailable`` with what to do."""
    if team.dsn_file is not None:
        try:
            text = team.dsn_file.read_text(encoding="utf-8").strip().splitlines()
        except OSError as error:
            raise TeamUnavailable(
                f"team.dsn_file {team.dsn_file} cannot be read: {error.strerror}"
            ) from error
        dsn = text[0].strip() if text else ""
        where = f"team.dsn_file {team.dsn_file}"
    else:
        dsn = os.environ.get(team.dsn_env, "").strip()
        where = f"the variable {team.dsn_env}"
    if not dsn:
        raise TeamUnavailable(f"no team index: {where} holds no postgresql:// DSN")
    if not dsn.startswith(("postgresql://", "postgres://")):
        raise TeamUnavailable(f"{where} does not hold a postgresql:// DSN")
    return dsn


def describe(dsn: str) -> str:
    """``host:port/database`` of a DSN: what messages and status may say about the server."""
    try:
        parts = urlsplit(dsn)
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "the team server"
    return f"{parts.hostname or 'localhost'}{port}{parts.path or '/'}"


def scrub(message: object, dsn: str) -> str:
    """A driver's error as one line, without the DSN in it."""
    text = str(message).replace(dsn, describe(dsn)).strip()
    return text.splitlines()[0] if text else type(message).__name__
