"""Asking the team index one question: the CLI's ``--team`` and the tools' ``scope: "team"``.

Light to import (no psycopg until a question is asked), so the tools and the query commands can
offer the team scope without loading the driver for local questions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pbot_watch.config import Settings
from pbot_watch.memory.models import MemorySearchResult, RecallPage
from pbot_watch.search.models import MatchMode, NodePage, SearchResult
from pbot_watch.team.dsn import require_driver

T = TypeVar("T")


def ask_team(settings: Settings, answer: Callable[[Any], T]) -> T:
    """``answer(connection)`` on the team index; ``TeamUnavailable`` (a ``QueryError``) says why not."""
    require_driver()
    from pbot_watch.team.access import team_connection  # noqa: PLC0415 - imports psycopg

    with team_connection(settings) as conn:
        return answer(conn)


def search_team(settings: Settings, query: str, match: MatchMode, **filters: Any) -> SearchResult:
    def answer(conn: Any) -> SearchResult:
        from pbot_watch.team.search import team_search  # noqa: PLC0415 - imports psycopg

        return team_search(conn, query, match, **filters)

    return ask_team(settings, answer)


def read_team(settings: Settings, node_id: str, **paging: int) -> NodePage:
    def answer(conn: Any) -> NodePage:
        from pbot_watch.team.search import team_read  # noqa: PLC0415 - imports psycopg

        return team_read(conn, node_id, **paging)

    return ask_team(settings, answer)


def search_team_memory(
    settings: Settings, query: str, match: MatchMode, **filters: Any
) -> MemorySearchResult:
    def answer(conn: Any) -> MemorySearchResult:
        from pbot_watch.team.memory_search import team_memory_search  # noqa: PLC0415 - imports psycopg

        return team_memory_search(conn, query, match, **filters)

    return ask_team(settings, answer)


def recall_team(settings: Settings, handle: str, from_line: int) -> RecallPage:
    def answer(conn: Any) -> RecallPage:
        from pbot_watch.team.memory_search import team_recall  # noqa: PLC0415 - imports psycopg

        return team_recall(conn, handle, from_line)

    return ask_team(settings, answer)
