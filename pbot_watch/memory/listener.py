"""The service keeps raw memory current as sessions grow, so a query finds nothing left to read.

An agent searches its own, growing session all the time (``search_memory``). Without the
service each query reads what was appended since the last one (``sync_memory_file``); with it,
this record listener does that right after the service wrote the session's record, so the
query's refresh finds every file's ``stat`` unchanged and reads no session bytes at all.

Only files raw memory already holds are followed (``mem_files``: the files some query read).
A session no query has asked about costs the service nothing; the first query that covers it
reads it once, and from then on the service keeps it current. Building raw memory for a whole
history here would stall the listeners for minutes on a first run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pbot_watch.search.held import HeldIndex

if TYPE_CHECKING:
    from pbot_watch.search.index import SearchIndex


class MemoryListener:
    """A ``RecordListener``: after a session's record was written, sync that session's files."""

    def __init__(self, state_dir: Path) -> None:
        self.index = HeldIndex(state_dir)

    def __call__(self, record: Path, session_id: str) -> None:  # noqa: ARG002 - the listener's signature
        self.index.use(lambda index: sync_session(index, session_id))


def sync_session(index: SearchIndex, session_id: str) -> int:
    """Bring the session files raw memory holds for ``session_id`` up to date; return how many changed."""
    from pbot_watch.memory.index import ensure_memory_tables, sync_memory_file  # noqa: PLC0415 - with the first record

    if index.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'mem_files'").fetchone() is None:
        return 0  # no query has used raw memory: nothing to follow
    ensure_memory_tables(index)
    paths = [
        path
        for (path,) in index.conn.execute("SELECT path FROM mem_files WHERE session_id = ?", (session_id,))
    ]
    return sum(sync_memory_file(index, Path(path)) for path in paths)
