r"""The one rule for names from outside: ids, parent ids, cwds, file names. Pure.

``"\udfff"`` is valid JSON: Pi's ``JSON.parse`` and Python's ``json`` both keep the lone
surrogate (half of a UTF-16 pair) in the string, and ``JSON.stringify`` writes it back escaped.
But nothing that needs UTF-8 can hold it: SQLite text, ``uuid5`` (which hashes the UTF-8 bytes),
a terminal, the MCP transport. An id is where that bites, because an id is a key everywhere: a
record's id is ``uuid5`` of the session id, node ids embed entry ids, raw memory stores entry
ids and parent ids, search stores the header's id and ``cwd``.

So the reader makes every id, parent id and ``cwd`` well-formed as it parses the line, as
``String.prototype.toWellFormed`` does: each lone surrogate becomes U+FFFD. After that no later
step needs to care, and ``index``, ``search``, ``memory search`` and ``run`` see the same
names. What it costs:

* a session whose header id holds one gets the record id ``uuid5(NAMESPACE, id with U+FFFD)``
  and its record's ``sessionId`` is that well-formed id; node ids are built from the
  well-formed entry ids;
* two ids that differ only in their lone surrogates become one id (Pi would keep them apart):
  the tree then treats them as it treats any duplicate id. No Pi writes such ids: they come
  from a file someone crafted or cut.

Ids that are well-formed (every id Pi writes: hex, UUIDs) are never touched, so their record
and node ids are personal-bot's. Texts (messages, tool output) keep their lone surrogates:
records must match pbot's byte for byte, and the stores that need UTF-8 make their own
copies. Reading costs nothing on the usual line: a lone surrogate can only come from a
``\ud800``-``\udfff`` escape without its pair (raw surrogate bytes are invalid UTF-8, which is
decoded with U+FFFD), which the fast decoder refuses, so only a line it refused gets the pass
over its ids (``pi.jsonline.decode_line``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

LONE_SURROGATE = re.compile("[\ud800-\udfff]")


_SURROGATE_STEP = 1 << 20


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds half a character, which UTF-8 (SQLite, a terminal) cannot carry.

    Asked of every text raw memory stores. A surrogate is the one code point strict UTF-8
    refuses, so a text is encoded (a megabyte at a time: a pasted log can be 50 MB) rather
    than scanned by ``LONE_SURROGATE``: five times faster, and an ASCII text costs nothing.
    """
    if text.isascii():
        return False
    for start in range(0, len(text), _SURROGATE_STEP):
        try:
            text[start : start + _SURROGATE_STEP].encode("utf-8")
        except UnicodeEncodeError:
            return True
    return False


def well_formed(text: str) -> str:
    """``text`` with each lone surrogate made U+FFFD (``String.prototype.toWellFormed``)."""
    if not has_lone_surrogate(text):
        return text
    return LONE_SURROGATE.sub("\ufffd", text)


def well_formed_value(value: Any) -> Any:
    """``well_formed`` on every string of a JSON value, keys included (a header's extra fields)."""
    if isinstance(value, str):
        return well_formed(value)
    if isinstance(value, list):
        return [well_formed_value(item) for item in value]
    if isinstance(value, dict):
        return {well_formed_value(key): well_formed_value(item) for key, item in value.items()}
    return value


# Where an entry names another (or itself): every value that is a key in some store.
_ENTRY_IDS = ("id", "parentId", "firstKeptEntryId", "fromId", "targetId")


def well_formed_ids(entry: dict[str, Any]) -> None:
    """Make every id ``entry`` gives well-formed, in place.

    Its own and its parent's, a compaction's first kept entry, a branch summary's ends, a tool
    result's call id and tool name, each tool call's id and name: the values stores key on.
    """
    for key in _ENTRY_IDS:
        value = entry.get(key)
        if isinstance(value, str):
            entry[key] = well_formed(value)
    message = entry.get("message")
    if not isinstance(message, dict):
        return
    for key in ("toolCallId", "toolName"):
        value = message.get(key)
        if isinstance(value, str):
            message[key] = well_formed(value)
    content = message.get("content")
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict):
                for key in ("id", "name"):
                    value = block.get(key)
                    if isinstance(value, str):
                        block[key] = well_formed(value)


def unstorable_name(path: Path | str) -> bool:
    r"""Whether ``path`` is not UTF-8 (``b'caf\xe9.jsonl'``): no SQLite text, JSON or terminal holds it.

    Python names such a file with surrogate escapes (``'caf\udce9.jsonl'``), which every store
    of paths here (the search index, raw memory, the service's state) refuses. Pi itself never
    makes one (Node names folders after a cwd it decoded with U+FFFD), so it is a file someone
    copied in: it is skipped with a warning, never passed on to fail a command.
    """
    return has_lone_surrogate(os.fspath(path))


def shown_path(path: Path | str) -> str:
    r"""``path`` as text a terminal shows: bytes that are not UTF-8 written as ``\xe9``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")
