"""A session id as a person types it: the whole id, or a unique prefix of one (as Pi accepts).

``pi --session 01a2`` opens the one session whose id starts so; the history and memory queries
take the same. A prefix two sessions share is refused with both named, rather than guessed.
"""

from __future__ import annotations

import sqlite3

from pbot_watch.search.errors import QueryError

SHOWN = 3  # sessions named when a prefix is ambiguous


class AmbiguousSession(QueryError):
    """A session id prefix that several sessions start with."""


def full_session_id(conn: sqlite3.Connection, table: str, session_id: str | None) -> str | None:
    """``session_id`` itself when some row of ``table`` has it, else the one id it is a prefix of.

    Returned unchanged when no id starts with it (the query then finds nothing, or says the
    session is unknown, as before). ``table`` is one of this package's tables with a
    ``session_id`` column, never input.
    """
    if not session_id:
        return session_id
    if conn.execute(f"SELECT 1 FROM {table} WHERE session_id = ? LIMIT 1", (session_id,)).fetchone():
        return session_id
    rows = conn.execute(
        f"SELECT DISTINCT session_id FROM {table} WHERE substr(session_id, 1, ?) = ? ORDER BY session_id LIMIT ?",
        (len(session_id), session_id, SHOWN + 1),
    ).fetchall()
    if len(rows) == 1:
        return str(rows[0][0])
    if rows:
        names = ", ".join(str(row[0]) for row in rows[:SHOWN]) + (", ..." if len(rows) > SHOWN else "")
        raise AmbiguousSession(
            f"session id {session_id!r} is the start of several sessions ({names}): give more of it"
        )
    return session_id
