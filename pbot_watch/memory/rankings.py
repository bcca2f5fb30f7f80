"""The rankings of unscoped terms searches, kept in the index until raw memory changes.

Ranking a terms search scores every chunk holding a query word and sorts every source that has
one (``query.py``'s ``_ranked``): on the generated 634 MB corpus, ``cursor offset`` ranks 71,227
sources in 0.7-1.2 s, where a page of them costs milliseconds. The same ranking is asked for
again and again: a person pages through it, repeats the query, an agent asks it once more. So
the first search keeps it in ``mem_rankings``, fixed-width records in the order they are shown,
and a later one reads its page's records and the count, nothing else.

It is kept in the database, not in a process: the CLI runs every query in a fresh process
(forked from the warm server, ``pbot_watch/prefork``, or on its own), which no cache in memory
outlives, and every process reading the index shares what one of them ranked.

A kept ranking is exact: anything that can change one empties the table, in the same
transaction (the triggers below). Scores depend on the BM25 totals (``mem_terms_stats``, which
every text that comes or goes updates); which sources are in scope, their places and their
labels depend on the current branches (``mem_visible``, which a compaction's own source enters
too). The key has the search's snapshot and query words, and a search that saw the database
change while it ranked keeps nothing (``tally.version``). At most ``KEPT`` are kept, the oldest
going first; keeping one waits at most ``KEEP_WAIT_MS`` for the write lock, and a search that
cannot (the service writing, a read-only database) answers all the same.
"""

from __future__ import annotations

import json
import sqlite3
import struct
from collections.abc import Sequence

from pbot_watch.search.tallies import version
from pbot_watch.sqlite import try_write

Ranked = tuple[int, float, int, int, int]
"""A ranked source's sort key, as ``query.py``'s ``_ranked`` gives it: context group, minus its
score (rounded as shown), its place newest first, its best chunk's first line, its row id."""

RECORD = struct.Struct("<bdiiq")
"""One ``Ranked`` on disk (25 bytes): 71,227 sources keep in 1.8 MB."""
KEPT = 8
"""Rankings kept: the last few queries (and all their pages) of a person or an agent."""
KEEP_WAIT_MS = 50

RANKING_TABLES = ("mem_rankings",)
RANKING_SCHEMA = (
    "CREATE TABLE mem_rankings(id INTEGER PRIMARY KEY, key TEXT UNIQUE NOT NULL, records BLOB NOT NULL)",
    *(
        f"CREATE TRIGGER mem_rankings_{name} AFTER {change} ON {table} "
        "WHEN EXISTS (SELECT 1 FROM mem_rankings) BEGIN DELETE FROM mem_rankings; END"
        for name, change, table in (
            ("shown", "INSERT", "mem_visible"),
            ("hidden", "DELETE", "mem_visible"),
            ("moved", "UPDATE", "mem_visible"),
            ("weighed", "UPDATE", "mem_terms_stats"),
        )
    ),
)


def ranking_key(snapshot: int, terms: Sequence[str]) -> str:
    """What names a ranking: the snapshot and the query words (ASCII: any word can be a key)."""
    return json.dumps([snapshot, list(terms)], ensure_ascii=True)


def kept_page(conn: sqlite3.Connection, key: str, offset: int, limit: int) -> tuple[list[Ranked], int] | None:
    """The page ``[offset, offset + limit)`` of the kept ranking ``key`` and its length; ``None``: none kept.

    Only the page's bytes are read (an incremental blob read), however long the ranking.
    """
    row = conn.execute("SELECT id, length(records) FROM mem_rankings WHERE key = ?", (key,)).fetchone()
    if row is None:
        return None
    ident, size = int(row[0]), int(row[1])
    total = size // RECORD.size
    first, last = min(offset, total), min(offset + limit, total)
    if first >= last:
        return [], total
    with conn.blobopen("mem_rankings", "records", ident, readonly=True) as blob:
        blob.seek(first * RECORD.size)
        data = blob.read((last - first) * RECORD.size)
    return [
        (int(g), float(m), int(n), int(line), int(r)) for g, m, n, line, r in RECORD.iter_unpack(data)
    ], total


def keep(conn: sqlite3.Connection, key: str, ranked: Sequence[Ranked], seen: tuple[int, int]) -> bool:
    """Keep ``ranked``, ranked when the database was at ``seen``; whether it was kept.

    Nothing is kept when anything was committed since ``seen`` (it may be stale already), or
    when the write lock is not had within ``KEEP_WAIT_MS``.
    """
    records = b"".join(RECORD.pack(*record) for record in ranked)

    def work() -> bool:
        if version(conn) != seen:
            return False
        conn.execute(
            "DELETE FROM mem_rankings WHERE key = ? OR id IN "
            "(SELECT id FROM mem_rankings ORDER BY id DESC LIMIT -1 OFFSET ?)",
            (key, KEPT - 1),
        )
        conn.execute("INSERT INTO mem_rankings(key, records) VALUES (?, ?)", (key, records))
        return True

    return bool(try_write(conn, work, KEEP_WAIT_MS))
