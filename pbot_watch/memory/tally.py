"""Exact totals of common literal needles: the texts that hold each, kept as texts become visible.

A literal memory search reports the exact number of sources on the current branches whose
text holds the needle. The trigram index only narrows: a needle of more than three characters
(``cursor``, ``npm test``) has every candidate text read and tested, and a common word has tens
of thousands of them, so counting costs hundreds of milliseconds where a page of hits costs a
few. So a needle whose search confirmed at least ``TALLY_MIN`` texts is *tallied*: the index
keeps the ids of the texts that hold it (``mem_tally_texts``), and a later search counts and
orders the visible sources of those texts without reading one.

A text never changes under its id (a source whose text changes gets another text), so what a
tally says of a text stays true until the text goes; what changes is which texts are on a
current branch (``mem_visible``), and every query joins that afresh. So a tally stays exact
through appends, forks, ``/tree`` moves, rewrites and truncations if it holds every text that
holds its needle among those that are visible, which the writer (``index.py``) keeps true:

* a text that becomes visible (a source appended to a branch, or a branch walked again after a
  fork, a ``/tree`` move or a rewrite) is tested against every tally (``TallyWriter``);
* a text that goes takes its tally rows with it (``forget_text``), so an id SQLite gives again
  to another text is never taken for the old one;
* a tally is registered (``register``) inside one write transaction that reads the visible
  candidates again: a text that became visible after the search read its candidates, or an id
  that names another text since (its ``mem_texts.key`` differs), is tested there; every writer
  after that transaction sees the tally.

At most ``MAX_TALLIES`` needles are kept (``search/tallies.py``, which holds what the history
index's tallies share; each costs every visible text a substring test when it
is written), the least recently used dropped first, and one unused for ``STALE_SECONDS`` goes.
The first search of a needle pays the full count (and registers the tally); the repeated ones
read the tally.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pbot_watch.search.tallies import (
    REGISTER_WAIT_MS,
    Needles,
    id_list,
    keepable,
    make_room,
    touch,
    version,
)
from pbot_watch.sqlite import transaction, try_write

TALLY_TABLES = ("mem_tallies", "mem_tally_texts")
TALLY_SCHEMA = (
    # A tallied needle (lower-cased, as a literal search compares): `used` is when a search last
    # read it; `total` the visible sources whose text holds it (the triggers below keep it).
    (
        "CREATE TABLE mem_tallies(id INTEGER PRIMARY KEY, needle TEXT UNIQUE NOT NULL, used INTEGER NOT NULL, "
        "total INTEGER NOT NULL DEFAULT 0)"
    ),
    # Every visible text (mem_texts.rowid) that holds the tally's needle, and maybe some that were visible once.
    "CREATE TABLE mem_tally_texts(tally INTEGER NOT NULL, text INTEGER NOT NULL, PRIMARY KEY (tally, text)) WITHOUT ROWID",
    "CREATE INDEX mem_tally_texts_by_text ON mem_tally_texts(text)",
    # The total follows both tables whatever order a writer changes them in: a source that comes
    # onto or leaves a current branch counts in each tally holding its text, and a text a tally
    # gains or loses brings or takes the visible sources it has.
    (
        "CREATE TRIGGER mem_tally_shown AFTER INSERT ON mem_visible WHEN EXISTS (SELECT 1 FROM mem_tallies) BEGIN "
        "UPDATE mem_tallies SET total = total + 1 WHERE id IN (SELECT tally FROM mem_tally_texts WHERE text = NEW.text); END"
    ),
    (
        "CREATE TRIGGER mem_tally_hidden AFTER DELETE ON mem_visible WHEN EXISTS (SELECT 1 FROM mem_tallies) BEGIN "
        "UPDATE mem_tallies SET total = total - 1 WHERE id IN (SELECT tally FROM mem_tally_texts WHERE text = OLD.text); END"
    ),
    (
        "CREATE TRIGGER mem_tally_gained AFTER INSERT ON mem_tally_texts BEGIN UPDATE mem_tallies SET total = total + "
        "(SELECT count(*) FROM mem_visible WHERE text = NEW.text) WHERE id = NEW.tally; END"
    ),
    (
        "CREATE TRIGGER mem_tally_lost AFTER DELETE ON mem_tally_texts BEGIN UPDATE mem_tallies SET total = total - "
        "(SELECT count(*) FROM mem_visible WHERE text = OLD.text) WHERE id = OLD.tally; END"
    ),
)

TALLIED_TEXTS = "SELECT text FROM mem_tally_texts WHERE tally = ?"
"""SQL of the ids of the texts a tally (``?``) holds."""


@dataclass(frozen=True)
class Tallied:
    """A needle's tally as one read saw it."""

    ident: int
    total: int
    """The visible sources whose text holds the needle."""
    newest: int
    """The highest source row id in the same read: ``total`` counts the sources up to it."""


