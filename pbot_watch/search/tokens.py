"""Pre-tokenisation for the BM25 index: what a word is, in every script people write.

FTS5's ``unicode61`` tokenizer splits on spaces and punctuation only, so a Chinese or Japanese
sentence becomes one giant token and a two-character word inside it is never found; its
``trigram`` tokenizer cannot match anything shorter than three characters. We therefore hand
FTS5 a document that is already a space-separated list of tokens:

- CJK runs (Han, Hiragana, Katakana, Hangul) give every character and every pair of
  neighbouring characters, so one- and two-character words match and longer words match
  through their overlapping pairs;
- other words are lower-cased, and identifiers also give their parts
  (``parseHTTPResponse`` -> ``parsehttpresponse parse http response``, ``max_len`` -> ``max len``).

A token character is one ``unicode61`` keeps as well: a token made only of characters it
treats as separators (a Kangxi radical, say) could never be found, so such characters separate
words here too (see ``unicode_classes.py``).

The same functions tokenise queries, so "the tokenizer finds what it indexed" holds by
construction (and is property-tested). Pure: no I/O, no SQLite.

Speed matters: every exchange and every line of tool output goes through ``document`` when an
index is built. So the text is cut into runs of token characters by one compiled regex (in C),
and a run's tokens are computed once and remembered: words repeat (Zipf), so most runs of a
large text are dictionary hits, and the per-character rule runs only on new words.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from itertools import chain
from typing import NamedTuple

from pbot_watch.history.jstext import utf16_len
from pbot_watch.search.unicode_classes import (
    UNICODE61_MARK_LETTERS,
    Ranges,
    char_class,
    cjk_word_ranges,
    classes,
    word_ranges_bmp,
)


def _split_planes(ranges: Ranges) -> tuple[Ranges, Ranges]:
    """The ranges below U+10000, and those above."""
    bmp = tuple((lo, min(hi, 0xFFFF)) for lo, hi in ranges if lo <= 0xFFFF)
    astral = tuple((max(lo, 0x10000), hi) for lo, hi in ranges if hi > 0xFFFF)
    return bmp, astral


class _Patterns(NamedTuple):
    run: re.Pattern[str]
    run_bmp: re.Pattern[str]
    astral_extra: re.Pattern[str]


@functools.cache
def _patterns() -> _Patterns:
    r"""The run regexes, compiled on first use (a few ms: commands that never tokenise skip it).

    A token character is ``\w`` (``str.isalnum`` plus ``_``, and ``_`` is replaced by a space
    first: it separates ``max_len``), a combining mark, or a CJK word character; CJK letters are
    ``\w`` already, so only the blocks' unassigned code points are added.
    """
    unicode = classes()
    extra = tuple(sorted(unicode.marks + unicode.cjk_unassigned))
    bmp, astral = _split_planes(extra)
    return _Patterns(
        run=re.compile(f"[\\w{char_class(extra)}]+"),
        # The same without the extra characters above U+FFFF, which ``re`` tests one range at a
        # time for every character (three times slower): exact for any text without them.
        run_bmp=re.compile(f"[\\w{char_class(bmp)}]+"),
        astral_extra=re.compile(f"[{char_class(astral)}]"),
    )


_spelled: re.Pattern[str] | None = None
"""``_run_spelled()``'s pattern once compiled: from then on every text below U+10000 uses it."""


def _run_spelled() -> re.Pattern[str]:
    r"""``run_bmp``'s characters spelled out as ranges, without ``\w``: ``re`` makes them one table
    looked up once per character, where a class with a category tests that first (half the time
    of ``run_bmp`` on the generated corpus). Exact for a text with no character above U+FFFF (the
    astral ``\w`` letters are not in it). Compiling it takes some 30 ms, so it is compiled for the
    first text of ``SPELLED_FROM`` characters or more (a query's words and a hit's lines never
    pay it), or by ``prepare_bulk``; once compiled, short texts use it too (an index builder
    tokenises hundreds of thousands of them: 13 % less time on the generated corpus's texts).
    """
    global _spelled  # noqa: PLW0603 - compiled once per process, on first need
    if _spelled is None:
        unicode = classes()
        bmp, _astral = _split_planes(tuple(sorted(unicode.marks + unicode.cjk_unassigned)))
        _spelled = re.compile(f"[{char_class(word_ranges_bmp(bmp))}]+")
    return _spelled


