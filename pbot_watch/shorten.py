"""One way to shorten a text for a person or a model: cut to a limit, with ``…`` where it was cut.

Labels, snippets, status values, error messages and offline summaries all show the start of
a text too long to show whole. The rule is one: the result is at most ``limit`` characters,
the ``…`` included, so a caller's limit is the width it gets. ``flatten`` first puts the text
on one line (whitespace runs to one space, as ``collapse_whitespace`` does, ends stripped),
flattening only the head it needs: a pasted log can be 50 MB.

Offline summaries keep one difference, as a parameter that says why. ``errors.bounded``
keeps its own rule (it counts what it cut, and the error root imports nothing of ours).
"""

from __future__ import annotations

from pbot_watch.history.jstext import flat_text

ELLIPSIS = "…"


def shorten(text: str, limit: int, *, flatten: bool = False, trim_cut: bool = False) -> str:
    """``text`` whole when it fits in ``limit`` characters, else its head and ``…`` in ``limit``.

    ``trim_cut``: the head loses its trailing whitespace before the ``…`` (offline summaries,
    which records already hold: a cut that moved would rewrite them).
    """
    if flatten:
        text = _flat_head(text, limit)
    if len(text) <= limit:
        return text
    head = text[: max(limit - 1, 0)]
    return (head.rstrip() if trim_cut else head) + ELLIPSIS


def _flat_head(text: str, limit: int) -> str:
    """The flattened text, or a flattened head of it longer than ``limit`` (all a cut reads).

    The flattened head of a text is the head of its flattened whole once it is longer than
    ``limit`` without its trailing whitespace, so growing the head four times at a time reads
    a few hundred characters of a 50 MB text, not all of it.
    """
    size = 4 * max(limit, 1)
    while True:
        flat = flat_text(text[:size])
        if size >= len(text) or len(flat) > limit:
            return flat
        size *= 4
