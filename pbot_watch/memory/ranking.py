"""How a terms search scores a chunk of raw memory: BM25 with a term counted once per chunk. Pure.

The terms index (``index.py``'s ``mem_terms``) keeps which chunks hold each token and nothing
else (FTS5 ``detail=none``): positions, which FTS5 needs to count a token's occurrences in a
row, were three quarters of that table (184 MB of 596 on the generated 634 MB corpus), and no
query of raw memory asks for a phrase. Without them FTS5's own ``bm25()`` has nothing to count
and answers 0 for every row, so the score is computed here, from what the index gives:

* ``rows`` and ``tokens``: the terms rows of the whole index and their tokens (``mem_terms_stats``);
* each query term's ``having``: the rows holding it (a count of its doclist);
* each matching chunk's length in tokens (``mem_chunk_tokens``).

It is FTS5's BM25 (the same ``k1``, ``b`` and IDF, a term of nothing but common words getting
the same tiny positive weight) with every term frequency taken as 1: a chunk of 32 lines that
holds a word holds it once or a few times, and the length normalisation still prefers the
short chunk that holds it to the long one that mentions it among much else.
"""

from __future__ import annotations

import math

K1 = 1.2
"""FTS5's default: how fast a term's weight saturates (with every frequency 1, how much length matters)."""
B = 0.75
"""FTS5's default: how much a chunk's length, against the average, scales its score."""
MIN_IDF = 1e-6
"""The weight FTS5 gives a term held by half the rows or more (its IDF would be zero or negative)."""


def idf(rows: int, having: int) -> float:
    """A term's inverse document frequency among ``rows`` terms rows, ``having`` of which hold it."""
    value = math.log((rows - having + 0.5) / (having + 0.5))
    return value if value > 0 else MIN_IDF


def length_factor(tokens: int, average: float) -> float:
    """The weight of one term occurrence in a chunk of ``tokens`` tokens: BM25's ``(k1 + 1) / (1 + k1 * norm)``."""
    norm = 1 - B + B * tokens / average if average > 0 else 1.0
    return (K1 + 1) / (1 + K1 * norm)


def chunk_score(weights: float, tokens: int, average: float) -> float:
    """The score of a chunk of ``tokens`` tokens holding query terms whose IDFs sum to ``weights``."""
    return weights * length_factor(tokens, average)


def score_sql(weights: str, tokens: str, average: float) -> str:
    """``chunk_score`` as an SQL expression of the columns ``weights`` and ``tokens``: SQLite scores
    the matching chunks without a Python call per row.
    """
    if average <= 0:
        return f"({weights}) * 1.0"
    slope = K1 * B / average
    return f"({weights}) * {K1 + 1!r} / ({1 + K1 * (1 - B)!r} + {slope!r} * ({tokens}))"
