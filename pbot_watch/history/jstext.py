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

# ECMAScript WhiteSpace + LineTerminator (what /\s/ matches); Python's \s differs (\x1c-\x1f).
JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_WS_RUN = re.compile("[" + re.escape(JS_WHITESPACE) + "]+")


def collapse_whitespace(text: str) -> str:
    """``text.replace(/\\s+/g, " ")``."""
    return _WS_RUN.sub(" ", text)


def js_trim(text: str) -> str:
    """``String.prototype.trim``."""
    return text.strip(JS_WHITESPACE)


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, as JavaScript counts ``.length``."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def utf16_slice(text: str, start: int, end: int | None = None) -> str:
    """``text.slice(start, end)`` in UTF-16 units.

    A cut through a surrogate pair keeps the lone surrogate, exactly as JavaScript does;
    ``dumps`` below writes it as a ``\\udXXX`` escape, which is what ``JSON.stringify`` emits.
    """
    if text.isascii():
        return text[start:end]
    units = text.encode("utf-16-le", "surrogatepass")
    stop = len(units) if end is None else 2 * end
    return units[2 * start : stop].decode("utf-16-le", "surrogatepass")


def js_string(value: Any) -> str:
    """``String(value)`` for the JSON values a text block can hold."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        return repr(value) if math.isfinite(value) else str(value)
    if isinstance(value, list):
        return ",".join("" if item is None else js_string(item) for item in value)
    return "[object Object]"


UNDEFINED = "undefined"


def locale_key(value: str) -> tuple[Any, ...]:
    """A sort key close to ``localeCompare`` (ICU root collation) for pbot's ``from`` values.

    For ISO timestamps of one shape it is plain code-point order, which is what matters;
    it also keeps punctuation before digits before letters and ignores case first, as ICU does.
    """

    def weight(ch: str) -> tuple[int, str]:
        if ch.isdigit():
            return (2, ch)
        if ch.isalpha():
            return (3, ch.casefold())
        if ch.isspace():
            return (0, ch)
        return (1, ch)

    return (tuple(weight(ch) for ch in value), value.swapcase())


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(value: Any, *, indent: int | None = 2) -> str:
    """JSON text with real UTF-8 characters and ``JSON.stringify``'s escapes for lone surrogates."""
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    if _LONE_SURROGATE.search(text):
        text = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text
