"""What a query can get wrong, as types: the CLI turns each into one stderr line, MCP into a tool error."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pbot_watch.errors import CallerError, NotFound, Unavailable


@dataclass(frozen=True)
class Argument:
    """An argument a message names, by its published name (``after``, ``sessionId``, ``limit``).

    The tools show that name as it is; the command line shows the argument's flag
    (``pbot_watch.cli.options``, the one place that knows both), so no message is reworded.
    """

    name: str


class QueryError(CallerError):
    """A query the caller must correct; the message says how, naming arguments as ``Argument``."""

    def __init__(self, *parts: str | Argument) -> None:
        self.parts = parts
        super().__init__(self.naming(lambda name: name))

    def naming(self, spell: Callable[[str], str]) -> str:
        """The message with each argument it names spelt by ``spell``."""
        return "".join(part if isinstance(part, str) else spell(part.name) for part in self.parts)


class UnknownNode(QueryError, NotFound):
    """No record in the index holds this node id."""

    def __init__(self, node_id: str) -> None:
        super().__init__(f"unknown node id {node_id!r}; search again to get current ids")
        self.node_id = node_id


class UnknownHandle(QueryError, NotFound):
    """A memory handle that names nothing indexed (or nothing any more)."""

    def __init__(self, handle: str) -> None:
        super().__init__(f"unknown memory handle {handle!r}; search memory again to get current handles")
        self.handle = handle


class BadRange(QueryError):
    """An unparseable or inverted time range, or an offset/line past the end."""


class BadCursor(QueryError):
    """A paging cursor that is malformed, or was made for another query or scope."""

    def __init__(self, *reason: str | Argument) -> None:
        super().__init__("invalid cursor: ", *reason, "; repeat the search without ", Argument("after"))


class NotReady(Unavailable):
    """A query that cannot be answered yet, through no fault of the caller's: the same query may work later.

    Not a ``QueryError``: there is nothing in the arguments to correct.
    """
