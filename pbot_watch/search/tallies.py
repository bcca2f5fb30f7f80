"""Tallies: the rows that hold a common literal needle, kept by the writers so a repeated search
reads them instead of confirming every candidate. What both indexes share; pure but for SQL.

A trigram index without positions only narrows a needle of more than three characters: each
candidate's text is read and tested, and a common word has tens of thousands of them (hundreds
of milliseconds, where a page of hits costs a few). So a needle whose search confirmed at least
``TALLY_MIN`` candidates is *tallied*: the index keeps the ids of the rows that hold it, every
writer tests each text it adds against every tallied needle (``Needles``), and a later search
counts and pages those ids. Raw memory's tallies are ``memory/tally.py``'s (a text's visibility
changes under it); the history index's are ``search/literal.py``'s.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable

from pbot_watch.sqlite import try_write

TALLY_MIN = 2_000
"""Confirmed texts from which a needle is tallied: confirming this many costs about 30 ms."""
MAX_TALLIES = 16
"""Tallies an index keeps: each costs every text a writer adds a substring test."""
STALE_SECONDS = 30 * 86_400
"""A tally no search used for this long is dropped at the next registration."""
TOUCH_SECONDS = 3600
"""A tally's ``used`` is refreshed at most this often: a write per search would cost more than it says."""
REGISTER_WAIT_MS = 50
"""How long a search waits for the write lock to register a tally (the service may be writing):
past it, the search answers without one and a later one registers it."""


def id_list(ids: Iterable[int]) -> str:
    """Row ids as a JSON array in ascending order, for one ``INSERT ... SELECT value FROM json_each(?)``.

    A tally of a common word is tens of thousands of rows. ``executemany`` steps its statement
    once per row, and each step runs a trigger program of its own (raw memory's ``mem_tally_gained``): on
    the 634 MB corpus, 63,623 rows took 540-930 ms that way, 76-96 ms as one statement over
    this list (load 3.2-3.5, 2 cores). In order, each B-tree is written from left to right.
    """
    return json.dumps(sorted(ids))


LOWERS_INTO_ASCII = ("\u0130", "\u212a")
"""The only characters outside ASCII whose lower case holds an ASCII one: İ (``i`` and a combining
dot) and the Kelvin sign (``k``), in Python 3.11's Unicode 14 (a test asks every code point)."""
_LOWERS_INTO_ASCII = tuple(ch.encode("utf-8") for ch in LOWERS_INTO_ASCII)


def ascii_stays(raw: bytes) -> bool:
    """Whether lower-casing the text ``raw`` (UTF-8) makes no ASCII character of one that is not.

    Then an ASCII needle is in the lower-cased text exactly when it is in ``raw.lower()`` (which
    lower-cases ASCII only): it can match only within a run of ASCII characters, and every such
    run is the same in both, each character outside ASCII lower-casing to others outside it.
    """
    return not any(mark in raw for mark in _LOWERS_INTO_ASCII)


def holds(raw: bytes, needle: str, encoded: bytes) -> bool:
    """Whether a text (its UTF-8, ``raw``) holds ``needle`` (lower-cased, ``encoded`` its UTF-8) once
    lower-cased: a literal search's test of a line, on the whole text, without decoding most.

    Lower-casing the whole text lower-cases each line (a newline stops the one rule that looks
    at neighbours, final sigma), and a needle has no newline. Found in ``raw`` with only ASCII
    lower-cased: it is in the lower-cased text (the needle's characters are their own lower
    case, a match starts and ends on character boundaries since UTF-8 never starts a character
    with a continuation byte, and lower-casing maps each character on its own). Not found in an
    ASCII text, or of an ASCII needle in a text with no character lower-casing into ASCII
    (``ascii_stays``): not there either. Otherwise (a text with other characters, which may
    lower-case into the needle) the text is decoded and asked. Most texts a search reads and
    does not find its needle in have characters outside ASCII (a phrase with 2,933 candidate
    texts, 28 MB, on the 634 MB corpus: all of them): decoding them cost it 410-470 ms of
    testing, 160-180 ms without.
    """
    if encoded in raw or encoded in raw.lower():  # most hits are there as written: no copy made
        return True
    if raw.isascii() or (needle.isascii() and ascii_stays(raw)):
        return False
    return needle in raw.decode("utf-8", "surrogatepass").lower()


def keepable(needle: str) -> bool:
    """Whether SQLite can keep ``needle`` as a tally's key: not a needle with a lone surrogate (a
    query's ``\ud800`` escape, as JSON allows), which is always counted from the texts.
    """
    try:
        needle.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def version(conn: sqlite3.Connection) -> tuple[int, int]:
    """What changes when anything is committed to the database, by another connection or this one."""
    (data_version,) = conn.execute("PRAGMA data_version").fetchone()
    return int(data_version), conn.total_changes


def touch(conn: sqlite3.Connection, table: str, ident: int, used: int) -> None:
    """Mark tally ``ident`` of ``table`` used now, when it was last marked over ``TOUCH_SECONDS`` ago."""
    now = int(time.time())
    if now - used > TOUCH_SECONDS:
        try_write(
            conn,
            lambda: conn.execute(f"UPDATE {table} SET used = ? WHERE id = ?", (now, ident)),
            REGISTER_WAIT_MS,
        )


def make_room(conn: sqlite3.Connection, table: str, rows: str, column: str = "tally") -> None:
    """Drop the tallies of ``table`` unused for ``STALE_SECONDS``, and the least recently used past
    ``MAX_TALLIES - 1``, with their ``rows`` (named by ``column``): room for one more. In a write transaction.
    """
    now = int(time.time())
    stale = [i for (i,) in conn.execute(f"SELECT id FROM {table} WHERE used < ?", (now - STALE_SECONDS,))]
    extra = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] - len(stale) - MAX_TALLIES + 1
    if extra > 0:
        stale += [
            i
            for (i,) in conn.execute(
                f"SELECT id FROM {table} WHERE used >= ? ORDER BY used, id LIMIT ?",
                (now - STALE_SECONDS, extra),
            )
        ]
    for ident in stale:
        # The tally first: its rows then leave without a total to keep.
        conn.execute(f"DELETE FROM {table} WHERE id = ?", (ident,))
        conn.execute(f"DELETE FROM {rows} WHERE {column} = ?", (ident,))


class Needles:
    """The tallied needles of one table, to test the texts a writer adds against all of them at once."""

    def __init__(self, conn: sqlite3.Connection, table: str) -> None:
        self.needles = [
            (ident, needle, needle.encode("utf-8", "surrogatepass"))
            for ident, needle in conn.execute(f"SELECT id, needle FROM {table}")
        ]

    def __bool__(self) -> bool:
        return bool(self.needles)

    def held_by(self, raw: bytes) -> list[int]:
        """The tallies whose needle the text ``raw`` (UTF-8, lone surrogates kept) holds: ``holds`` for
        every needle, the text lower-cased (and asked ``ascii_stays``, and decoded) once for all of them.
        """
        found: list[int] = []
        lowered: bytes | None = None
        decoded: str | None = None
        stays: bool | None = None
        for ident, needle, encoded in self.needles:
            if encoded not in raw:
                lowered = raw.lower() if lowered is None else lowered
                if encoded not in lowered:
                    if raw.isascii():
                        continue
                    if needle.isascii():
                        stays = ascii_stays(raw) if stays is None else stays
                        if stays:
                            continue
                    decoded = raw.decode("utf-8", "surrogatepass").lower() if decoded is None else decoded
                    if needle not in decoded:
                        continue
            found.append(ident)
        return found
