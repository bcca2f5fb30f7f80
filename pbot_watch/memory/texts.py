"""How raw memory keeps a source's text, and what of it the two FTS tables index. Pure.

Raw memory is mostly tool output: on a heavy user's disk, hundreds of megabytes. So:

* **the text is kept once** (``index.py`` shares it between the sources that have it),
  compressed with zstd and a dictionary trained on the database's own first texts
  (``search/codec.py``'s ``TextCodec``), as UTF-8 with lone surrogates kept: recall and the
  line-by-line confirmation of a literal hit read back exactly what the session said;
* **literal search** has a trigram index with ``detail=none`` of one row per *group* of texts
  (those of ``GROUP_ENTRIES`` consecutive entries of a file, ``group_slot``): which groups hold
  each trigram, no positions. A row per text took a quarter of the texts' size (105 MB for the
  442 MB of the generated 634 MB corpus's texts); neighbouring texts share most of their
  trigrams, so a group costs little more than one of them (14 MB in all).
  It is a candidate filter: every text of a group holding every trigram of the needle may hold
  it, and ``query.py`` confirms each candidate, as it always did;
* **terms search** keeps its BM25 over chunks of ``CHUNK_LINES`` lines, each named by its
  text's row id and its place in it (``CHUNK_SLOTS``). The index says which chunks hold a
  token, not where (``detail=none``): positions were three quarters of it (184 MB of the 596 MB
  of the generated 634 MB corpus; 34 MB without, and 8 MB for each chunk's length), and
  ``ranking.py`` scores a chunk from what is left;
* **one huge message costs little**: only ``INDEXED_CHARS`` characters of a source are
  indexed, as for the record index's nodes (``search/index.py``). A longer source (a pasted
  log) gets no literal row and is always a literal candidate, confirmed by reading it, so
  literal search stays exact; terms search sees its first ``INDEXED_CHARS`` characters.
  Recall always has the whole text.
"""

from __future__ import annotations

from collections.abc import Iterator

from pbot_watch.search.index import INDEXED_CHARS, storable
from pbot_watch.search.tokens import distinct_document

CHUNK_LINES = 32
"""Lines per row of the terms index: BM25 scores chunks, so a long output is not one giant document.

32, not 16 as before: without positions a chunk says only whether it holds a word, and 32 lines
are fewer rows for the same texts (on a sample of the generated corpus's texts the index and
the chunk lengths took 3.7 MB instead of 4.9), so fewer rows for a query to score too."""

CHUNK_SLOTS = 8
"""Terms rows a text's row id names itself: chunk ``i < CHUNK_SLOTS`` of text ``t`` is row
``t * CHUNK_SLOTS + i`` (its first line ``i * CHUNK_LINES + 1``), so a query goes from a terms
row to its text by arithmetic, not a lookup per row. Eight chunks are 256 lines: nearly every
source's text. A longer text's further chunks are rows from ``OVERFLOW_CHUNKS`` on, each named
in ``index.py``'s ``mem_chunks``."""
OVERFLOW_CHUNKS = 1 << 48
"""The first row id of a chunk past a text's ``CHUNK_SLOTS``: above every ``t * CHUNK_SLOTS + i``."""


def capped(text: str) -> bool:
    """Whether ``text`` is longer than what the indexes see (then literal search reads it)."""
    return len(text) > INDEXED_CHARS


def literal_document(text: str) -> str | None:
    """What a text gives its group's ``mem_literal`` row: its lower-cased text (``None`` for a capped one)."""
    if capped(text):
        return None
    return storable(text)[0].lower()


