"""``Date.parse`` for the ISO strings pbot's search accepts, so time ranges filter as pbot's do.

pbot compares ``Date.parse(node.to) >= Date.parse(from)``: a date alone (``2026-11-29``) is UTC
midnight, a date-time without an offset is *local* time, and anything unparseable is ``NaN`` —
which makes every comparison false, so a node with an empty ``from`` is never listed. We return
milliseconds since the epoch, or ``None`` for ``NaN``. Pure apart from the local time zone,
which is exactly what JavaScript consults too.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, tzinfo

_ISO = re.compile(
    r"""^(?P<year>[+-]\d{6}|\d{4})
    (?:-(?P<month>\d{2})(?:-(?P<day>\d{2}))?)?
    (?:[T ](?P<hour>\d{2}):(?P<minute>\d{2})(?::(?P<second>\d{2})(?:[.,](?P<frac>\d+))?)?
       (?P<zone>Z|[+-]\d{2}:?\d{2})?)?$""",
    re.VERBOSE | re.IGNORECASE,
)

MAX_MS = 8.64e15  # ECMAScript's time value limit


def parse_ms(text: str) -> float | None:
    """Milliseconds since the epoch for an ISO date or date-time, ``None`` where JS gives ``NaN``."""
    match = _ISO.match(text.strip())
    if match is None:
        return None
    g = match.groupdict()
    year = int(g["year"])
    if g["year"] == "-000000":
        return None
    month = int(g["month"] or 1)
    day = int(g["day"] or 1)
    hour = int(g["hour"] or 0)
    minute = int(g["minute"] or 0)
    second = int(g["second"] or 0)
    millis = int((g["frac"] or "0")[:3].ljust(3, "0"))
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour <= 24 and minute <= 59 and second <= 59):
        return None
    if hour == 24 and (minute or second or millis):
        return None
    # V8 lets a day roll over into the next month (2026-02-30 is 2 March): no calendar check.
    utc_ms = float(_days_from_civil(year, month, day) * 86_400_000)
    utc_ms += ((hour * 60 + minute) * 60 + second) * 1000 + millis
    zone = g["zone"]
    if zone is not None:
        if zone.upper() != "Z":
            sign = -1 if zone[0] == "-" else 1
            digits = zone[1:].replace(":", "")
            utc_ms -= sign * (int(digits[:2]) * 60 + int(digits[2:])) * 60_000
    elif g["hour"] is not None:
        utc_ms -= _local_offset_ms(utc_ms)
    if abs(utc_ms) > MAX_MS:
        return None
    return utc_ms


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (any year)."""
    y = year - (month <= 2)
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _local_offset_ms(local_as_utc_ms: float) -> float:
    """The local zone's offset for a wall-clock time, as JS resolves it."""
    try:
        guess = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=local_as_utc_ms)
        offset = guess.astimezone().utcoffset()
        if offset is None:
            return 0.0
        # Re-evaluate at the corrected instant so a time near a DST change lands right.
        corrected = guess - offset
        offset2 = corrected.astimezone().utcoffset()
        return (offset2 or offset).total_seconds() * 1000
    except (OverflowError, OSError, ValueError):
        return 0.0


def wall_clock(moment: datetime, zone: tzinfo | None = None) -> datetime:
    """``moment`` on the clock of ``zone`` (the local zone for ``None``), for showing it.

    Python's datetimes end at years 1 and 9999, and a timestamp Pi (or anyone) wrote can sit on
    that edge with an offset (``9999-12-31T23:59:59-14:00`` is the year 10000 in UTC). Such a
    moment is shown on its own clock, as written: a line that cannot be converted is still a
    line, never a failed listing of every session on the page.
    """
    try:
        return moment.astimezone(zone)
    except (OverflowError, OSError, ValueError):
        return moment
