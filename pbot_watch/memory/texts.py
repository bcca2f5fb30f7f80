"""How raw memory keeps a source's text, and what of it the two FTS tables index. Pure.

Raw memory is mostly tool output: on a heavy user's disk, hundreds of megabytes. So:

* **the text is kept once** (``index.py`` shares it between the sources that have it),
  compressed with zstd and a dictionary trained on the database's own first texts
  (``TextCodec``), as UTF-8 with lone surrogates kept (``surrogatepass``): recall and the
  line-by-line confirmation of a literal hit read back exactly what the session said. Most
  sources are a few hundred bytes, too short for a compressor to learn anything from alone:
  zstd and zlib both keep 0.40 of the generated benchmark corpus's texts then, where a 32 KB
  dictionary keeps 0.25 (trained on the first ``TRAIN_TEXTS``), and zstd compresses and inflates with it 15 and 5 times faster than
  zlib with the same dictionary (``zdict``) does;
* **literal search** has a trigram index of one row per source with ``detail=none``: which
  sources hold each trigram, no positions (a tenth of the text's size, where positions cost
  more than twice it). It is a candidate filter: a source holding every trigram of the needle
  may hold the needle; ``query.py`` confirms each candidate on its lines, as it always did;
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

from collections.abc import Iterator, Sequence
from typing import IO

import zstandard

from pbot_watch.search.index import INDEXED_CHARS, storable
from pbot_watch.search.tokens import distinct_document, fts_quote

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

PACK_FROM = 64
"""Shorter texts are stored as plain UTF-8: a zstd frame's header would cost about what it saves."""

PLAIN = 0
"""``packed`` of a text stored as UTF-8."""
ZSTD = 1
"""``packed`` of a text compressed without a dictionary; a larger value is the id of the
dictionary it was compressed with (``index.py``'s ``mem_dicts``)."""

TRAIN_TEXTS = 4000
"""Texts stored before a dictionary is trained on them; the later ones are compressed with it.

On the generated 634 MB corpus, the texts after the first 40,000 keep 0.290 of their bytes with
a dictionary trained on the first 1,000 texts (one or two sessions: it learns their tool
output), 0.252 with 2,000, 0.250 with 4,000 and 8,000 no better; training takes a few seconds,
once per database."""
DICTIONARY_BYTES = 32 << 10
"""32 KB: 64 KB and 110 KB kept no less (0.251 and 0.252 against 0.249, trained on 10,000 texts)."""
SAMPLE_CHARS = 4 << 10
"""The start of each text a dictionary learns from: the samples are bounded (at most 16 MB), and
a text's start is what repeats (a tool's header, a prompt's boilerplate). 0.253 against 0.250
with the first 64 KB of each, 0.264 with the first 1 KB."""
_PACK_STEP = 1 << 20
_LEVEL = 3


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def sample(text: str) -> str:
    """What a dictionary learns of ``text``: its first ``SAMPLE_CHARS`` characters."""
    return text[:SAMPLE_CHARS]


def train(samples: Sequence[str]) -> bytes | None:
    """A dictionary for texts like ``samples``; ``None`` when zstd can learn none from them (too few, too alike)."""
    try:
        trained = zstandard.train_dictionary(DICTIONARY_BYTES, [_encode(sample(t)) for t in samples if t])
    except zstandard.ZstdError:
        return None
    return trained.as_bytes()


class TextCodec:
    """Packs texts with the current dictionary (none yet: plain zstd) and unpacks them with any.

    ``dictionaries``: every dictionary a stored text may name, by id (each above ``ZSTD``).
    """

    def __init__(self, dictionaries: dict[int, bytes], current: int | None) -> None:
        self.current = current
        self._data = dictionaries
        self._loaded: dict[int, zstandard.ZstdCompressionDict] = {}
        dictionary = self._dictionary(current) if current is not None else None
        self._packer = zstandard.ZstdCompressor(
            level=_LEVEL, dict_data=dictionary, write_checksum=False, write_dict_id=False
        )
        self._unpackers: dict[int, zstandard.ZstdDecompressor] = {}

    def _dictionary(self, ident: int) -> zstandard.ZstdCompressionDict:
        if ident not in self._loaded:
            self._loaded[ident] = zstandard.ZstdCompressionDict(self._data[ident])
        return self._loaded[ident]

    def _unpacker(self, packed: int) -> zstandard.ZstdDecompressor:
        if packed not in self._unpackers:
            dictionary = self._dictionary(packed) if packed != ZSTD else None
            self._unpackers[packed] = zstandard.ZstdDecompressor(dict_data=dictionary)
        return self._unpackers[packed]

    def pack(self, text: str) -> tuple[bytes, int]:
        """The stored form of ``text`` and its ``packed``; a huge text is encoded piece by piece."""
        if len(text) < PACK_FROM:
            return _encode(text), PLAIN
        packed = self.current if self.current is not None else ZSTD
        if len(text) <= _PACK_STEP:
            raw = _encode(text)
            data = self._packer.compress(raw)
            return (data, packed) if len(data) < len(raw) else (raw, PLAIN)
        packer = self._packer.compressobj()
        parts = [packer.compress(_encode(text[i : i + _PACK_STEP])) for i in range(0, len(text), _PACK_STEP)]
        parts.append(packer.flush())
        return b"".join(parts), packed

    def unpack(self, data: bytes, packed: int) -> str:
        """``pack``'s inverse."""
        return self.unpacked_bytes(data, packed).decode("utf-8", "surrogatepass")

    def unpacked_bytes(self, data: bytes, packed: int) -> bytes:
        """The text's UTF-8 (lone surrogates kept), not decoded: a literal search tests most texts as bytes."""
        if packed == PLAIN:
            return data
        unpacker = self._unpacker(packed)
        try:
            # One call, half the cost of a decompressobj per text (a literal search inflates
            # tens of thousands): a frame packed whole says its size, which this needs.
            return unpacker.decompress(data)
        except zstandard.ZstdError:
            return unpacker.decompressobj().decompress(data)  # packed piece by piece (a huge text)

    def reader(self, stored: IO[bytes], packed: int) -> IO[bytes]:
        """``stored`` (a stored text opened as a file) inflated as it is read, a bounded piece at a time."""
        if packed == PLAIN:
            return stored
        return self._unpacker(packed).stream_reader(stored, read_across_frames=True)


def capped(text: str) -> bool:
    """Whether ``text`` is longer than what the indexes see (then literal search reads it)."""
    return len(text) > INDEXED_CHARS


def literal_document(text: str) -> str | None:
    """The ``mem_literal`` row of a source: its lower-cased text (``None`` for a capped source)."""
    if capped(text):
        return None
    return storable(text)[0].lower()


def literal_match(needle: str) -> str:
    """An FTS5 query matching every source whose literal row holds all trigrams covering ``needle``.

    ``needle`` is lower-cased and at least three characters long. Every trigram of it is asked
    for (each a one-token string, which ``detail=none`` can answer): a source holding them all
    is far more likely to hold the needle than one holding every third, so fewer candidates are
    read to confirm, and FTS5's AND skips through the longer doclists rather than reading them
    (``module_26.py:899:`` on 634 MB: 1 candidate instead of 3,525, and a faster MATCH). Lone
    surrogates are stored as U+FFFD, so they are looked up as that.
    """
    text = storable(needle)[0]
    trigrams = dict.fromkeys(text[i : i + 3] for i in range(len(text) - 2))
    return " AND ".join(fts_quote(trigram) for trigram in trigrams)


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
