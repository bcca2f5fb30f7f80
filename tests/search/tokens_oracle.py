"""The per-character tokenizer ``search/tokens.py`` had before it was rewritten with regexes.

Kept as the test oracle: the fast tokenizer must give exactly these tokens for every text.
It is the old code with one fix, the same one the new code makes: a character is a token
character only if FTS5's ``unicode61`` keeps it too. So the symbols, punctuation and marks that
sit in the CJK blocks (Kangxi and CJK radicals, strokes, kana voicing marks, the katakana
double hyphen and middle dot) are not CJK word characters, and a word needs a letter or digit
that ``unicode61`` does not file as a mark (``UNICODE61_MARK_LETTERS``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

from pbot_watch.search.tokens import MAX_TOKEN_CHARS, QUERY_STOPWORDS
from pbot_watch.search.unicode_classes import CJK_BLOCKS, UNICODE61_MARK_LETTERS


def is_cjk(ch: str) -> bool:
    code = ord(ch)
    if not any(lo <= code <= hi for lo, hi in CJK_BLOCKS):
        return False
    return unicodedata.category(ch)[0] not in "SPM"  # the fix


def _is_word_char(ch: str) -> bool:
    if ch == "_":
        return False
    return ch.isalnum() or unicodedata.category(ch).startswith("M")


_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_]+", re.UNICODE)


def _runs(text: str) -> Iterator[tuple[bool, str]]:
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
    if not any(ch.isalnum() and ord(ch) not in UNICODE61_MARK_LETTERS for ch in word):  # the fix
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
    out: list[str] = []
    for cjk, run in _runs(text):
        out.extend(_cjk_tokens(run) if cjk else _word_tokens(run))
    return out


def document(text: str) -> str:
    return " ".join(tokens(text))


def _query_tokens(text: str) -> list[str]:
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
    seen: dict[str, None] = {}
    for token in _query_tokens(query):
        seen.setdefault(token, None)
    terms = list(seen)
    meaningful = [t for t in terms if t not in QUERY_STOPWORDS]
    return meaningful or terms
