"""Raw memory of whole session files built beside the service: worker processes extract and store them.

A first run over a long history stores every session file's raw memory once. Almost all of
that is CPU work that needs no database: decoding the lines, entries to sources (redaction
included), digests, zstd packing, the literal and terms documents. Done on the service's
reading thread, it held the one core the process had (the reading and listener threads share
an interpreter lock) for minutes. So a file raw memory must hold whole (a first read, a
rewrite) is queued here; ``WORKERS`` worker processes each read a file themselves from its
start (decoding is a few per cent of the work, cheaper than shipping parsed entries to them),
make its rows (``build_file``: the same extraction and preparation ``index.feed_memory`` runs,
so both give the same rows) and insert them (``index.store_build``, one transaction per file,
``build_and_store``). Inserting is a third of the work, most of it SQLite's FTS tokenisers; done
by the service, it held the service's interpreter for as long as the history index needed it.
A worker writes ``search.db`` through its own connection, as a query process does; when that
fails (a damaged or locked index, a full disk) it hands its rows back and the service stores
them, with its own handling of damage (``search/held.py``). SQLite's one write lock orders the
workers' stores; their builds run side by side.

Files are built in the order they were queued (the service queues the newest first), at most
``IN_FLIGHT`` at a time, so the rows waiting in memory stay bounded. A file appended to while
it waits is read to its end when its turn comes, and anything written after the worker read
it is read on the spot once its rows are stored (``sync_memory_file``: the delta only). A worker
that dies (killed, out of memory) is replaced and the files in flight tried once more; a file
that kills one twice, or fails in it, is left out with a message and the other files go on.
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Literal

import structlog

from pbot_watch.archive.stamp import FileStamp
from pbot_watch.memory.extract import EntryLink, MemoryFeed
from pbot_watch.memory.index import (
    READ_BYTES,
    CallRow,
    PreparedSource,
    call_rows,
    dictionaries,
    held_text_keys,
    prepare_source,
    store_build,
    text_rows,
)
from pbot_watch.pi.cursor import Cursor
from pbot_watch.pi.entries import SessionHeader, SessionReader
from pbot_watch.redact import policy
from pbot_watch.search.codec import TextCodec
from pbot_watch.search.held import HeldIndex
from pbot_watch.search.index import SearchIndex
from pbot_watch.search.tokens import prepare_bulk
from pbot_watch.sources import NotRegularFile, SessionTail

log = structlog.get_logger("pbot_watch.memory")

WORKERS = min(2, os.cpu_count() or 1)
"""Worker processes. Each builds a file and then stores it, and storing takes SQLite's one write
lock for about two fifths of a worker's time: two keep the lock busy while their builds run side
by side; a third would mostly wait for it."""
IN_FLIGHT = 2 * WORKERS
"""Files given to the workers at once: one being built by each, one waiting, so none idles between files."""
HELD_DONE = 16
"""Finished builds that may wait behind an unfinished one to be taken in their order."""
ATTEMPTS = 2
"""Tries of a file whose worker died building it (the first death may have been another file's)."""
PARENT_CHECK_SECONDS = 1.0

Outcome = Literal["built", "gone", "unreadable", "not a session"]


@dataclass
class FileBuild:
    """One session file's raw memory as the worker made it, for ``index.store_build``."""

    path: Path
    outcome: Outcome
    header: str = ""
    """The header line's model as JSON (``SessionHeader``)."""
    entries: int = 0
    links: list[EntryLink] = field(default_factory=list)
    calls: list[CallRow] = field(default_factory=list)
    sources: list[PreparedSource] = field(default_factory=list)
    cursor: Cursor | None = None
    stamp: FileStamp | None = None
    bytes_read: int = 0
    error: str = ""
    stored: bool = False
    """The worker stored the rows itself (``build_and_store``); they are not carried back."""


_codec: tuple[tuple[int | None, tuple[int, ...]], TextCodec] | None = None


def _codec_for(dictionaries: dict[int, bytes], current: int | None) -> TextCodec:
    """The worker's codec, made again only when the database trained a new dictionary."""
    global _codec  # noqa: PLW0603 - one per worker process, for every file it builds
    key = (current, tuple(sorted(dictionaries)))
    if _codec is None or _codec[0] != key:
        _codec = (key, TextCodec(dictionaries, current))
    return _codec[1]


def build_file(
    path: Path,
    dictionaries: dict[int, bytes],
    current: int | None,
    held: Callable[[set[int]], set[int]] | None = None,
) -> FileBuild:
    """Read ``path`` from its start and make its raw memory's rows (in the worker; no database).

    What ``index._read`` does from offset 0, with ``feed_memory``'s extraction: the same reader,
    pieces, cursor and stamp, so the rows stored are those an inline read stores.

    ``held``: of the file's text keys, those the index already holds a text of. Their texts are
    not packed and tokenised here: the writer finds them stored and counts one more source of
    them. On the generated 634 MB corpus 29 % of the sources have a text another source has
    (the same tool output, a copied branch), and their rows were a sixth of the build's CPU.
    """
    codec = _codec_for(dictionaries, current)
    try:
        tail = SessionTail(path)
    except (FileNotFoundError, NotRegularFile):
        return FileBuild(path, "gone")
    except OSError as error:
        return FileBuild(path, "unreadable", error=str(error))
    with tail:
        reader = SessionReader()
        state = MemoryFeed()
        build = FileBuild(path, "built")
        prepared: list[PreparedSource] = []

        def parse(data: bytes) -> bool:
            nonlocal prepared
            build.bytes_read += len(data)
            entries = reader.feed(data)
            if reader.not_session or reader.header is None:
                return not reader.not_session
            fed = state.feed(entries)
            build.links.extend(fed.links)
            if fed.answered_now:
                # A call delivered alone in an earlier piece goes: its result brings it along.
                prepared = [s for s in prepared if s.unanswered not in fed.answered_now]
            prepared.extend(prepare_source(source) for source in fed.sources)
            return True

        read = tail.feed(0, parse, piece=READ_BYTES)
        if reader.header is None and not reader.not_session and read < tail.size:
            tail.feed(read, parse, piece=READ_BYTES)  # a first line longer than a piece
        if reader.header is None or reader.not_session:
            return FileBuild(path, "not a session", bytes_read=build.bytes_read)
        build.header = reader.header.model_dump_json()
        build.entries = state.seq
        build.calls = call_rows(state)
        build.sources = _with_rows(prepared, codec, held({s.key for s in prepared}) if held else set())
        build.cursor = tail.cursor(reader.consumed)
        build.stamp = FileStamp.of(tail.st)
        return build


def _with_rows(sources: list[PreparedSource], codec: TextCodec, held: set[int]) -> list[PreparedSource]:
    """``sources`` with the rows of each text made once, but none for a text the index holds.

    Two sources of one text in the file share it (the writer's ``made``): the first one's rows
    serve both. A text whose key is held or made but which is another text (a hash collision)
    gets its rows from the writer, which compares the texts.
    """
    made: set[int] = set()
    for source in sources:
        if source.key not in held and source.key not in made:
            made.add(source.key)
            source.rows = text_rows(source.text, codec)
    return sources


_held: HeldIndex | None = None
"""The worker's connection to ``search.db``, kept from file to file (it follows a replaced file)."""


def _worker_index(state_dir: Path) -> HeldIndex:
    global _held  # noqa: PLW0603 - one per worker process, for every file it stores
    if _held is None or _held.state_dir != state_dir:
        if _held is not None:
            _held.close()
        _held = HeldIndex(state_dir)
    return _held


def build_and_store(path: Path, state_dir: Path) -> FileBuild:
    """In the worker: build ``path`` and store its rows in ``state_dir``'s ``search.db`` itself.

    Returns the build without its rows when they are stored; with them when storing failed,
    for the service to store (``store_file``): the worker never starts an index afresh, that
    is the service's call, and a file is never lost to a busy lock or a full disk here.
    """
    held = _worker_index(state_dir)
    try:
        packing = held.use(dictionaries, reset=False)
    except sqlite3.Error:
        packing = ({}, None)  # the service's store packs again with the index's dictionary
    build = build_file(path, *packing, held=partial(_keys_held, held))
    if build.outcome != "built":
        return build
    try:
        held.use(lambda index: store_file(index, build), reset=False)
    except sqlite3.Error as error:
        log.info("memory_build_store_left_to_service", path=str(path), error=str(error))
        held.close()
        return build
    return FileBuild(path, "built", stored=True, bytes_read=build.bytes_read)


def _keys_held(held: HeldIndex, keys: set[int]) -> set[int]:
    """``held_text_keys`` in the worker's index; none when it cannot be read (the writer sorts them out)."""
    try:
        return held.use(lambda index: held_text_keys(index, keys), reset=False)
    except sqlite3.Error:
        return set()


def store_file(index: SearchIndex, build: FileBuild) -> None:
    """Store a ``"built"`` build's rows in ``index`` (``index.store_build``), in the caller's process."""
    assert build.cursor is not None
    assert build.stamp is not None
    store_build(
        index,
        build.path,
        SessionHeader.model_validate_json(build.header),
        build.entries,
        build.links,
        build.calls,
        build.sources,
        cursor=build.cursor,
        stamp=build.stamp,
    )


def _start_worker(redact: bool = True) -> None:
    """In a new worker: watch the service (``_watch_parent``), redact as the service does, and get
    the tokeniser ready for bulk work.

    ``redact``: the service's ``[privacy] redact`` setting. A spawned worker loads no settings,
    so without it a worker redacted what the service, set not to, stored as Pi wrote it: a
    file's sources would differ by who read them.
    """
    _watch_parent()
    policy.configure(redact)
    prepare_bulk()


def _watch_parent() -> None:
    """In the worker: leave when the service is gone (a ``kill -9`` leaves no one to stop it)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            threading.Event().wait(PARENT_CHECK_SECONDS)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="pbot-build-parent", daemon=True).start()


@dataclass
class _Job:
    path: Path
    future: Future[FileBuild]
    attempt: int


@dataclass
class BuildCounts:
    queued: int = 0
    built: int = 0
    failed: int = 0
    worker_restarts: int = 0


class MemoryBuilder:
    """The queue of whole files to build, the worker process, and the builds ready to store."""

    def __init__(self, state_dir: Path, in_flight: int = IN_FLIGHT, workers: int = WORKERS) -> None:
        self.state_dir = state_dir
        """Where the workers store what they build (``search.db``, ``build_and_store``)."""
        self.in_flight = in_flight
        self.workers = workers
        self.counts = BuildCounts()
        self.on_ready: Callable[[], None] | None = None
        """Called (on another thread) when a build is ready: the service wakes to store it."""
        self._queue: OrderedDict[Path, int] = OrderedDict()
        """Files waiting for the worker, with the attempt they are at."""
        self._running: deque[_Job] = deque()
        self._pool: ProcessPoolExecutor | None = None

    def add(self, path: Path) -> None:
        """Queue ``path`` (no-op when it is queued or being built: its build reads it to its end)."""
        if not self.holds(path):
            self._queue[path] = 1
            self.counts.queued += 1

    def holds(self, path: Path) -> bool:
        """``path`` is queued or being built: a read of it now is the build's to store."""
        return path in self._queue or any(job.path == path for job in self._running)

    def pending(self) -> int:
        """Files queued or being built: raw memory does not hold them yet."""
        return len(self._queue) + len(self._running)

    def submit(self) -> None:
        """Give the workers the next queued files, up to ``in_flight`` unfinished at a time.

        Only unfinished builds count: builds finished behind a slow one wait to be taken in
        order, and counting them idled the workers until the slow one ended (a big file at the
        head held every slot). ``HELD_DONE`` bounds those waiting, whose rows (a store that
        failed) may be in memory.
        """
        while (
            self._queue
            and sum(not job.future.done() for job in self._running) < self.in_flight
            and len(self._running) < self.in_flight + HELD_DONE
        ):
            path, attempt = self._queue.popitem(last=False)
            future = self._executor().submit(build_and_store, path, self.state_dir)
            self._running.append(_Job(path, future, attempt))
            future.add_done_callback(self._done)

    def _done(self, _future: Future[FileBuild]) -> None:
        if self.on_ready is not None:
            self.on_ready()

    def ready(self) -> tuple[Path, FileBuild | None] | None:
        """The oldest submitted build if it finished (stored, or its rows to store), or ``None`` when it was left out.

        In submission order, so files are taken in the order they were queued (two workers may
        have stored two of them the other way round).
        """
        if not self._running or not self._running[0].future.done():
            return None
        job = self._running.popleft()
        try:
            build = job.future.result()
        except BrokenProcessPool:
            self._restart()
            if job.attempt < ATTEMPTS:
                self._queue[job.path] = job.attempt + 1
                self._queue.move_to_end(job.path, last=False)
                return self.ready()
            self.counts.failed += 1
            return job.path, FileBuild(job.path, "unreadable", error="the build worker died on it")
        except Exception as error:  # noqa: BLE001 - a bug met on one file must not stop the others
            log.warning("memory_build_failed", path=str(job.path), error=repr(error))
            self.counts.failed += 1
            return job.path, FileBuild(job.path, "unreadable", error=f"its build failed: {error!r}")
        self.counts.built += 1
        return job.path, build

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # Spawned, not forked: the service has threads (a fork copies their locks held).
            context = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(
                self.workers, mp_context=context, initializer=_start_worker, initargs=(policy.enabled(),)
            )
        return self._pool

    def _restart(self) -> None:
        """The worker died: every file it had is tried again on a new one (in their order)."""
        self.counts.worker_restarts += 1
        survivors = list(self._running)
        self._running.clear()
        for job in reversed(survivors):
            self._queue[job.path] = job.attempt
            self._queue.move_to_end(job.path, last=False)
        self.close()

    def close(self) -> None:
        """Stop the worker now (a file half built is built again at the next start)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        processes = list(getattr(pool, "_processes", {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:  # shutdown alone waits for the file in progress at exit
            process.terminate()
        for process in processes:
            process.join(1.0)
