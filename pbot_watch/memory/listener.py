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

A whole file (a first read of at least ``BUILD_FROM`` bytes, a rewrite, a file only raw memory
lacks, a read of ``BUILD_READ_FROM`` bytes that is most of its file) is not stored on this thread: it is queued for the build worker (``memory/build.py``),
whose worker processes read, prepare and store it beside the service; ``collect``, called by
the service between its reads, reads on what was appended after a worker read a file.
Appends, the live path, are stored here as they are read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from pbot_watch.search.held import HeldIndex

if TYPE_CHECKING:
    from pbot_watch.archive.stamp import FileStamp
    from pbot_watch.indexer import EntriesRead
    from pbot_watch.memory.build import FileBuild, MemoryBuilder
    from pbot_watch.search.index import SearchIndex

log = structlog.get_logger("pbot_watch.memory")

SLOW_STORE_SECONDS = 1.0
"""A build that took the reading thread longer than this to store is logged (the live path waited)."""
BUILD_FROM = 64 << 10
"""A whole-file read at least this long is built by the worker; a shorter one (a new session's
first lines) is stored at once, which is sooner than a trip through the worker."""
BUILD_READ_FROM = 8 << 20
"""A read this long that is also most of its file (a huge paste into a young session) is built
by the worker too: rebuilding the file costs it at most twice the read, on the other core."""


