"""How raw memory keeps a source's text, and what of it the two FTS tables index. Pure.

Raw memory is mostly tool output: on a heavy user's disk, hundreds of megabytes. So:

* **the text is kept once**, compressed (zlib, level 1: about a third of the size, at well over
  100 MB/s), as UTF-8 with lone surrogates kept (``surrogatepass``): recall and the line-by-line
  confirmation of a literal hit read back exactly what the session said;
* **literal search** has a trigram index of one row per source with ``detail=none``: which
  sources hold each trigram, no positions (a tenth of the text's size, where positions cost
  more than twice it). It is a candidate filter: a source holding every trigram of the needle
  may hold the needle; ``query.py`` confirms each candidate on its lines, as it always did;
* **terms search** keeps its BM25 over chunks of ``CHUNK_LINES`` lines;
* **one huge message costs little**: only ``INDEXED_CHARS`` characters of a source are
  indexed, as for the record index's nodes (``search/index.py``). A longer source (a pasted
  log) gets no literal row and is always a literal candidate, confirmed by reading it, so
  literal search stays exact; terms search sees its first ``INDEXED_CHARS`` characters.
  Recall always has the whole text.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

from pbot_watch.search.index import INDEXED_CHARS, storable
from pbot_watch.search.tokens import document, fts_quote

CHUNK_LINES = 16
"""Lines per row of the terms index: BM25 scores chunks, so a long output is not one giant document."""

PACK_FROM = 256
"""Shorter texts are stored as plain UTF-8: zlib's header would cost more than it saves."""

_PACK_STEP = 1 << 20
_LEVEL = 1


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def pack(text: str) -> tuple[bytes, bool]:
    """The stored form of ``text`` and whether it is compressed; a huge text is encoded piece by piece."""
    if len(text) < PACK_FROM:
        return _encode(text), False
    packer = zlib.compressobj(_LEVEL)
    parts = [packer.compress(_encode(text[i : i + _PACK_STEP])) for i in range(0, len(text), _PACK_STEP)]
    parts.append(packer.flush())
    return b"".join(parts), True


def unpack(data: bytes, packed: bool) -> str:
    """``pack``'s inverse."""
    return unpacked_bytes(data, packed).decode("utf-8", "surrogatepass")


def unpacked_bytes(data: bytes, packed: bool) -> bytes:
    """The text's UTF-8 (lone surrogates kept), not decoded: a literal search tests most texts as bytes."""
    return zlib.decompress(data) if packed else data


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


def term_chunks(lines: list[str]) -> list[tuple[int, int, str]]:
    """``(first line, line count, document)`` of each terms row of a source's indexed lines."""
    seen = list(indexed_lines(lines))
    out = []
    for start in range(0, len(seen), CHUNK_LINES):
        piece = seen[start : start + CHUNK_LINES]
        out.append((start + 1, len(piece), document("\n".join(piece))))
    return out
