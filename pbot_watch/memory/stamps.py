"""A source's timestamp as raw memory stores it: a small integer that orders as the text does. Pure.

Pi writes each entry's timestamp as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (JavaScript's ``toISOString``):
24 bytes of text on each of hundreds of thousands of source rows, on each current-branch row
and again in the newest-first index. Such a stamp is kept as the integer ``2 n`` instead, ``n``
its place among every stamp of that form (years 1970 to 3999, any day 01 to 31 of any month):
six bytes, where the text took 24. Any other timestamp keeps its text (``text`` of ``encode``),
and an odd key that sets it among the others: ``2 n + 1`` for the largest stamp of that form
(``n``) it comes after, ``-1`` before them all. So ``(key, text)`` orders exactly as the text's
bytes do, followed by the byte 0xFF (``query.py``'s order: newest first, a timestamp before the
longer ones it begins): the keys first, then, among the texts between the same two stamps of
the form, their own bytes. ``decode`` gives back the text exactly.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from functools import cache

_FIELDS: tuple[tuple[bytes, ...], ...] = (
    tuple(b"%04d" % year for year in range(1970, 4000)),
    (b"-",),
    tuple(b"%02d" % month for month in range(1, 13)),
    (b"-",),
    tuple(b"%02d" % day for day in range(1, 32)),
    (b"T",),
    tuple(b"%02d" % hour for hour in range(24)),
    (b":",),
    tuple(b"%02d" % minute for minute in range(60)),
    (b":",),
    tuple(b"%02d" % second for second in range(60)),
    (b".",),
    tuple(b"%03d" % milli for milli in range(1000)),
    (b"Z",),
)
"""A stamp of Pi's form, one piece after another, each piece's choices in their bytes' order."""

_FORM = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d{3})Z", re.ASCII)


def _place(choices: list[int]) -> int:
    """The place of the stamp made of these choices (one per piece of ``_FIELDS``)."""
    place = 0
    for field, choice in zip(_FIELDS, choices, strict=True):
        place = place * len(field) + choice
    return place


def _at_most(rest: bytes, piece: int) -> list[int] | None:
    """The choices of the last stamp of the form (from ``piece`` on) whose bytes and 0xFF come
    no later than ``rest``'s and 0xFF; ``None`` if every one comes later.
    """
    if piece == len(_FIELDS):
        return [] if not rest else None  # `rest` is longer: it comes before the stamp it begins
    field = _FIELDS[piece]
    width = len(field[0])
    head = (rest + b"\xff")[:width]
    at = bisect_left(field, head)
    if at < len(field) and field[at] == head:
        after = _at_most(rest[width:], piece + 1)
        if after is not None:
            return [at, *after]
    if at == 0:
        return None
    return [at - 1, *(len(f) - 1 for f in _FIELDS[piece + 1 :])]


@cache
def _odd(text: str) -> int:
    choices = _at_most(text.encode("utf-8", "surrogatepass"), 0)
    return -1 if choices is None else 2 * _place(choices) + 1


def encode(text: str) -> tuple[int, str | None]:
    """``text`` (a stored timestamp) as its key and, unless it is of Pi's form, itself."""
    form = _FORM.fullmatch(text)
    if form is not None:
        year, month, day, hour, minute, second, milli = map(int, form.groups())
        if (
            1970 <= year < 4000
            and 1 <= month <= 12
            and 1 <= day <= 31
            and hour < 24
            and minute < 60
            and second < 60
        ):
            place = (year - 1970) * 12 + month - 1
            for value, radix in ((day - 1, 31), (hour, 24), (minute, 60), (second, 60), (milli, 1000)):
                place = place * radix + value
            return 2 * place, None
    return _odd(text), text


def decode(key: int, text: str | None) -> str:
    """``encode``'s inverse: the timestamp of a stored key and text."""
    if text is not None:
        return text
    place = key >> 1
    place, milli = divmod(place, 1000)
    place, second = divmod(place, 60)
    place, minute = divmod(place, 60)
    place, hour = divmod(place, 24)
    place, day = divmod(place, 31)
    year, month = divmod(place, 12)
    return (
        f"{year + 1970:04d}-{month + 1:02d}-{day + 1:02d}T{hour:02d}:{minute:02d}:{second:02d}.{milli:03d}Z"
    )


def order(key: int, text: str | None) -> tuple[int, bytes]:
    """What sorts stored timestamps as their texts do, each followed by the byte 0xFF."""
    return key, b"" if text is None else text.encode("utf-8", "surrogatepass") + b"\xff"


NEWEST_FIRST = "{t}.stamp DESC, CAST({t}.stamp_text AS BLOB) || X'FF' DESC"
"""SQL of ``order`` descending, for a table named ``{t}`` with ``stamp`` and ``stamp_text`` columns."""
