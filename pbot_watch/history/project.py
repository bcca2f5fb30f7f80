"""A session file's state as it grows, and its projection to ``SessionHistory`` (pbot's ``projectHistory``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pbot_watch.history.jstext import collapsed_head
from pbot_watch.history.nodes import SessionHistory
from pbot_watch.history.tree import SessionTree
from pbot_watch.pi.entries import SessionHeader, SessionReader

NAME_FALLBACK_UNITS = 80


def fallback_name(first_text: str) -> str:
    """The first exchange's text, whitespace runs collapsed, cut at 80 UTF-16 units (may end in a space)."""
    return collapsed_head(first_text, NAME_FALLBACK_UNITS)


@dataclass
class SessionFile:
    """Everything known about one session file, fed with its bytes in any chunks.

    This is the one pipeline: ``pbot-watch index`` feeds a whole file once, the watcher feeds
    each append; both end with the same state and therefore the same record.
    """

    reader: SessionReader = field(default_factory=SessionReader)
    tree: SessionTree = field(default_factory=SessionTree)
    bytes_parsed: int = 0

    def feed(self, chunk: bytes, sink: list[dict[str, Any]] | None = None) -> int:
        """Consume bytes; return how many entries were added.

        ``sink`` collects the entries too, for another consumer of the same bytes (raw memory
        in the service): the file is then decoded once for both.
        """
        self.bytes_parsed += len(chunk)
        add = self.tree.add
        added = 0
        for entry, links in self.reader.feed_links(chunk):
            add(entry, links)
            added += 1
            if sink is not None:
                sink.append(entry)
        return added

    @property
    def header(self) -> SessionHeader | None:
        return self.reader.header

    @property
    def is_session(self) -> bool:
        return self.reader.header is not None and not self.reader.not_session

    def history(self) -> SessionHistory | None:
        """The session's branches of exchanges, or ``None`` when it has no exchange yet."""
        header = self.reader.header
        if header is None or self.reader.not_session:
            return None
        branches = self.tree.branches()
        if not branches:
            return None
        name = self.tree.name or fallback_name(branches[0][0]["text"])
        return SessionHistory(header.id, name, branches)


def merge_histories(histories: list[SessionHistory]) -> SessionHistory:
    """One session id written by several files (an ``/import`` or ``/export`` copy): one record.

    Branches are concatenated in the given order (callers sort by path); identical branches
    collapse into the same nodes because node ids come from entry ids.
    """
    first = histories[0]
    if len(histories) == 1:
        return first
    branches = [branch for history in histories for branch in history.branches]
    return SessionHistory(first.session_id, first.name, branches)
