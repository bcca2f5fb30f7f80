"""Times a ``terms`` query names: "in May 2023", "last March", "2022", "yesterday", "when did ...".

A person who half remembers an exchange often remembers roughly when it was. Such words are
no help to BM25 (an exchange from May rarely says "May"), but every exchange carries its time.
So a query's time words become ranges of milliseconds that ranking compares with exchange
timestamps, and "when" questions, whose answer is a time, prefer exchanges that mention one.

Relative times ("last May", "yesterday") are relative to ``now``, which the caller passes:
pure, like the rest of the query planning. English only, as the stop words are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MONTH = {name: i for i, name in enumerate(MONTHS, 1)} | {name[:3]: i for i, name in enumerate(MONTHS, 1)}
_MONTH_NAMES = "|".join(sorted(_MONTH, key=len, reverse=True))
_YEAR = r"(?:19|20)\d{2}"

_ISO_DAY = re.compile(rf"\b({_YEAR})-(\d{{2}})-(\d{{2}})\b")
_DAY_MONTH_YEAR = re.compile(
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MONTH_NAMES})\.?,?\s+({_YEAR})\b", re.IGNORECASE
)
_MONTH_DAY_YEAR = re.compile(
    rf"\b({_MONTH_NAMES})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+({_YEAR})\b", re.IGNORECASE
)
_MONTH_YEAR = re.compile(rf"\b({_MONTH_NAMES})\.?,?\s+(?:of\s+)?({_YEAR})\b", re.IGNORECASE)
_LAST_MONTH_NAME = re.compile(rf"\blast\s+({_MONTH_NAMES})\b", re.IGNORECASE)
_IN_MONTH = re.compile(rf"\b(?:in|during|since|early|late|mid)\s+({_MONTH_NAMES})\b", re.IGNORECASE)
_YEAR_ALONE = re.compile(rf"\b({_YEAR})\b")
_RELATIVE = re.compile(
    r"\b(yesterday|today|last\s+week|last\s+month|last\s+year|this\s+week|this\s+month|this\s+year)\b",
    re.IGNORECASE,
)
_WHEN = re.compile(r"\b(?:when|what\s+(?:date|day|month|year|time)|how\s+long\s+ago)\b", re.IGNORECASE)

_TIME_WORDS = re.compile(
    rf"\b(?:yesterday|today|tonight|tomorrow|ago|last|next|weekend|week|month|year|recently|"
    rf"since|morning|afternoon|evening|(?:mon|tues|wednes|thurs|fri|satur|sun)day|"
    rf"{'|'.join(MONTHS)}|{_YEAR})\b|\b\d{{4}}-\d{{2}}-\d{{2}}\b",
    re.IGNORECASE,
)

DAY_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class TimeIntent:
    """What a query says about time: ranges it names, and whether it asks for a time."""

    ranges: tuple[tuple[float, float], ...] = ()
    asks_when: bool = False
    words: frozenset[str] = frozenset()
    """The query's words that named a range: they are time, not topic, so ranking drops them."""


def _ms(day: date) -> float:
    return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000


def _month_range(year: int, month: int) -> tuple[float, float]:
    start = date(year, month, 1)
    end = date(year + month // 12, month % 12 + 1, 1)
    return _ms(start), _ms(end)


def _day_range(day: date) -> tuple[float, float]:
    return _ms(day), _ms(day) + DAY_MS


def time_intent(query: str, now: datetime) -> TimeIntent:
    """The time ranges ``query`` names (UTC days, months, years) and whether it asks "when"."""
    ranges: list[tuple[float, float]] = []
    words: set[str] = set()
    taken = [False] * len(query)

    def claim(match: re.Match[str]) -> bool:
        """Mark a match's characters used, so "May 2023" is not also "2023"; False if overlapping."""
        if any(taken[match.start() : match.end()]):
            return False
        taken[match.start() : match.end()] = [True] * (match.end() - match.start())
        words.update(w.lower() for w in re.findall(r"\w+", match.group(0)))
        return True

    def valid_day(year: int, month: int, day: int) -> date | None:
        try:
            return date(year, month, day)
        except ValueError:
            return None

    for m in _ISO_DAY.finditer(query):
        day = valid_day(int(m[1]), int(m[2]), int(m[3]))
        if day and claim(m):
            ranges.append(_day_range(day))
    for m in _DAY_MONTH_YEAR.finditer(query):
        day = valid_day(int(m[3]), _MONTH[m[2].lower()], int(m[1]))
        if day and claim(m):
            ranges.append(_day_range(day))
    for m in _MONTH_DAY_YEAR.finditer(query):
        day = valid_day(int(m[3]), _MONTH[m[1].lower()], int(m[2]))
        if day and claim(m):
            ranges.append(_day_range(day))
    ranges.extend(
        _month_range(int(m[2]), _MONTH[m[1].lower()]) for m in _MONTH_YEAR.finditer(query) if claim(m)
    )
    today = now.astimezone(UTC).date()
    for m in _LAST_MONTH_NAME.finditer(query):
        month = _MONTH[m[1].lower()]
        if claim(m):
            year = today.year if month < today.month else today.year - 1
            ranges.append(_month_range(year, month))
    for m in _IN_MONTH.finditer(query):
        month = _MONTH[m[1].lower()]
        if claim(m):
            # A month without a year: that month in any of the last few years.
            ranges.extend(_month_range(today.year - back, month) for back in range(6))
    for m in _YEAR_ALONE.finditer(query):
        if claim(m):
            year = int(m[1])
            ranges.append((_ms(date(year, 1, 1)), _ms(date(year + 1, 1, 1))))
    for m in _RELATIVE.finditer(query):
        if not claim(m):
            continue
        phrase = " ".join(m[1].lower().split())
        if phrase == "yesterday":
            ranges.append(_day_range(today - timedelta(days=1)))
        elif phrase == "today":
            ranges.append(_day_range(today))
        elif phrase.endswith("week"):
            start = today - timedelta(days=today.weekday() + (7 if phrase.startswith("last") else 0))
            ranges.append((_ms(start), _ms(start) + 7 * DAY_MS))
        elif phrase.endswith("month"):
            year, month = (today.year, today.month)
            if phrase.startswith("last"):
                year, month = (year, month - 1) if month > 1 else (year - 1, 12)
            ranges.append(_month_range(year, month))
        else:
            year = today.year - (1 if phrase.startswith("last") else 0)
            ranges.append((_ms(date(year, 1, 1)), _ms(date(year + 1, 1, 1))))
    return TimeIntent(tuple(ranges), _WHEN.search(query) is not None, frozenset(words))


def mentions_time(text: str) -> bool:
    """Whether ``text`` speaks of a time (a date, a month, "yesterday", "last week", ...)."""
    return _TIME_WORDS.search(text) is not None
