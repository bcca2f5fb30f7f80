"""Small helpers for human output of search, read and memory (rich is imported lazily by callers)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING

from pbot_watch.display import snippet_window
from pbot_watch.history.jstext import collapse_whitespace, js_trim
from pbot_watch.search.dates import wall_clock
from pbot_watch.search.tokens import query_terms

if TYPE_CHECKING:
    from rich.text import Text

SNIPPET_CHARS = 240


def local_time(iso: str) -> str:
    """An ISO timestamp as local ``YYYY-MM-DD HH:MM`` (or as given when it does not parse)."""
    try:
        moment = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    if moment.tzinfo is not None:
        moment = wall_clock(moment)
    # Not strftime's %Y, which writes the year 1 as "1": years are four digits here.
    return f"{moment.year:04d}-{moment:%m-%d %H:%M}"


def highlight(snippet: str, query: str, *, terms: bool) -> Text:
    """The snippet, whitespace collapsed and cut, with the query (or its terms) highlighted."""
    from rich.text import Text  # noqa: PLC0415

    rendered = Text(snippet_window(collapse_whitespace(snippet), query, SNIPPET_CHARS))
    needles = query_terms(query) if terms else [js_trim(query)]
    for needle in needles:
        if needle:
            rendered.highlight_regex(
                re.compile(re.escape(needle), re.IGNORECASE), style="bold black on yellow"
            )
    return rendered
