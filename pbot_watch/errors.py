"""The one root of the errors pbot-watch expects, and the one place each edge maps them.

An expected error is one a person or a model can act on: a setting to fix, an id that names
nothing, a service that is not running, a database that is busy. It derives from
``PbotWatchError`` and says in its class what kind it is, so an edge needs no list of
classes:

* ``CallerError``: the request must change (a bad setting, argument, query or cursor);
  ``NotFound`` is the kind that names something that is not there (an id, a handle);
* ``Unavailable``: not the request's fault; the same request may work later;
* any other ``PbotWatchError``: it failed, and the message says why.

Two edges read that kind, each in one function here: the CLI's exit code (``exit_code``) and
the tools' three failure kinds (``failure_kind``: ``arguments``, ``unavailable``,
``internal``), which MCP, ``pi serve`` and the tool registry share. A bad setting is a
``CallerError`` from every command: ``load_settings`` raises it, and every command exits 2.
"""

from __future__ import annotations

from typing import Any, Literal

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NOT_RUNNING = 3
EXIT_NOT_FOUND = 4

FailureKind = Literal["arguments", "unavailable", "internal"]

MESSAGE_CHARS = 2000
"""The most of one text an error message, a log value or status keeps: an error's text can
carry a whole model answer (megabytes) or a model's argument, and a log line or a status file
is read by a person."""

# SQLite's primary result codes for "not now": busy (5), locked (6), read-only (8), I/O error (10),
# full (13), cannot open (14), protocol (15). As numbers: importing sqlite3 here would load it
# for ``pbot-watch status`` and ``--help``, which never open a database.
UNAVAILABLE_SQLITE = frozenset({5, 6, 8, 10, 13, 14, 15})


class PbotWatchError(Exception):
    """An error pbot-watch expects: shown as one line, never as a traceback."""

    exit_code: int = EXIT_FAILURE


class CallerError(PbotWatchError):
    """The request must change: a setting, an argument, a query; the message says how."""

    exit_code = EXIT_USAGE


class NotFound(CallerError):
    """The request names something that is not there (an id, a handle)."""

    exit_code = EXIT_NOT_FOUND


class Unavailable(PbotWatchError):
    """Not the request's fault: the same request may work later."""


def exit_code(error: BaseException) -> int:
    """The exit code a command ends with for ``error`` (``EXIT_FAILURE`` for what is not ours)."""
    return error.exit_code if isinstance(error, PbotWatchError) else EXIT_FAILURE


def failure_kind(error: BaseException) -> FailureKind:
    """Whose failure ``error`` is, for a tool's caller: fix the arguments, try later, or a bug.

    Beside our own errors, a busy or unwritable database, a full disk and an unreadable file
    are "unavailable" too: nothing in the arguments would change them.
    """
    if isinstance(error, CallerError):
        return "arguments"
    if isinstance(error, Unavailable | OSError):
        return "unavailable"
    code = getattr(error, "sqlite_errorcode", None)  # an sqlite3.Error, without importing sqlite3
    if isinstance(code, int):
        return "unavailable" if (code & 0xFF) in UNAVAILABLE_SQLITE else "internal"
    if isinstance(error, PbotWatchError):
        return "unavailable"
    return "internal"


def bounded(text: str, limit: int = MESSAGE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how many were left out.

    Not ``shorten``: an error message keeps ``limit`` characters and counts the rest (a
    person learns how much is missing; a test pins the count), and this module, the root
    every layer imports, imports nothing of pbot-watch.
    """
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


def bounded_value(value: Any, depth: int = 8) -> Any:
    """``bounded`` on every string of a JSON-like value (keys too); deeper than ``depth``, a placeholder."""
    if isinstance(value, str):
        return bounded(value)
    if depth <= 0 and isinstance(value, dict | list | tuple):
        return "…"
    if isinstance(value, dict):
        return {bounded_value(k, depth - 1): bounded_value(v, depth - 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [bounded_value(item, depth - 1) for item in value]
    return value