def tallied(conn: sqlite3.Connection, needle: str) -> Tallied | None:
    """``needle``'s tally, or ``None`` when it has none; marks it used (now and then)."""
    if not keepable(needle):
        return None
    row = conn.execute(
        "SELECT id, used, total, (SELECT coalesce(max(rowid), 0) FROM mem_sources) FROM mem_tallies WHERE needle = ?",
        (needle,),
    ).fetchone()
    if row is None:
        return None
    ident, used, total, newest = row
    touch(conn, "mem_tallies", ident, used)
    return Tallied(int(ident), int(total), int(newest))


def register(
    conn: sqlite3.Connection,
    needle: str,
    held: Iterable[int],
    seen: tuple[int, int],
    again: Callable[[], Iterable[int]],
) -> int | None:
    """Keep a tally of ``needle`` from what a search just confirmed; its id, ``None`` if not now.

    ``held``: the visible texts that hold the needle, as the search found them when the database
    was at ``seen`` (``version``). When it changed since, ``again()`` finds them anew, inside the
    write transaction, so no writer adds a visible text between the count and the tally. Nothing
    is kept when the lock is not had within ``REGISTER_WAIT_MS`` or the database is read-only.
    """
    if not keepable(needle):
        return None

    def work() -> int:
        now = int(time.time())
        make_room(conn, "mem_tallies", "mem_tally_texts")
        texts = held if version(conn) == seen else again()
        (ident,) = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM mem_tallies").fetchone()
        # The texts before the tally row: the triggers keeping totals then find no tally to update
        # for each, and the total is counted once. One statement, not a row each (``id_list``).
        conn.execute(
            "INSERT INTO mem_tally_texts(tally, text) SELECT ?, value FROM json_each(?)",
            (ident, id_list(texts)),
        )
        conn.execute(
            "INSERT INTO mem_tallies(id, needle, used, total) VALUES (?, ?, ?, (SELECT count(*) FROM mem_tally_texts h "
            "CROSS JOIN mem_visible v ON v.text = h.text WHERE h.tally = ?))",
            (ident, needle, now, ident),
        )
        return int(ident)

    return try_write(conn, work, REGISTER_WAIT_MS)


def forget_tally(conn: sqlite3.Connection, needle: str) -> None:
    """Drop ``needle``'s tally (the next search of it counts from the texts again), in a write transaction."""
    if not keepable(needle):
        return
    with transaction(conn):
        conn.execute("DELETE FROM mem_tallies WHERE needle = ?", (needle,))
        conn.execute("DELETE FROM mem_tally_texts WHERE tally NOT IN (SELECT id FROM mem_tallies)")


def forget_text(conn: sqlite3.Connection, text: int) -> None:
    """A text goes: no tally names its id any more (SQLite may give the id to another text)."""
    conn.execute("DELETE FROM mem_tally_texts WHERE text = ?", (text,))


class TallyWriter:
    """A writer's side of the tallies: test each text that becomes visible against every needle.

    Reads the needles once (a writer of raw memory lives for one transaction); with no tally,
    it costs nothing more.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.needles = Needles(conn, "mem_tallies")
        self.rows: list[tuple[int, int]] = []

    def __bool__(self) -> bool:
        return bool(self.needles)

    def visible(self, text_id: int, text: str) -> None:
        """``text`` (the text of ``text_id``) is on a current branch now."""
        if self.needles:
            self.visible_bytes(text_id, text.encode("utf-8", "surrogatepass"))

    def visible_bytes(self, text_id: int, raw: bytes) -> None:
        """``visible`` of a text as its UTF-8 (lone surrogates kept)."""
        self.rows.extend((ident, text_id) for ident in self.needles.held_by(raw))

    def flush(self) -> None:
        """Write what the texts seen since the last flush hold."""
        if self.rows:
            self.conn.executemany(
                "INSERT OR IGNORE INTO mem_tally_texts(tally, text) VALUES (?, ?)", self.rows
            )
            self.rows = []
