r"""One JSONL line to a value, as Pi's ``JSON.parse`` sees it, at the speed of a C decoder.

Decoding is most of the cost of reading a session, so lines go to msgspec first: it reads the
bytes without a separate UTF-8 decode and is about twice as fast as the standard library on
Pi's lines (``bench/first_run.py`` measures both). Where msgspec and ``JSON.parse`` could
disagree, msgspec refuses the line, and the standard library, set up to behave like
``JSON.parse``, decides:

* invalid UTF-8 (msgspec refuses it): Node decodes a file with U+FFFD replacement before
  ``JSON.parse`` sees it, so the line is decoded that way, then parsed;
* ``\ud800`` escapes without their pair (msgspec refuses them): JavaScript keeps the lone
  surrogate in the string, and so does Python's ``json``;
* numbers beyond a double (``1e400``, which msgspec refuses): ``JSON.parse`` gives Infinity;
* ``NaN`` and ``Infinity`` literals: both refuse them, as ``JSON.parse`` does.

Everything else is the same on both paths: duplicate keys (the last one wins), integers of
any size (kept exact; ``jstext.js_number`` prints them as JavaScript would), and nesting deeper
than the decoder goes, which both report as an error and the reader counts as malformed.

``loads_json`` is the same promise for every other JSON that comes from outside (a record
file in a workspace, a protocol line on stdin, a handle or cursor a caller hands back): a
value, or ``Malformed``. The standard library's decoder raises ``RecursionError`` for nesting
deeper than the interpreter's stack (a 100,000-deep array is a few hundred kilobytes), which is
no ``ValueError``: left alone it would stop whatever read the file instead of that one file.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from pbot_watch.errors import PbotWatchError

_FAST = msgspec.json.Decoder().decode


def _reject_constant(name: str) -> Any:
    # JSON.parse rejects NaN and Infinity; so must we, or a line Pi skips would count here.
    raise ValueError(name)


_STDLIB = json.JSONDecoder(parse_constant=_reject_constant).decode


class Malformed(PbotWatchError, ValueError):
    """The line is not JSON that ``JSON.parse`` would accept (or nests deeper than we decode)."""


def loads_json(data: bytes | str) -> Any:
    """One JSON document from outside (not a session line: see ``loads_line``); raises ``Malformed``."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as error:
        raise Malformed(_reason(error)) from None


def _reason(error: Exception) -> str:
    if isinstance(error, RecursionError):
        return "nested deeper than pbot-watch reads"
    return str(error)


def loads_line(line: bytes) -> Any:
    """The JSON value of one line of a session file; raises ``Malformed``."""
    return decode_line(line)[0]


def decode_line(line: bytes) -> tuple[Any, bool]:
    """``loads_line``, and whether the line was one msgspec refused.

    Only such a line can hold a lone surrogate (msgspec refuses them), so a reader that must
    make ids well-formed (``pi.untrusted``) looks at those lines alone, at no cost for the rest.
    """
    try:
        return _FAST(line), False
    except (msgspec.DecodeError, RecursionError):
        pass
    return _refused(line), True


def _refused(line: bytes) -> Any:
    # The rare line msgspec refuses: decide it exactly as JSON.parse would.
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        text = line.decode("utf-8", "replace")  # as Node decodes, before JSON.parse
    try:
        return _STDLIB(text)
    except (ValueError, RecursionError) as error:
        # RecursionError: nesting deeper than Python's parser goes (JSON.parse goes further;
        # no Pi entry is nested like that, and one bad line must not stop the file).
        raise Malformed(_reason(error)) from None