def prepare_bulk() -> None:
    """Compile what tokenising many texts is fastest with: for a process that indexes (the
    service's history index, raw memory's build workers), not for one that answers a query.
    """
    _run_spelled()


SPELLED_FROM = 4096
"""Characters from which a text below U+10000 is cut in runs by ``_run_spelled``."""

_ASCII_RUN = re.compile("[0-9A-Za-z]+")
"""``run_bmp`` on an ASCII text (``_`` made a space first): its ASCII characters are these and ``_``."""


@functools.cache
def _cjk_run() -> re.Pattern[str]:
    """A run of CJK word characters (captured, for ``split``); compiled on first use."""
    return re.compile(f"([{char_class(cjk_word_ranges())}]+)")


_ASTRAL = re.compile("[\\U00010000-\\U0010ffff]")
# A word is a word only with a letter or digit unicode61 keeps: marks alone fold away
# (remove_diacritics), and UNICODE61_MARK_LETTERS are separators to it.
_ALNUM = re.compile(r"[^\W_]")

# camelCase / PascalCase / ACRONYMWord / digit boundaries inside one word.
_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_]+", re.UNICODE)

MAX_TOKEN_CHARS = 64
"""Longer runs (hashes, base64) are cut: nobody types them whole, and they bloat the index."""

RUN_CACHE_SIZE = 200_000
"""Distinct runs remembered before the memory is cleared (a few tens of MB at most)."""


def is_cjk(ch: str) -> bool:
    """True for a word character of a script that does not separate words with spaces."""
    return _cjk_run().fullmatch(ch) is not None


def _word_tokens(word: str) -> list[str]:
    if all(ord(m[0]) in UNICODE61_MARK_LETTERS for m in _ALNUM.finditer(word)):
        return []
    whole = word.lower()[:MAX_TOKEN_CHARS]
    out = [whole]
    parts = _PARTS.findall(word)
    if len(parts) > 1:
        for part in parts:
            low = part.lower()[:MAX_TOKEN_CHARS]
            if low != whole:
                out.append(low)
    return out


def _cjk_tokens(run: str) -> list[str]:
    """Every character and every neighbouring pair, in order: a, ab, b, bc, c."""
    pairs = map(str.__add__, run, run[1:])
    return [*chain.from_iterable(zip(run, pairs, strict=False)), run[-1]]


def _subruns(run: str) -> list[tuple[bool, str]]:
    """A run cut where the script changes: (is_cjk, piece) pairs, in order."""
    if run.isascii():
        return [(False, run)]
    cjk_run = _cjk_run()
    if cjk_run.search(run) is None:
        return [(False, run)]
    pieces = cjk_run.split(run)
    # split alternates: non-CJK, CJK, non-CJK, ...; empty pieces are where a run starts or ends.
    return [(i % 2 == 1, piece) for i, piece in enumerate(pieces) if piece]


def _run_tokens(run: str) -> list[str]:
    out: list[str] = []
    for cjk, piece in _subruns(run):
        out.extend(_cjk_tokens(piece) if cjk else _word_tokens(piece))
    return out


class RunDocuments(dict[str, str]):
    """Run -> what ``make`` makes of its tokens (by default the tokens joined by spaces), computed
    on first sight (``__missing__``).

    A run's tokens are the same wherever it occurs, so a text's document is made of its runs'
    (``document``): each distinct run is tokenised once, and a text costs a dictionary lookup
    per run, in C (``map``), instead of Python's work per token.
    """

    def __init__(self, make: Callable[[list[str]], str] = " ".join) -> None:
        super().__init__()
        self.make = make

    def __missing__(self, run: str) -> str:
        if len(self) >= RUN_CACHE_SIZE:
            self.clear()
        doc = self[run] = self.make(_run_tokens(run))
        return doc

    def document(self, text: str) -> str:
        """The runs' documents of ``text``, in order, separated by spaces (empty ones left out)."""
        return " ".join(filter(None, map(self.__getitem__, _runs(text))))


