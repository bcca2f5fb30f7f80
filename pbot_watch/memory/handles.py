"""Memory handles and memory-search cursors: opaque strings for callers, checked values for us. Pure.

A handle names one source by what does not change when the index is rebuilt (the session id,
the anchor entry id and the part number), so a handle a model saw yesterday still recalls the
same text after ``reindex``. It has two forms:

* the long form (``m1.`` and base64url of ``[session, entry, part]``) names a source anywhere:
  memory search hands it out, and MCP callers, which may search several sessions, keep it;
* the short form (``#<entry>`` or ``#<entry>:<part>``) names a source inside one session. The
  memory cues use it: they are paid for in every request, the memory tools inside Pi are pinned
  to the calling session anyway, and the long form spells the session's UUID again on every
  line at about two characters a token. Only ids of a plain alphabet get one (Pi's are 8 hex
  digits), so a short handle never reads as a long one, and the part is left out when it is 0. A cursor carries the offset of the next page, the row-id snapshot
that keeps the first page's order, and a key of the query it belongs to.

Both are base64url of compact JSON and are handed out to models, which may alter them. Every
field is therefore checked on the way in: a value of the wrong type or out of range (a 40-digit
integer would overflow SQLite) is an ``UnknownHandle`` or a ``BadCursor``, never a crash. The
encodings are part of the contract: changing them breaks handles people keep in notes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from pbot_watch.pi.jsonline import loads_json
from pbot_watch.search.errors import Argument, BadCursor, UnknownHandle

HANDLE_PREFIX = "m1"
SHORT_MARK = "#"
_SHORT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SHORT = re.compile(r"#?([A-Za-z0-9_-]{1,64})(?::([0-9]{1,18}))?")
CURSOR_VERSION = 1
MAX_INTEGER = 2**63 - 1
"""SQLite's largest INTEGER: a part, offset or row id beyond it can name nothing we stored."""


def _b64(value: Any) -> str:
    raw = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> Any:
    padded = text + "=" * (-len(text) % 4)
    # A handle or cursor comes back from a caller: nested past the decoder, it is no handle (Malformed).
    return loads_json(base64.urlsafe_b64decode(padded.encode("ascii")))


def _counter(value: Any) -> bool:
    """A non-negative integer SQLite can hold (``bool`` is an ``int`` in Python, not here)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_INTEGER


def make_handle(session_id: str, entry_id: str, part: int) -> str:
    """An opaque handle for one source: stable across re-indexing, meaningless to parse."""
    return f"{HANDLE_PREFIX}." + _b64([session_id, entry_id, part])


def make_short_handle(entry_id: str, part: int, session_id: str) -> str:
    """The short handle of a source inside its session (the long one for an id of another alphabet)."""
    if _SHORT_ID.fullmatch(entry_id) is None:
        return make_handle(session_id, entry_id, part)
    return f"{SHORT_MARK}{entry_id}" + (f":{part}" if part else "")


def parse_handle(handle: str) -> tuple[str | None, str, int]:
    """The ``(session_id, entry_id, part)`` a handle names; ``UnknownHandle`` for anything else.

    A short handle names no session (``None``): the caller looks it up in the session it is
    pinned to. The mark ``#`` may be left out, as a model may copy a handle without it.
    """
    short = _SHORT.fullmatch(handle.strip())
    if short is not None and not handle.startswith(f"{HANDLE_PREFIX}."):
        return None, short[1], int(short[2] or 0)
    try:
        prefix, body = handle.split(".", 1)
        session_id, entry_id, part = _unb64(body)
        if (
            prefix != HANDLE_PREFIX
            or not isinstance(session_id, str)
            or not isinstance(entry_id, str)
            or not _counter(part)
        ):
            raise ValueError
    except (ValueError, TypeError, UnicodeError):
        raise UnknownHandle(handle) from None
    return session_id, entry_id, part


def cursor_key(
    query: str,
    match: str,
    in_: str | None,
    session_id: str | None,
    leaf: str | None,
    pinned: Sequence[str | None] = (),
) -> str:
    """What a cursor must be used with: the same query, match mode, ``--in`` and scope.

    ``pinned`` is a scope the caller pinned (see ``query.MemoryScope``); without one the key is
    what it always was, so cursors handed out before stay valid.
    """
    value: list[Any] = [query, match, in_, session_id, leaf]
    if pinned:
        value.append(list(pinned))
    raw = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(raw, digest_size=8).hexdigest()


def make_cursor(key: str, offset: int, snapshot: int) -> str:
    """The cursor of the page starting at ``offset`` among hits with row ids up to ``snapshot``."""
    return _b64({"v": CURSOR_VERSION, "k": key, "o": offset, "s": snapshot})


def parse_cursor(cursor: str, key: str) -> tuple[int, int]:
    """``(offset, snapshot)`` of a cursor made for ``key``; ``BadCursor`` for anything else."""
    try:
        value = _unb64(cursor)
        if not isinstance(value, dict) or value.get("v") != CURSOR_VERSION:
            raise ValueError
        offset, snapshot = value["o"], value["s"]
        if not _counter(offset) or not _counter(snapshot):
            raise ValueError
    except (ValueError, TypeError, KeyError, UnicodeError):
        raise BadCursor("it is not a cursor from memory search") from None
    if value.get("k") != key:
        raise BadCursor(
            "it belongs to a different query, match, ",
            Argument("in"),
            ", ",
            Argument("sessionId"),
            " or ",
            Argument("leaf"),
        )
    return offset, snapshot
