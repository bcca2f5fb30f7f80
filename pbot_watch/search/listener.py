"""The service keeps the search index current from each record it writes.

A query right after an append must find it without refreshing first, so the running service
re-indexes every written record as it is written. The index is opened lazily on the listener
thread (SQLite connections stay on the thread that made them: see ``HeldIndex``).
"""

from __future__ import annotations

from pathlib import Path

from pbot_watch.search.held import HeldIndex


class SearchListener:
    """A ``RecordListener`` that re-indexes each written record in the search index."""

    def __init__(self, state_dir: Path) -> None:
        self.index = HeldIndex(state_dir)

    def __call__(self, record: Path, session_id: str) -> None:  # noqa: ARG002 - the listener's signature
        self.index.use(lambda index: index.update_record(record))