GROUP_ENTRIES = 32
"""A file's texts of this many consecutive entries share a ``mem_literal`` row (a *group*).

On the generated 634 MB corpus's 404,633 texts the trigram index took 105 MB with a row per
text, 62 with 4 texts of a file per row, 24 with 16 and 14 with 32: texts written together
share most of their trigrams. What it costs is reading: every text of a group holding a needle's
trigrams is a candidate, so a phrase's candidates (``src/module_13.py:110: the``) held 177 MB of
texts with 16 per row and 207 MB with 32, against 93 MB, and a rare word's 4 texts against 2.
A group is named by its file and the entry's place in it (``group_slot``), not by when its
texts were written, so a file read whole and one read an append at a time group alike."""
SOLO_CHARS = 16 << 10
"""A longer text has a ``mem_literal`` row of its own: a group of long outputs would make each of
them read whenever one of them holds a needle's trigrams."""
GROUP_JOIN = "\n\n"
"""What joins a group's texts in its row. No needle holds a newline (a line never does), so no
needle's trigram spans two texts; and with two, each trigram across a join holds the edge of
one text only, so a group's trigrams are the same in whatever order its texts are joined."""


def group_slot(seq: int, document: str) -> int | None:
    """The slot (``seq // GROUP_ENTRIES``) of the group a text first stored at entry ``seq`` joins;
    ``None``: a row of its own (a text longer than ``SOLO_CHARS``).
    """
    return None if len(document) > SOLO_CHARS else seq // GROUP_ENTRIES


def group_row(documents: list[str]) -> str:
    """A group's ``mem_literal`` row: its texts' documents, in the order given (row id order), joined.

    An empty document (an empty text) is left out: joined, it would give the join a trigram of its own.
    """
    return GROUP_JOIN.join(d for d in documents if d)


def indexed_lines(lines: list[str]) -> Iterator[str]:
    """The lines the terms index sees: all of them, or those of the first ``INDEXED_CHARS``
    characters of a capped source (the last one cut).
    """
    if sum(map(len, lines)) + len(lines) - 1 <= INDEXED_CHARS:
        yield from lines
        return
    left = INDEXED_CHARS
    for line in lines:
        if left <= 0:
            return
        yield line[:left]
        left -= len(line) + 1


def chunk_row(text: int, chunk: int) -> int:
    """The terms row id of chunk ``chunk < CHUNK_SLOTS`` (0-based) of text ``text``."""
    return text * CHUNK_SLOTS + chunk


TEXT_OF_CHUNK = (
    f"CASE WHEN {{row}} < {OVERFLOW_CHUNKS} THEN {{row}} / {CHUNK_SLOTS} "
    "ELSE (SELECT text FROM mem_chunks WHERE rowid = {row}) END"
)
"""SQL of the text a terms row (``{row}``) is a chunk of."""
LINE_OF_CHUNK = (
    f"CASE WHEN {{row}} < {OVERFLOW_CHUNKS} THEN {{row}} % {CHUNK_SLOTS} * {CHUNK_LINES} + 1 "
    "ELSE (SELECT line FROM mem_chunks WHERE rowid = {row}) END"
)
"""SQL of the first line of the chunk a terms row (``{row}``) is."""


def term_rows(text: str) -> list[tuple[int, int, str]]:
    """``(first line, tokens, body)`` of each terms row of a source, as ``mem_terms`` stores it.

    The body holds each token of the chunk's ``document`` once (``distinct_document``): the
    index keeps which rows hold a token and nothing else, so it is the same index, and FTS5
    tokenises a third of the words (on the generated corpus, inserting the terms rows took
    0.57 s of CPU with whole documents, 0.16 s so). ``tokens`` is the whole document's count,
    the chunk length BM25 normalises by (``ranking.py``).
    """
    rows = []
    for first, _count, piece in _chunk_texts(text):
        body, tokens = distinct_document(piece)
        rows.append((first, tokens, body))
    return rows


def _chunk_texts(text: str) -> list[tuple[int, int, str]]:
    """``(first line, line count, text)`` of each chunk of a source's indexed lines.

    A text the indexes see whole in one chunk (most texts) is its own chunk: cutting it in
    lines to join them again gives the same text, at a copy and a list of lines each.
    """
    if not capped(text) and (count := text.count("\n") + 1) <= CHUNK_LINES:
        return [(1, count, text)]
    seen = list(indexed_lines(text.split("\n")))
    return [
        (start + 1, len(piece), "\n".join(piece))
        for start in range(0, len(seen), CHUNK_LINES)
        for piece in (seen[start : start + CHUNK_LINES],)
    ]
