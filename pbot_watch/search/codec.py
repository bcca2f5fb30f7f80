"""How a text is kept compressed: zstd, with a dictionary trained on the database's own first texts. Pure.

Raw memory's texts (``memory/index.py``'s ``mem_texts``) and the history index's node texts
(``search/index.py``'s ``node_texts``) are kept so. Most are a few hundred bytes, too short for a
compressor to learn anything from alone: zstd and zlib both keep 0.40 of the generated benchmark
corpus's raw-memory texts then, where a 32 KB dictionary keeps 0.25 (trained on the first
``TRAIN_TEXTS``), and zstd compresses and inflates with it 15 and 5 times faster than zlib with
the same dictionary (``zdict``) does. The node texts of the 634 MB corpus's records (86 MB of
exchanges) keep 0.39 with zstd alone and 0.24 with a dictionary. A text is UTF-8 with lone
surrogates kept (``surrogatepass``): what is read back is exactly what was stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO

import zstandard

PACK_FROM = 64
"""Shorter texts are stored as plain UTF-8: a zstd frame's header would cost about what it saves."""

PLAIN = 0
"""``packed`` of a text stored as UTF-8."""
ZSTD = 1
"""``packed`` of a text compressed without a dictionary; a larger value is the id of the
dictionary it was compressed with (``mem_dicts``, ``node_dicts``)."""

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
TRAIN_TABLE_BITS = 16
"""zstd's trainer counts the samples' pieces in a table of 2 ** this entries (its ``f``; 20 by
default). 16 keeps the same ratio (node texts of the 634 MB corpus 0.235 either way, raw memory's
0.247) and the trainer's peak 7 MB over its samples instead of 16: the history index trains
inside the service, whose RSS it had raised from 134 to 152 MB on a first run."""
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
        trained = zstandard.train_dictionary(
            DICTIONARY_BYTES, [_encode(sample(t)) for t in samples if t], f=TRAIN_TABLE_BITS
        )
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
