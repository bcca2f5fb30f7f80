"""Record listeners run on a thread of their own: a slow listener never delays reading.

The search index re-indexes a whole record after each write: tens of milliseconds for a long
session, many seconds for one holding a pasted 50 MB log. Called on the consumer thread, that
time was taken from every other session (nothing else was read while the log's record was
indexed), and under load it grew with every record until append -> record took seconds.

Here the consumer only queues ``(record, session id)``; one listener thread calls the
listeners, records in the order they were first written. A record written again before its
turn keeps its place and is passed once, as it is on disk by then: under load each record is
indexed once per round, however often it was rewritten meanwhile, and every record gets its
turn. What the listeners miss (a stop with records still queued) they find again by
themselves: the search index refreshes from the archive by ``stat`` before a query.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path

import structlog

from pbot_watch.service.allocator import release_free_memory
from pbot_watch.service.hooks import RecordListener

log = structlog.get_logger("pbot_watch.service")

RELEASE_AFTER_SECONDS = 1.0
# The listeners' work is Python too, and takes the GIL from the reading thread: a pass starts
# once the reader is idle, or after this long at the latest, so under load the reader comes
# first and the listeners catch up (and coalesce more) in its pauses.
DEFER_SECONDS = 1.0


def listener_name(listener: RecordListener) -> str:
    """``SearchListener``, ``SummaryWorker.on_record``: a name for logs, not a repr of its state."""
    return getattr(listener, "__qualname__", None) or type(listener).__qualname__


class ListenerThread:
    """Passes written records to the listeners, off the consumer thread, coalescing rewrites."""

    def __init__(
        self, listeners: Iterable[RecordListener], on_error: Callable[[str], None] | None = None
    ) -> None:
        self.listeners = list(listeners)
        self.on_error = on_error
        self.passed = 0
        self.coalesced = 0
        self._queue: OrderedDict[Path, str] = OrderedDict()
        self._wake = threading.Condition()
        self._stopping = False
        self._busy = False
        self._thread = threading.Thread(target=self._run, name="pbot-listeners", daemon=True)
        self._reader_idle = threading.Event()
        self._reader_idle.set()

    @property
    def backlog(self) -> int:
        """Records written and not yet passed to the listeners (the one being passed included)."""
        with self._wake:
            return len(self._queue) + self._busy

    def start(self) -> None:
        if self.listeners:
            self._thread.start()

    def written(self, record: Path, session_id: str) -> None:
        """Called on the consumer thread after each record write; returns at once."""
        if not self.listeners:
            return
        with self._wake:
            if record in self._queue:
                self.coalesced += 1
            self._queue[record] = session_id
            self._wake.notify()

    def reader_busy(self, busy: bool) -> None:
        """The reading thread starts (``True``) or ends (``False``) a round of reads."""
        if busy:
            self._reader_idle.clear()
        else:
            self._reader_idle.set()

    def stop(self, timeout: float) -> bool:
        """Stop after the call in progress (records still queued are dropped); ``False`` if it did not end in time."""
        with self._wake:
            self._stopping = True
            self._wake.notify()
        self._reader_idle.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until every queued record was passed (for tests and benchmarks)."""
        with self._wake:
            return self._wake.wait_for(lambda: not self._queue and not self._busy, timeout)

    def _run(self) -> None:
        try:
            self._loop()
        finally:
            self._close_listeners()

    def _close_listeners(self) -> None:
        """Close what the listeners opened, on this thread, which opened it (an SQLite connection
        stays on its thread): the last connection to ``search.db`` closed folds its WAL back in
        and deletes it, where one left open at exit leaves the file behind.
        """
        for listener in self.listeners:
            close = getattr(listener, "close", None)
            if not callable(close):
                continue
            try:
                close()
            except Exception:  # stopping goes on; the next start opens afresh
                log.warning("record_listener_close_failed", listener=listener_name(listener), exc_info=True)

    def _loop(self) -> None:
        while True:
            with self._wake:
                self._busy = False
                self._wake.notify_all()
                self._wake.wait_for(lambda: self._queue or self._stopping)
                if self._stopping:
                    return
            # Records are queued while the reader is in the middle of a round: let it finish
            # first (the wait comes after the record, not before, or a round's first record
            # would always be passed while the reader still works).
            self._reader_idle.wait(DEFER_SECONDS)
            with self._wake:
                if self._stopping:
                    return
                record, session_id = self._queue.popitem(last=False)
                self._busy = True
            self._pass(record, session_id)

    def _pass(self, record: Path, session_id: str) -> None:
        started = time.monotonic()
        for listener in self.listeners:
            try:
                listener(record, session_id)
            except Exception as error:  # a listener's bug must not stop the others
                name = listener_name(listener)
                log.exception("record_listener_failed", listener=name, record=str(record))
                if self.on_error:
                    self.on_error(f"record listener {name} failed on {record}: {error!r}")
        self.passed += 1
        if time.monotonic() - started > RELEASE_AFTER_SECONDS:
            # A long call (a huge record) leaves a large freed heap behind: give it back.
            release_free_memory()
