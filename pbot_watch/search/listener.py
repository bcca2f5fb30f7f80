"""The service keeps the search index current from each record it writes.

A query right after an append must find it without refreshing first, so the running service
re-indexes every written record as it is written. The writer hands over each record it wrote
with the ids of the nodes that changed (``archive/fresh.py``): those alone are compared and
rewritten, and the file is not read back. A record the writer did not hand over (written by
another process, a merge from another machine, or one whose hand-over the index cannot use)
is read and compared whole, as before. The index is opened lazily on the listener thread
(SQLite connections stay on the thread that made them: see ``HeldIndex``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pbot_watch.search.held import HeldIndex
from pbot_watch.search.tokens import prepare_bulk

if TYPE_CHECKING:
    from pbot_watch.archive.fresh import FreshRecords


class SearchListener:
    """A ``RecordListener`` that re-indexes each written record in the search index."""

    def __init__(self, state_dir: Path, fresh: FreshRecords | None = None) -> None:
        self.index = HeldIndex(state_dir)
        self.fresh = fresh
        prepare_bulk()  # it tokenises every exchange and summary the service writes

    def __call__(self, record: Path, session_id: str) -> None:  # noqa: ARG002 - the listener's signature
        written = self.fresh.take(record) if self.fresh is not None else None
        if written is None:
            self.index.use(lambda index: index.update_record(record))
        else:
            self.index.use(lambda index: index.update_written(record, written))

    def close(self) -> None:
        """Called on the listener thread when the service stops."""
        self.index.close()
