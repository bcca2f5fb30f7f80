"""Which indexed nodes hold a literal needle: the trigram index narrows, texts confirm, tallies remember.

``nodes_literal`` keeps trigrams without positions (``detail=none``). With positions it was the
largest thing in ``search.db`` (161 of the 272 MB the history index took for the 634 MB
corpus's 77,517 nodes); without, 20 MB. What that costs is exactness for needles of more than
three characters: the index then says which nodes hold every trigram of the needle, and each
such candidate's text is read and tested (``tallies.holds``). A rare needle has a few
candidates; a common one tens of thousands, and testing them all costs hundreds of
milliseconds. So, as raw memory does (``memory/tally.py``), a needle that had at least
``TALLY_MIN`` candidates is *tallied*: ``node_tally_nodes`` keeps the nodes holding it, the
index's writer tests every text it adds against every tallied needle and takes a node's rows
with its text, and the next search of it reads the tally.

A tally is exact because it is registered only when nothing changed since its nodes were read:
``generation`` (bumped by every change of ``node_texts``) is read before the candidates and
again inside the write transaction that keeps the tally; a writer after that sees the tally.
Only the literal index's nodes are tallied; a capped node is not in it and is tested on its own
by the query (``queries._capped_holding``).
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pbot_watch.search.index import storable
from pbot_watch.search.tallies import REGISTER_WAIT_MS, TALLY_MIN, holds, id_list, keepable, make_room, touch
from pbot_watch.search.tokens import fts_quote
from pbot_watch.sqlite import try_write

if TYPE_CHECKING:
    from pbot_watch.search.index import SearchIndex

MIN_TRIGRAM_CHARS = 3
"""A trigram index answers substrings of three characters or more; shorter ones need other means."""


def literal_match(needle: str) -> str:
    """An FTS5 query matching every row of a trigram index that holds all trigrams covering ``needle``.

    ``needle`` is lower-cased and at least three characters long. Every trigram of it is asked
    for (each a one-token string, which ``detail=none`` can answer): a text holding them all
    is far more likely to hold the needle than one holding every third, so fewer candidates are
    read to confirm, and FTS5's AND skips through the longer doclists rather than reading them
    (``module_26.py:899:`` in raw memory on 634 MB: 1 candidate instead of 3,525, and a faster
    MATCH). Lone surrogates are stored as U+FFFD, so they are looked up as that.
    """
    text = storable(needle)[0]
    trigrams = dict.fromkeys(text[i : i + 3] for i in range(len(text) - 2))
    return " AND ".join(fts_quote(trigram) for trigram in trigrams)


def trigram_exact(needle: str) -> bool:
    """Whether the trigram index alone answers ``needle`` exactly: it is one trigram, stored as it is
    (a needle with U+FFFD or a lone surrogate may match a stand-in, so it is confirmed).
    """
    return len(needle) == MIN_TRIGRAM_CHARS and storable(needle)[0] == needle and "\ufffd" not in needle


@dataclass(frozen=True)
class Held:
    """The indexed nodes holding a needle, for a query of ``nodes n``: ``count`` of them, and two
    conditions on ``n.rowid`` (with ``params``) saying a node is one.

    ``among`` drives the query from the held nodes (few: they are then sorted); ``probe`` is tested
    on each node a walk of ``nodes_order`` reads, newest first (many: a page is a few rows away).
    Each, the other way round, took 37 ms for a page of a word in 56,345 of the 634 MB corpus's
    nodes, where ``probe`` takes 0.1 ms.
    """

    among: str
    probe: str
    params: dict[str, Any]
    count: int


_MATCH = "SELECT rowid FROM nodes_literal WHERE nodes_literal MATCH :literal"
_TALLIED = "SELECT node FROM node_tally_nodes WHERE tally = :tally"
_HELD = "SELECT node FROM temp.node_held"


def _matched(match: str, count: int) -> Held:
    # No probe of an FTS table by row id is cheap: the list is made once ("+": not driven by it).
    return Held(f"n.rowid IN ({_MATCH})", f"+n.rowid IN ({_MATCH})", {"literal": match}, count)


def _in_tally(tally: int, count: int) -> Held:
    probe = "EXISTS (SELECT 1 FROM node_tally_nodes WHERE tally = :tally AND node = n.rowid)"
    return Held(f"n.rowid IN ({_TALLIED})", probe, {"tally": tally}, count)


def held_nodes(index: SearchIndex, needle: str) -> Held:
    """The nodes of ``nodes_literal`` whose lower-cased text holds ``needle`` (three characters or more)."""
    conn = index.conn
    match = literal_match(needle)
    if trigram_exact(needle):
        (count,) = conn.execute(f"SELECT count(*) FROM ({_MATCH})", {"literal": match}).fetchone()
        return _matched(match, int(count))
    tally = _tallied(conn, needle)
    if tally is not None:
        (count,) = conn.execute(f"SELECT count(*) FROM ({_TALLIED})", {"tally": tally}).fetchone()
        return _in_tally(tally, int(count))
    seen = _generation(conn)
    held, candidates = _confirmed(index, needle, match)
    if candidates >= TALLY_MIN:
        tally = _register(conn, needle, held, seen)
        if tally is not None:
            return _in_tally(tally, len(held))
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS node_held(node INTEGER PRIMARY KEY)")
    conn.execute("DELETE FROM temp.node_held")
    conn.execute("INSERT INTO temp.node_held(node) SELECT value FROM json_each(?)", (id_list(held),))
    probe = "EXISTS (SELECT 1 FROM temp.node_held WHERE node = n.rowid)"
    return Held(f"n.rowid IN ({_HELD})", probe, {}, len(held))


def _generation(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0])


def _tallied(conn: sqlite3.Connection, needle: str) -> int | None:
    if not keepable(needle):
        return None
    row = conn.execute("SELECT id, used FROM node_tallies WHERE needle = ?", (needle,)).fetchone()
    if row is None:
        return None
    touch(conn, "node_tallies", row[0], row[1])
    return int(row[0])


def _confirmed(index: SearchIndex, needle: str, match: str) -> tuple[set[int], int]:
    """The candidates of ``match`` whose text holds ``needle``, and how many candidates there were.

    Each text is tested as stored (its UTF-8, inflated), without decoding most (``holds``); one
    with lone surrogates by its exact form.
    """
    encoded = needle.encode("utf-8", "surrogatepass")
    codec = index.texts.codec()
    held: set[int] = set()
    candidates = 0
    for rowid, stored, packed, text_json in index.conn.execute(
        f"SELECT rowid, text, packed, text_json FROM node_texts WHERE rowid IN ({_MATCH})", {"literal": match}
    ):
        candidates += 1
        if text_json is not None:
            found = needle in json.loads(text_json).lower()
        elif isinstance(stored, bytes):
            found = holds(codec.unpacked_bytes(stored, packed), needle, encoded)
        else:  # kept plain, as TEXT (NodeTexts.packer)
            found = holds(stored.encode("utf-8", "surrogatepass"), needle, encoded)
        if found:
            held.add(rowid)
    return held, candidates


def _register(conn: sqlite3.Connection, needle: str, held: set[int], seen: int) -> int | None:
    """Keep ``held`` as ``needle``'s tally if no node text changed since ``seen``; its id, or ``None``."""
    if not keepable(needle):
        return None

    def work() -> int | None:
        if _generation(conn) != seen:
            return None  # a later search registers it
        make_room(conn, "node_tallies", "node_tally_nodes")
        (ident,) = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM node_tallies").fetchone()
        conn.execute(
            "INSERT INTO node_tallies(id, needle, used) VALUES (?, ?, ?)", (ident, needle, int(time.time()))
        )
        conn.execute(
            "INSERT INTO node_tally_nodes(tally, node) SELECT ?, value FROM json_each(?)",
            (ident, id_list(held)),
        )
        return int(ident)

    return try_write(conn, work, REGISTER_WAIT_MS)
