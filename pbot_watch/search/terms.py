"""Ranking terms: the tokens of ``tokens.py`` with English stop words dropped and words stemmed.

``tokens.py`` decides what a word is in every script (CJK unigrams and bigrams, identifier
parts); this module decides which words *mean* something to a ranking and which forms are the
same word. An agent half remembers "we were debugging the stemmer", and the exchange said
"debug the stemming": Snowball's English stemmer (Porter2, through PyStemmer's C code) maps
both to ``debug`` and ``stem``. Function words are left out of the ranking index altogether:
they match nearly every exchange, add nothing to BM25 but work, and a query made only of them
("what was it") has nothing to look for, so it finds nothing rather than everything.

Only the ``terms`` index goes through here; literal search and raw memory keep their own
tokens. Pure: no I/O, no SQLite.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import Stemmer  # type: ignore[import-not-found]  # PyStemmer ships no type information

from pbot_watch.history.exchanges import ASSISTANT_LABEL
from pbot_watch.search.tokens import QUERY_STOPWORDS, RunDocuments, tokens
from pbot_watch.search.tokens import query_terms as query_tokens

CONTRACTION_PIECES = frozenset(
    [
        "s",
        "t",
        "m",
        "d",
        "ll",
        "re",
        "ve",
        "don",
        "didn",
        "doesn",
        "isn",
        "wasn",
        "aren",
        "weren",
        "hasn",
        "haven",
        "hadn",
        "wouldn",
        "shouldn",
        "couldn",
        "mustn",
        "shan",
    ]
)
"""What the tokenizer leaves of contractions ("don't" -> "don t", "I'm" -> "i m")."""

STOP_WORDS = QUERY_STOPWORDS | CONTRACTION_PIECES
"""Pronouns, articles, auxiliaries and the commonest prepositions. Deliberately shorter than
Snowball's list: "not", "up", "down", "out", "off", "over", "before", "after" mean something in
talk about code ("not null", "scale up", "shut down", "opt out", "turn off")."""


@dataclass(frozen=True, slots=True)
class TermRules:
    """How text becomes ranking terms; part of what the index stores, so a change rebuilds it."""

    stemming: bool = True
    stop_words: bool = True
    sides: bool = True
    """An exchange's two sides in columns of their own; off, the whole exchange is one column
    (so BM25 normalises its length as one text), which is what measuring the sides compares."""

    @property
    def key(self) -> str:
        """A short tag the index records, so an index built under other rules is rebuilt."""
        tag = f"snowball-en:{int(self.stemming)} stop-en:{int(self.stop_words)}"
        return tag if self.sides else f"{tag} sides:0"


DEFAULT_RULES = TermRules()


@functools.cache
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


@functools.lru_cache(maxsize=100_000)
def stem(token: str) -> str:
    """A token's English stem; tokens that are not plain ASCII words pass unchanged.

    Digits, CJK and other scripts are left alone: the English rules would only mangle them.
    """
    if token.isascii() and token.isalpha() and len(token) > 2:
        return str(_stemmer().stemWord(token))
    return token


def terms(text: str, rules: TermRules = DEFAULT_RULES) -> list[str]:
    """Every ranking term of ``text``, in order, with repetitions (BM25 counts them)."""
    return _ranking_terms(tokens(text), rules)


def _ranking_terms(tokens: list[str], rules: TermRules) -> list[str]:
    if rules.stop_words:
        tokens = [t for t in tokens if t not in STOP_WORDS]
    if rules.stemming:
        tokens = [stem(t) for t in tokens]
    return tokens


@functools.cache
def _documents(rules: TermRules) -> RunDocuments:
    """Each run's ranking terms under ``rules``, made once per run (``tokens.RunDocuments``)."""
    return RunDocuments(lambda tokens: " ".join(_ranking_terms(tokens, rules)))


def document(text: str, rules: TermRules = DEFAULT_RULES) -> str:
    """What the ``terms`` index stores for ``text``: its ranking terms separated by spaces.

    ``" ".join(terms(text, rules))``, made from each run's terms: indexing a first run's
    exchanges spent most of this function's time dropping stop words and stemming token by
    token, the same words over and over.
    """
    return _documents(rules).document(text)


def query_terms(query: str, rules: TermRules = DEFAULT_RULES) -> list[str]:
    """The distinct ranking terms of a ``terms`` query, in order; empty when only stop words."""
    out = query_tokens(query)
    if rules.stop_words:
        out = [t for t in out if t not in STOP_WORDS]
    if rules.stemming:
        out = [stem(t) for t in out]
    return list(dict.fromkeys(out))


def exchange_sides(text: str) -> tuple[str, str]:
    """An exchange's text cut where the answer starts: (the person's side, the answer's side).

    The cut is the last answer label, the one ``history/exchanges.py`` writes before the answer.
    Each side keeps its label, so the CJK characters of the labels stay in the index exactly as
    before (literal search answers one- and two-character CJK needles from this index).
    """
    position = text.rfind(ASSISTANT_LABEL)
    if position < 0:
        return text, ""
    return text[:position], text[position:]