_DOCUMENTS = RunDocuments()


class _RunTokenCounts(dict[str, int]):
    """Run -> how many tokens its document has (``distinct_document``), computed on first sight."""

    def __missing__(self, run: str) -> int:
        if len(self) >= RUN_CACHE_SIZE:
            self.clear()
        doc = _DOCUMENTS[run]
        count = self[run] = doc.count(" ") + 1 if doc else 0
        return count


_TOKEN_COUNTS = _RunTokenCounts()


def _runs(text: str) -> list[str]:
    """The runs of token characters of ``text``, in order."""
    if "_" in text:
        text = text.replace("_", " ")
    if text.isascii():
        return _ASCII_RUN.findall(text)
    patterns = _patterns()
    # Below U+10000 only (UTF-16 one unit per character: the length is a copy's, five times
    # faster than a regex scan for astral characters).
    if utf16_len(text) == len(text):
        if _spelled is not None:
            return _spelled.findall(text)
        return (_run_spelled() if len(text) >= SPELLED_FROM else patterns.run_bmp).findall(text)
    astral = "".join(_ASTRAL.findall(text))
    pattern = patterns.run if patterns.astral_extra.search(astral) else patterns.run_bmp
    return pattern.findall(text)


def document(text: str) -> str:
    """The text FTS5 indexes for ``text``: its tokens separated by spaces."""
    return _DOCUMENTS.document(text)


def distinct_document(text: str) -> tuple[str, int]:
    """``document(text)`` with each run's tokens once, and how many tokens ``document(text)`` has.

    For an index that keeps which rows hold a token and not how often (FTS5 ``detail=none``):
    the same rows hold the same tokens, and the index tokenises each word once. Runs are
    counted and made distinct in C (``sum``/``map``, ``dict.fromkeys``), in the order first
    seen, so the body is the same in every process (a contentless table deletes a row by
    repeating it).
    """
    runs = _runs(text)
    total = sum(map(_TOKEN_COUNTS.__getitem__, runs))
    return " ".join(filter(None, map(_DOCUMENTS.__getitem__, dict.fromkeys(runs)))), total


def tokens(text: str) -> list[str]:
    """Every token of ``text``, in order, with repetitions (BM25 counts them)."""
    doc = document(text)
    return doc.split(" ") if doc else []


# Function words that carry no meaning in a ``terms`` query. Dropped from queries only (never
# from the index), and only when something else is left, so "the" alone still finds "the".
QUERY_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "hers",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "she",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "us",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)


def _query_tokens(text: str) -> list[str]:
    """Like ``tokens``, but a CJK run of two or more characters gives only its bigrams.

    The bigrams already say which characters appear, in order; the single characters of a
    longer word match nearly everything and would only slow BM25 down and blur its ranking.
    """
    out: list[str] = []
    for run in _runs(text):
        for cjk, piece in _subruns(run):
            if cjk and len(piece) > 1:
                out.extend(map(str.__add__, piece, piece[1:]))
            elif cjk:
                out.append(piece)
            else:
                out.extend(_word_tokens(piece))
    return out


def query_terms(query: str) -> list[str]:
    """The distinct tokens of a ``terms`` query, in order, function words dropped when possible."""
    seen: dict[str, None] = {}
    for token in _query_tokens(query):
        seen.setdefault(token, None)
    terms = list(seen)
    meaningful = [t for t in terms if t not in QUERY_STOPWORDS]
    return meaningful or terms


def fts_quote(token: str) -> str:
    """A token as an FTS5 string literal (a phrase), safe for any characters."""
    return '"' + token.replace('"', '""') + '"'


def fts_any(terms: list[str]) -> str:
    """An FTS5 query matching rows that contain any of ``terms``."""
    return " OR ".join(fts_quote(t) for t in terms)
