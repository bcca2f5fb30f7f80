"""Exact totals of common team queries, kept by the server as nodes change.

Local search reports the exact number of hits, and the team's literal totals must equal local
totals on the same records. Counting a needle found in a third of a million-exchange index
means reading every matching row (a trigram index only narrows, each candidate's text is
tested again): seconds, where a page of hits takes milliseconds. So a query with many hits
(``TALLY_MIN``) is *tallied*: ``pbot_tallies`` names it (a LIKE pattern on ``text_lower``, or
a tsquery on ``terms``), and a trigger on ``pbot_nodes`` (schema migration 2) adds, for every
statement that adds or removes nodes, the change of each tally's count to
``pbot_tally_deltas``. The total is the sum of a tally's deltas, exact in the snapshot it is
read in, as a count would be.

Registering a tally must not miss a node a writer added just before the trigger knew of it:

1. the tally is committed (not ``ready``); from then on every statement that adds or removes
   nodes writes its deltas;
2. ``LOCK TABLE pbot_nodes IN SHARE MODE`` waits until every transaction still writing nodes
   without those deltas (one that began before step 1) has finished, then lets go at once;
3. in one snapshot (repeatable read), the matches are counted and a base delta is added so
   that the deltas sum to that count; the tally is ``ready``.

Only a role that may write the team tables registers or folds tallies (a writer); a read-only
role uses the tallies there are and counts the rest itself. At most ``MAX_TALLIES`` queries
are kept, the least recently used dropped first: each costs every push a test per node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import psycopg
import psycopg.errors

TALLY_MIN = 5_000
"""Hits from which a query is tallied: counting this many rows costs about the 100 ms a whole
team search may take on a busy two-core machine."""
MAX_TALLIES = 64
FOLD_ROWS = 200
"""Delta rows of one tally folded into one when a search sees more."""
TOUCH_SECONDS = 3600
"""A tally's ``used_at`` is refreshed at most this often (a write per search would cost more)."""
LOCK_TIMEOUT = "10s"


@dataclass
class Tally:
    """One query's tally: ``mode`` ``literal`` (a LIKE pattern) or ``terms`` (a tsquery literal)."""

    mode: str
    value: str
    _rows: int = field(default=0, init=False, repr=False)
    """Delta rows seen by the last ``total``."""
    _stale: bool = field(default=False, init=False, repr=False)
    """Whether the last ``total`` found ``used_at`` due for a refresh."""

    @property
    def key(self) -> str:
        return f"{self.mode}:{self.value}"

    def total(self, conn: psycopg.Connection) -> int | None:
        """The exact total, or ``None`` when this query is not tallied (or the schema has none)."""
        try:
            row = conn.execute(
                "SELECT t.ready, x.total, x.rows, t.used_at < now() - make_interval(secs => %s) "
                "FROM pbot_tallies t, LATERAL (SELECT coalesce(sum(delta), 0), count(*) "
                "FROM pbot_tally_deltas d WHERE d.key = t.key) x(total, rows) WHERE t.key = %s",
                (TOUCH_SECONDS, self.key),
            ).fetchone()
        except (psycopg.errors.UndefinedTable, psycopg.errors.InsufficientPrivilege):
            conn.rollback()  # a server at schema version 1, or a role not granted the tallies
            return None
        if row is None or not row[0]:
            return None
        self._rows, self._stale = int(row[2]), bool(row[3])
        return int(row[1])

    def keep_up(self, conn: psycopg.Connection) -> None:
        """After a search: fold many deltas into one and mark the tally used, where allowed."""
        rows, stale = self._rows, self._stale
        if rows <= FOLD_ROWS and not stale:
            return

        def fold(conn: psycopg.Connection) -> None:
            if rows > FOLD_ROWS:
                # Deletes exactly the rows it sums: a delta a writer adds meanwhile stays.
                conn.execute(
                    "WITH gone AS (DELETE FROM pbot_tally_deltas WHERE key = %(k)s RETURNING delta) "
                    "INSERT INTO pbot_tally_deltas(key, delta) SELECT %(k)s, sum(delta) FROM gone "
                    "HAVING count(*) > 0",
                    {"k": self.key},
                )
            if stale:
                conn.execute("UPDATE pbot_tallies SET used_at = now() WHERE key = %s", (self.key,))

        _quietly(conn, fold)

    def register(self, conn: psycopg.Connection, count: Callable[[psycopg.Connection], int]) -> int | None:
        """Tally this query (steps 1-3 of the module's docstring); its total, or ``None`` when not allowed.

        ``count`` counts the query's matches in the connection's current snapshot.
        """
        conn.rollback()

        def add(conn: psycopg.Connection) -> None:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('pbot_tallies'))")
            kept = conn.execute("SELECT count(*) FROM pbot_tallies").fetchone()
            if kept is not None and kept[0] >= MAX_TALLIES:
                conn.execute(
                    "DELETE FROM pbot_tallies WHERE key IN (SELECT key FROM pbot_tallies "
                    "ORDER BY used_at LIMIT %s)",
                    (int(kept[0]) - MAX_TALLIES + 1,),
                )
                conn.execute("DELETE FROM pbot_tally_deltas WHERE key NOT IN (SELECT key FROM pbot_tallies)")
            pattern, query = (self.value, None) if self.mode == "literal" else (None, self.value)
            conn.execute(
                "INSERT INTO pbot_tallies(key, mode, pattern, query) VALUES (%s, %s, %s, %s::tsquery) "
                "ON CONFLICT (key) DO NOTHING",
                (self.key, self.mode, pattern, query),
            )

        def settle(conn: psycopg.Connection) -> None:
            conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            conn.execute("LOCK TABLE pbot_nodes IN SHARE MODE")

        found: list[int] = []

        def base(conn: psycopg.Connection) -> None:
            row = conn.execute(
                "SELECT ready FROM pbot_tallies WHERE key = %s FOR UPDATE", (self.key,)
            ).fetchone()
            if row is None or row[0]:
                return  # dropped meanwhile, or another searcher registered it
            total = count(conn)
            have = conn.execute(
                "SELECT coalesce(sum(delta), 0) FROM pbot_tally_deltas WHERE key = %s", (self.key,)
            ).fetchone()
            assert have is not None
            conn.execute(
                "INSERT INTO pbot_tally_deltas(key, delta) VALUES (%s, %s)", (self.key, total - int(have[0]))
            )
            conn.execute("UPDATE pbot_tallies SET ready = true, used_at = now() WHERE key = %s", (self.key,))
            found.append(total)

        if not (_quietly(conn, add) and _quietly(conn, settle)):
            return None
        _quietly(conn, base, isolation=psycopg.IsolationLevel.REPEATABLE_READ)
        return found[0] if found else None


def _quietly(
    conn: psycopg.Connection,
    work: Callable[[psycopg.Connection], None],
    isolation: psycopg.IsolationLevel | None = None,
) -> bool:
    """Run ``work`` in its own transaction; false when the server refused it.

    A tally is an optimisation: a role without the right to write, a lock not granted in time,
    or a concurrent registration leaves the search counting for itself. A lost connection is
    not refused work: it is raised, as any other query's.
    """
    conn.rollback()
    before = conn.isolation_level
    if isolation is not None:
        conn.isolation_level = isolation
    try:
        with conn.transaction():
            work(conn)
    except psycopg.Error:
        if conn.closed or conn.broken:
            raise
        return False
    finally:
        if isolation is not None:
            conn.isolation_level = before
    return True
