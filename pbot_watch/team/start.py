"""Starting the team pusher inside the service: a problem is said in status, never fatal.

A missing DSN or a missing driver must not stop a service that also indexes, searches and
summarises: the service runs without pushing, and ``pbot-watch status`` says why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import structlog

from pbot_watch.config import Settings
from pbot_watch.service.hooks import ServiceContext, StatusProvider
from pbot_watch.team.dsn import TeamUnavailable, require_driver, team_dsn

if TYPE_CHECKING:
    from pbot_watch.team.listener import TeamListener

log = structlog.get_logger("pbot_watch.team")


def team_listener(settings: Settings, context: ServiceContext) -> tuple[TeamListener | None, StatusProvider]:  # noqa: ARG001 - extensions get the context
    """The running pusher and its status, or no pusher and a status saying why."""
    try:
        require_driver()
        dsn = team_dsn(settings.team)
    except TeamUnavailable as error:
        log.warning("team_push_off", reason=str(error))
        reason = str(error)

        def off() -> dict[str, Any]:
            return {"pushing": False, "last_error": reason}

        return None, off
    from pbot_watch.team.listener import TeamListener  # noqa: PLC0415 - imports psycopg

    listener = TeamListener(settings, dsn)
    return listener, listener.status
