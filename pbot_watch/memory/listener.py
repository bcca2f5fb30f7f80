"""The service builds and keeps raw memory from the entries it parses for the records anyway.

An agent searches its own, growing session all the time (``search_memory``), and a person
searches everything. The service reads every session file's new bytes for its records; the
entries it decodes from them are handed here (``Indexer.on_entries``) and stored in raw memory
in the same pass (``feed_memory``), so an append is decoded once, and a query finds nothing
left to read. This runs on the service's reading thread, one transaction per read: raw memory
is current when the read's record is written, which is what lets "caught up" mean searchable.

Raw memory's cursor is its own (a query may read a file further, or raw memory may never have
held a file the service already knew): when the entries do not start where raw memory stands,
it reads the file itself from its own cursor (``sync_memory_file``), once, and is back in step.
Files the service has no bytes to read for at start but raw memory lacks (a first start after an
upgrade) are read by ``MemoryFollower.sync`` during the catch-up.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pbot_watch.search.held import HeldIndex

if TYPE_CHECKING:
    from pbot_watch.archive.stamp import FileStamp
    from pbot_watch.indexer import EntriesRead
    from pbot_watch.search.index import SearchIndex


class MemoryFollower:
    """Stores the entries the service read in raw memory; counts what it had to read itself."""

    def __init__(self, state_dir: Path) -> None:
        self.index = HeldIndex(state_dir)
        self.fed = 0
        """Reads whose entries were stored as they were (no second parse)."""
        self.bytes_read = 0
        """Session bytes raw memory read itself, because its cursor was elsewhere."""

    def __call__(self, read: EntriesRead) -> None:
        self.index.use(lambda index: self._store(index, read))

    def _store(self, index: SearchIndex, read: EntriesRead) -> None:
        from pbot_watch.memory.index import MemorySync, feed_memory, memory_plan, sync_memory_file  # noqa: PLC0415

        report = MemorySync()
        if read.start == 0 and memory_plan(index, read.path) in ("nothing", "append"):
            # Raw memory already holds this file's beginning (a query read it): the delta only.
            sync_memory_file(index, read.path, report)
            self.bytes_read += report.bytes_read
            return
        if feed_memory(
            index,
            read.path,
            read.header,
            read.entries,
            start=read.start,
            cursor=read.cursor,
            stamp=read.stamp,
        ):
            self.fed += 1
            return
        sync_memory_file(index, read.path, report)
        self.bytes_read += report.bytes_read

    def stale(self, stamps: dict[Path, FileStamp]) -> list[Path]:
        """Of these files (path: stamp now), those raw memory does not hold as they are."""
        from pbot_watch.memory.index import held_stamps  # noqa: PLC0415

        held = self.index.use(held_stamps)
        return [path for path, stamp in stamps.items() if held.get(path) != stamp]

    def sync(self, path: Path) -> int:
        """Bring ``path``'s raw memory up to date by reading it; the session bytes read."""
        from pbot_watch.memory.index import MemorySync, sync_memory_file  # noqa: PLC0415

        report = MemorySync()
        self.index.use(lambda index: sync_memory_file(index, path, report))
        self.bytes_read += report.bytes_read
        return report.bytes_read

    def status(self) -> dict[str, int]:
        """For status: reads stored as parsed, and the session bytes raw memory had to read itself."""
        return {"reads_fed": self.fed, "bytes_read_itself": self.bytes_read}

    def close(self) -> None:
        self.index.close()
