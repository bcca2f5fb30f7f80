"""What a person or a model reads: role labels in the reader's language, snippets that show the match.

Records keep personal-bot's text, whose exchanges begin ``用户：`` and answer ``助手：`` (the
record contract: pbot compares records as text). What pbot-watch shows (the CLI, ``/history``,
the tools' results, the session names it derives) renders those two labels in the reader's
language: the ``display_labels`` setting (``[display] labels``), or with ``auto`` the locale
(``LC_ALL``, ``LC_MESSAGES``, ``LANG``). ``pbot`` and ``zh`` show the record's own labels.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Literal

LabelSetting = Literal["auto", "pbot", "en", "zh"]
PBOT_LABELS = ("用户：", "助手：")
ENGLISH_LABELS = ("User:", "Assistant:")
_LOCALE_VARIABLES = ("LC_ALL", "LC_MESSAGES", "LANG")
# A label stands at the start of the text or after whitespace, and is followed by whitespace
# (``用户：\n`` in a record, ``用户： `` once whitespace is collapsed) or the end.
_PBOT = re.compile(r"(?<!\w)(用户：|助手：)(?=\s|$)")
_ENGLISH = re.compile(r"(?<!\w)(user:|assistant:)(?=\s|$)", re.IGNORECASE)
# pbot's snippet starts this many units before the hit: a hit this far in means it was cut.
SNIPPET_BEFORE = 80
# Fields of a tool's structured result that carry record text.
TEXT_FIELDS = frozenset({"name", "preview", "snippet", "text"})


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 file``, ``2 files`` (``many`` when the plural is not ``noun + "s"``)."""
    return f"{count} {noun}" if count == 1 else f"{count} {many or noun + 's'}"


def language(setting: LabelSetting = "auto", environ: Mapping[str, str] | None = None) -> Literal["en", "zh"]:
    """The labels' language: the setting's, or for ``auto`` the first locale variable that is set."""
    if setting in ("pbot", "zh"):
        return "zh"
    if setting == "en":
        return "en"
    env = os.environ if environ is None else environ
    for name in _LOCALE_VARIABLES:
        value = env.get(name)
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def relabel(text: str, lang: Literal["en", "zh"]) -> str:
    """``text`` with pbot's role labels in ``lang`` (unchanged for ``zh``)."""
    if lang == "zh" or "：" not in text:
        return text
    return _PBOT.sub(lambda m: ENGLISH_LABELS[PBOT_LABELS.index(m.group(1))], text)


def relabel_result(value: Any, lang: Literal["en", "zh"]) -> Any:
    """A structured result (JSON values) with the labels of its text fields relabelled."""
    if lang == "zh":
        return value
    if isinstance(value, dict):
        return {
            k: relabel(v, lang) if k in TEXT_FIELDS and isinstance(v, str) else relabel_result(v, lang)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [relabel_result(item, lang) for item in value]
    return value


SHOWN_CHARS = 60
"""A hit's window in Pi's ``/history`` menu: beside the date and kind, it fits an 80-column terminal."""


def for_person(structured: Any, lang: Literal["en", "zh"], query: str) -> Any:
    """A tool's structured result as Pi shows it to a person: labels relabelled, each hit's window.

    ``shown`` is the part of a search hit's snippet that holds the match (pbot's snippet begins
    80 units before it, past what a menu line shows).
    """
    value = relabel_result(structured, lang)
    if isinstance(value, dict) and isinstance(value.get("matches"), list) and query.strip():
        for match in value["matches"]:
            if isinstance(match, dict) and isinstance(match.get("snippet"), str):
                match["shown"] = snippet_window(match["snippet"], relabel(query, lang), SHOWN_CHARS)
    return value


def relabel_model(value: Any, lang: Literal["en", "zh"]) -> Any:
    """A result model (search hits, a node page) copied with its text fields relabelled, for people."""
    from pydantic import BaseModel  # noqa: PLC0415

    if lang == "zh":
        return value
    if isinstance(value, BaseModel):
        fields = {
            name: relabel(item, lang)
            if name in TEXT_FIELDS and isinstance(item, str)
            else relabel_model(item, lang)
            for name in type(value).model_fields
            if (item := getattr(value, name)) is not None
        }
        return value.model_copy(update=fields)
    if isinstance(value, list):
        return [relabel_model(item, lang) for item in value]
    return value


def record_query(query: str) -> str:
    """A literal query as records spell it: an English role label becomes pbot's.

    A person who reads ``User:`` in a hit and searches for it means the label the record holds.
    """
    if ":" not in query:
        return query
    return _ENGLISH.sub(lambda m: PBOT_LABELS[m.group(1).lower() == "assistant:"], query)


def snippet_window(snippet: str, query: str, width: int) -> str:
    """``width`` characters of a whitespace-collapsed snippet that show the match, starting at a word.

    pbot's snippet starts 80 units before the hit, often inside a word; a menu that shows its
    first 80 characters would never show the match. The window starts a third of ``width``
    before the match (never inside a word) and ends at ``width``, with ``…`` where it cut.
    """
    flat = " ".join(snippet.split())
    lower = flat.lower()
    phrase = " ".join(query.split()).lower()
    # The whole query (literal search), else its first word found (terms search).
    at = lower.find(phrase) if phrase else -1
    if at < 0:
        at = min((i for word in phrase.split() if (i := lower.find(word)) >= 0), default=-1)
    words = phrase.split()
    cut = bool(words) and snippet.lower().find(words[0]) >= SNIPPET_BEFORE  # starts inside the text
    start = 0
    if at > 0:
        start = max(0, at - width // 3)
        if (start > 0 or cut) and (start == 0 or not flat[start - 1].isspace()):
            space = flat.find(" ", start, at)
            start = space + 1 if space >= 0 else at
    lead = "…" if start > 0 else ""
    body = flat[start:]
    room = width - len(lead)
    if len(body) > room:
        end = body.rfind(" ", 0, room)
        body = body[: end if end > room // 2 else room - 1].rstrip() + "…"
    return lead + body
