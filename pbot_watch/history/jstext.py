"""The few JavaScript string behaviours personal-bot's output depends on.

pbot is TypeScript: its session names are cut in UTF-16 code units, its whitespace class is
ECMAScript's, ``String(x)`` turns a missing text into ``"undefined"``, and top-level nodes are
ordered with ``localeCompare``. Records must come out the same, so these live in one place.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import msgspec

from pbot_watch.pi.untrusted import LONE_SURROGATE, well_formed_value

# ECMAScript WhiteSpace + LineTerminator (what /\s/ matches); Python's \s differs (\x1c-\x1f).
JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_WS_RUN = re.compile("[" + re.escape(JS_WHITESPACE) + "]+")


def collapse_whitespace(text: str) -> str:
    r"""``text.replace(/\s+/g, " ")``."""
    return _WS_RUN.sub(" ", text)


_SPLIT_FLAT_CHARS = 1 << 16
"""Texts up to this long are flattened through a list of their words (a label's head is a few
hundred characters); a longer one by the regex, which makes no such list."""


def flat_text(text: str) -> str:
    """``collapse_whitespace(text).strip()``: the text on one line, its ends stripped (Python's ``strip``).

    Every label raw memory derives is one (``shorten``'s ``flatten``). Without the characters
    where Python's whitespace and JavaScript's differ, that is ``" ".join(text.split())``, in C
    and several times faster than the regex substitution, which is kept for the other texts.
    """
    # The characters where Python's whitespace (``str.split``, ``str.strip``) and ECMAScript's
    # differ, each looked for by ``in`` (a generator over them costs more than the tests).
    if (
        len(text) > _SPLIT_FLAT_CHARS
        or "\x1c" in text
        or "\x1d" in text
        or "\x1e" in text
        or "\x1f" in text
        or "\x85" in text
        or "\ufeff" in text
    ):
        return collapse_whitespace(text).strip()
    return " ".join(text.split())


def js_trim(text: str) -> str:
    """``String.prototype.trim``."""
    return text.strip(JS_WHITESPACE)


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, as JavaScript counts ``.length``."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def utf16_key(text: str) -> bytes:
    """A sort key giving JavaScript's default string order (UTF-16 code units)."""
    return text.encode("utf-16-be", "surrogatepass")


def utf16_slice(text: str, start: int, end: int | None = None) -> str:
    r"""``text.slice(start, end)`` in UTF-16 units.

    A cut through a surrogate pair keeps the lone surrogate, exactly as JavaScript does;
    ``dumps`` below writes it as a ``\\udXXX`` escape, which is what ``JSON.stringify`` emits.
    """
    if text.isascii():
        return text[start:end]
    units = text.encode("utf-16-le", "surrogatepass")
    stop = len(units) if end is None else 2 * end
    return units[2 * start : stop].decode("utf-16-le", "surrogatepass")


def collapsed_head(text: str, units: int) -> str:
    r"""``text.replace(/\s+/g, " ").slice(0, units)``, collapsing only as much as the cut needs.

    The collapsed head of a text is a head of its collapsed whole (a whitespace run cut at the
    end collapses to the same one space), so a 50 MB pasted log costs a few hundred characters
    here, not seconds. Session names and search previews are both made this way.
    """
    length = 4 * units
    while True:
        collapsed = collapse_whitespace(text[:length])
        if length >= len(text) or utf16_len(collapsed) > units:
            return utf16_slice(collapsed, 0, units)
        length *= 4


def js_number(value: float) -> str:
    """``Number.prototype.toString()``: JSON numbers are doubles in JavaScript, printed its way.

    Python's ``repr`` gives the same shortest round-trip digits; only the layout differs
    (``1e-7`` not ``1e-07``, ``1e+21``, no ``.0``), and integers beyond 2**53 lose precision.
    """
    try:
        number = float(value)
    except OverflowError:
        number = math.inf if value > 0 else -math.inf
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    if number == 0:
        return "0"
    sign = "-" if number < 0 else ""
    mantissa, _, exponent = repr(abs(number)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    every = whole + fraction
    significant = every.lstrip("0")
    digits = significant.rstrip("0")
    # value = 0.<digits> x 10**point, as ECMAScript's Number::toString defines n
    point = len(whole) - (len(every) - len(significant)) + (int(exponent) if exponent else 0)
    k, n = len(digits), point
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mark = "+" if e >= 0 else "-"
        text = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + mark + str(abs(e))
    return sign + text


def js_string(value: Any) -> str:
    """``String(value)`` for the JSON values a text block can hold."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return js_number(value)
    if isinstance(value, list):
        return ",".join("" if item is None else js_string(item) for item in value)
    return "[object Object]"


UNDEFINED = "undefined"


def js_truthy(value: Any) -> bool:
    """``Boolean(value)`` for a JSON value: empty arrays and objects are true in JavaScript."""
    if isinstance(value, (list, dict)):
        return True
    if isinstance(value, float) and math.isnan(value):
        return False
    return bool(value)


# ICU's root collation order of printable ASCII (what ``localeCompare`` uses under en-US), as
# printed by Node 22: punctuation and symbols are not ignorable and sort before digits, letters
# compare case-insensitively first and put lowercase first only when all else is equal.
_ICU_ASCII_ORDER = "\t\n\v\f\r _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789abcdefghijklmnopqrstuvwxyz"
_PRIMARY = {ch: i for i, ch in enumerate(_ICU_ASCII_ORDER)}
_PRIMARY.update({ch.upper(): i for ch, i in list(_PRIMARY.items()) if ch.isalpha()})


def locale_key(value: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A sort key equal to ``localeCompare`` (ICU root collation) for ASCII text such as timestamps.

    Primary weights first (case folded), then case (lowercase first); control characters
    are ignorable. Other characters sort after ASCII by code point, an approximation.
    """
    primary: list[int] = []
    tertiary: list[int] = []
    for ch in value:
        weight = _PRIMARY.get(ch)
        if weight is None:
            if ord(ch) < 0x20 or ord(ch) == 0x7F:
                continue
            weight = 0x100 + ord(ch)
        primary.append(weight)
        tertiary.append(1 if "A" <= ch <= "Z" else 0)
    return tuple(primary), tuple(tertiary)


def _plain(value: Any) -> bool:
    """Whether ``value`` holds only strings, integers, booleans, nulls, lists and string-keyed dicts.

    For those, msgspec writes the very bytes ``json.dumps`` does, six times faster on long texts
    (a 50 MB tool output: 0.08 s, not 0.53); floats are the exception (json.dumps writes
    ``1e-07`` and ``NaN``, msgspec ``1e-7`` and ``null``), so a value holding one takes the
    ``json.dumps`` road, as does anything else unexpected.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is dict:
            for key, inner in item.items():
                if type(key) is not str:
                    return False
                stack.append(inner)
        elif kind is list:
            stack.extend(item)
        else:
            return False
    return True


def dumps_utf8(value: Any) -> bytes:
    """``JSON.stringify(value)`` as UTF-8 bytes; the lone-surrogate pass runs only when needed.

    Records are written on every append, so this is on the live path: a plain value goes
    through msgspec (which refuses a lone surrogate, sending it to the exact path below).
    """
    if _plain(value):
        try:
            return msgspec.json.encode(value)
        except UnicodeEncodeError:
            pass
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


def to_well_formed(value: Any) -> Any:
    """``String.prototype.toWellFormed`` on every string of a JSON value: lone surrogates become U+FFFD.

    For what must be valid UTF-8 (SQLite text, a terminal, the MCP transport). A lone surrogate
    is half of a character, an emoji cut by a length limit, say: not text anyone wrote. The rule
    is the session reader's own (``pi.untrusted``), which applies it to ids and cwds as it parses.
    """
    return well_formed_value(value)


def dumps(value: Any, *, indent: int | None = 2) -> str:
    """JSON text with real UTF-8 characters and ``JSON.stringify``'s escapes for lone surrogates."""
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    if LONE_SURROGATE.search(text):
        text = LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text