class MemoryFollower:
    """Stores the entries the service read in raw memory; counts what it had to read itself."""

    def __init__(self, state_dir: Path, *, build_from: int | None = None) -> None:
        """``build_from``: whole-file reads this long go to the build worker, for a caller that
        calls ``collect`` (the service, ``BUILD_FROM``); ``None`` stores everything as it comes.
        """
        self.index = HeldIndex(state_dir)
        self.build_from = build_from
        self._builder: MemoryBuilder | None = None
        self.on_error: Callable[[str], None] | None = None
        self.on_ready: Callable[[], None] | None = None
        """Called from another thread when the worker has a file ready: ``collect`` stores it."""
        self.fed = 0
        """Reads whose entries were stored as they were (no second parse)."""
        self.bytes_read = 0
        """Session bytes raw memory read itself, because its cursor was elsewhere."""

    def __call__(self, read: EntriesRead) -> None:
        if self._builder is not None and self._builder.holds(read.path):
            return  # its build reads the file to its end; what comes after, ``collect`` reads
        self.index.use(lambda index: self._store(index, read))

    def _store(self, index: SearchIndex, read: EntriesRead) -> None:
        from pbot_watch.memory.index import MemorySync, feed_memory, memory_plan, sync_memory_file  # noqa: PLC0415

        report = MemorySync()
        if read.start == 0:
            plan = memory_plan(index, read.path)
            if plan in ("nothing", "append"):
                # Raw memory already holds this file's beginning (a query read it): the delta only.
                sync_memory_file(index, read.path, report)
                self.bytes_read += report.bytes_read
                return
            if self.build_from is not None and read.cursor.offset >= self.build_from:
                self.builder().add(read.path)
                self._submit()
                return
        elif self.build_from is not None and _mostly_new(read.start, read.cursor.offset):
            # A 50 MB paste after the header: extracting it here would hold the reading thread
            # (and every other session's append) for seconds; the worker rebuilds the file.
            self.builder().add(read.path)
            self._submit()
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

    def touched(self, path: Path, before: FileStamp, after: FileStamp) -> None:
        """``path`` is byte for byte as the service read it at ``before``, stamped ``after`` now:
        raw memory that held it at ``before`` takes the new stamp, not a second read of the file.
        """
        from pbot_watch.memory.index import memory_touched  # noqa: PLC0415

        if self._builder is not None and self._builder.holds(path):
            return  # its build stamps the file as the worker finds it
        self.index.use(lambda index: memory_touched(index, path, before, after))

    def sync(self, path: Path) -> int:
        """Bring ``path``'s raw memory up to date: what it lacks of a file it holds is read now
        (the session bytes read are returned), a file it does not hold is queued for the worker.
        """
        from pbot_watch.memory.index import MemorySync, memory_plan, sync_memory_file  # noqa: PLC0415

        if self._builder is not None and self._builder.holds(path):
            return 0
        if (
            self.build_from is not None
            and self.index.use(lambda index: memory_plan(index, path)) not in ("nothing", "append")
            and _size(path) >= self.build_from
        ):
            self.builder().add(path)
            self._submit()
            return 0
        report = MemorySync()
        self.index.use(lambda index: sync_memory_file(index, path, report))
        self.bytes_read += report.bytes_read
        return report.bytes_read

    def builder(self) -> MemoryBuilder:
        if self._builder is None:
            from pbot_watch.memory.build import MemoryBuilder  # noqa: PLC0415 - only once a file is built

            self._builder = MemoryBuilder(self.index.state_dir)
            self._builder.on_ready = lambda: self.on_ready() if self.on_ready is not None else None
        return self._builder

    def pending(self) -> int:
        """Files queued for the worker or built and not stored yet: raw memory lacks them."""
        return self._builder.pending() if self._builder is not None else 0

    def collect(self, deadline: float) -> list[Path]:
        """Take what the worker has ready, until ``deadline`` (``time.monotonic``); the files stored.

        The worker stored each file itself, in a transaction of its own (the record index's
        writes come in between); rows it could not store are stored here. Then the file is read
        on from where the worker stopped, if it grew meanwhile (a stat when not).
        """
        if self._builder is None:
            return []
        stored: list[Path] = []
        while True:
            started = time.monotonic()
            ready = self._builder.ready()
            if ready is None:
                break
            path, build = ready
            got = time.monotonic()
            if build is not None:
                self.index.use(partial(self._store_build, path=path, build=build))
            if time.monotonic() - started > SLOW_STORE_SECONDS:
                log.warning(
                    "memory_build_slow_store",
                    path=str(path),
                    result_seconds=round(got - started, 2),
                    store_seconds=round(time.monotonic() - got, 2),
                )
            stored.append(path)
            self._submit()
            if time.monotonic() > deadline:
                break
        self._submit()
        return stored

    def _store_build(self, index: SearchIndex, *, path: Path, build: FileBuild) -> None:
        from pbot_watch.memory.build import store_file  # noqa: PLC0415
        from pbot_watch.memory.index import MemorySync, forget_memory_file, sync_memory_file  # noqa: PLC0415

        if build.outcome in ("gone", "not a session"):
            forget_memory_file(index, path)
        elif build.outcome == "unreadable":
            if self.on_error is not None:
                self.on_error(f"raw memory cannot read {path}: {build.error}")
        else:
            if not build.stored:
                store_file(index, build)
            report = MemorySync()
            sync_memory_file(index, path, report)  # what was appended after the worker read it
            self.bytes_read += build.bytes_read + report.bytes_read

    def _submit(self) -> None:
        if self._builder is not None:
            self._builder.submit()

    def status(self) -> dict[str, int]:
        """For status: reads stored as parsed, the session bytes raw memory read itself, the worker's build."""
        counts = self._builder.counts if self._builder is not None else None
        return {
            "reads_fed": self.fed,
            "bytes_read_itself": self.bytes_read,
            "build_queued": counts.queued if counts else 0,
            "build_pending": self.pending(),
            "build_stored": counts.built if counts else 0,
            "build_failed": counts.failed if counts else 0,
        }

    def close(self) -> None:
        if self._builder is not None:
            self._builder.close()
        self.index.close()


def _mostly_new(start: int, end: int) -> bool:
    """Whether a read of ``start..end`` is long and more than what came before it in the file."""
    return end - start >= BUILD_READ_FROM and end - start > start


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
