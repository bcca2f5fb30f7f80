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

The same functions tokenise queries, so "the tokenizer finds what it indexed" holds by
construction (and is property-tested). Pure: no I/O, no SQLite.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

# Scripts written without spaces between words (plus Hangul, whose words are short).
_CJK_RANGES = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x2E80, 0x2FDF),  # CJK radicals
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x312F),  # Bopomofo
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x31A0, 0x31FF),  # Bopomofo ext, Katakana ext
    (0x3400, 0x4DBF),  # CJK ext A
    (0x4E00, 0x9FFF),  # CJK unified
    (0xA960, 0xA97F),  # Hangul Jamo ext A
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xD7B0, 0xD7FF),  # Hangul Jamo ext B
    (0xF900, 0xFAFF),  # CJK compatibility
    (0xFF66, 0xFF9F),  # half-width Katakana
    (0x20000, 0x3134F),  # CJK ext B..G
)


def is_cjk(ch: str) -> bool:
    """True for a character of a script that does not separate words with spaces."""
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in _CJK_RANGES)


# A word character for the non-CJK side: letters, digits and combining marks (so "café" or
# Devanagari words stay whole); underscore and everything else separate words.
def _is_word_char(ch: str) -> bool:
    if ch == "_":
        return False
    return ch.isalnum() or unicodedata.category(ch).startswith("M")


# camelCase / PascalCase / ACRONYMWord / digit boundaries inside one word.
_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_]+", re.UNICODE)

MAX_TOKEN_CHARS = 64
"""Longer runs (hashes, base64) are cut: nobody types them whole, and they bloat the index."""


def _runs(text: str) -> Iterator[tuple[bool, str]]:
    """Split ``text`` into (is_cjk, run) pairs of word characters; everything else separates."""
    kind: bool | None = None
    start = 0
    for i, ch in enumerate(text):
        if is_cjk(ch):
            here: bool | None = True
        elif _is_word_char(ch):
            here = False
        else:
            here = None
        if here != kind:
            if kind is not None:
                yield kind, text[start:i]
            kind, start = here, i
    if kind is not None:
        yield kind, text[start:]


def _word_tokens(word: str) -> Iterator[str]:
    if not any(ch.isalnum() for ch in word):
        # Only combining marks: FTS5's unicode61 folds them away (remove_diacritics), so such a
        # token could never be matched; it is not a word.
        return
    whole = word.lower()[:MAX_TOKEN_CHARS]
    yield whole
    parts = _PARTS.findall(word)
    if len(parts) > 1:
        for part in parts:
            low = part.lower()[:MAX_TOKEN_CHARS]
            if low != whole:
                yield low


def _cjk_tokens(run: str) -> Iterator[str]:
    for i, ch in enumerate(run):
        yield ch
        if i + 1 < len(run):
            yield run[i : i + 2]


def tokens(text: str) -> list[str]:
    """Every token of ``text``, in order, with repetitions (BM25 counts them)."""
    out: list[str] = []
    # Identifier parts come from the original case, so split before lower-casing.
    for cjk, run in _runs(text):
        out.extend(_cjk_tokens(run) if cjk else _word_tokens(run))
    return out


def document(text: str) -> str:
    """The text FTS5 indexes for ``text``: its tokens separated by spaces."""
    return " ".join(tokens(text))


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
    for cjk, run in _runs(text):
        if cjk and len(run) > 1:
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
        elif cjk:
            out.append(run)
        else:
            out.extend(_word_tokens(run))
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
