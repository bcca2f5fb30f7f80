"""The seams other parts of pbot-watch plug into the service. Light: no watchdog, no indexer.

Three kinds of extension, all wired in ``pbot_watch.cli.run_parts.build_extensions``:

``RecordListener``
    Called after a record file was (re)written, with the record's path and session id, on the
    service's listener thread (``service/listeners.py``), never on the thread that reads the
    sessions: a slow listener delays only the other listeners. Records come in the order they
    were first written; one rewritten before its turn is passed once, as it is on disk then.
    The search index updates itself here. An exception is logged and shown in status, and the
    record stays written; a stop may drop queued records, so listeners must be able to catch up
    from the archive (the search index does, by ``stat``, before each query). A listener with a
    ``close`` method has it called on that thread when the service stops (what it opened there,
    an SQLite connection, can only be closed there).

``EntriesFollower``
    Called with the entries of every read of a session file (``indexer.EntriesRead``), on the
    reading thread, before the read's record is written: what it keeps is current when the
    record is. Raw memory is one (``memory/listener.py``): an append is decoded once for the
    record and for it. At start it names the files it does not hold as they are (``stale``),
    which the catch-up reads for it (``sync``), newest first. An exception is logged and shown
    in status; the record is written all the same. A ``BuildingFollower`` does its heavy work
    elsewhere (raw memory builds whole files in a worker process): ``pending`` counts what it has not
    made searchable yet (the catch-up is not over before it is 0), ``collect`` is called on the
    reading thread between reads to finish some of it, ``on_ready`` is set by the service to be
    woken when there is something to collect, ``on_error`` to show a problem in status.
    A ``TouchedFollower`` is also told of a file found byte for byte unchanged under a new
    mtime (``touched``), so that it takes the new stamp instead of reading the file again.

``IdleWorker``
    Run on its own thread once the person has been idle (no append to any watched session) for
    ``settings.idle_seconds``. The service sets ``cancel`` the moment a new append is seen and
    at shutdown; the worker must check it between steps (and pass it to anything slow, such as
    a model call) and return promptly. It runs again only after the next idle period begins.
    While it touches record files it holds ``ServiceContext.records_lock``, which the service
    also holds while it writes records, so neither overwrites the other's fresh copy.

``Companion``
    A process that lives beside the service (the warm query server, ``service/warm.py``):
    ``start`` once the service holds its lock, ``check`` on every tick (it restarts what
    ended, and must be quick), ``close`` at shutdown before the lock is released.

``StatusProvider``
    A callable returning a JSON-able dict, called each time status is written (every few
    seconds, on the consumer thread): it must be cheap and must not block. The provider named
    ``"summaries"`` fills ``Status.summaries`` (pending, failed, model, today's usage); any other
    name appears under ``Status.extensions[name]``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # annotations only: this module stays free of imports (``status`` is light)
    from pbot_watch.archive.fresh import FreshRecords
    from pbot_watch.archive.stamp import FileStamp
    from pbot_watch.config import Settings
    from pbot_watch.indexer import EntriesRead

RecordListener = Callable[[Path, str], None]
"""``listener(record_path, session_id)`` after a record was written."""


class EntriesFollower(Protocol):
    """Fed the entries of every read; catches up by itself on the files it lacks at start."""

    def __call__(self, read: EntriesRead) -> None: ...

    def stale(self, stamps: dict[Path, FileStamp]) -> list[Path]: ...

    def sync(self, path: Path) -> int: ...


@runtime_checkable
class BuildingFollower(EntriesFollower, Protocol):
    """A follower that does its heavy work elsewhere and finishes it on the reading thread (raw memory)."""

    on_ready: Callable[[], None] | None
    on_error: Callable[[str], None] | None

    def pending(self) -> int: ...

    def collect(self, deadline: float) -> list[Path]: ...

    def close(self) -> None: ...


@runtime_checkable
class TouchedFollower(EntriesFollower, Protocol):
    """A follower told of a file found unchanged with a new mtime (a ``touch``), so it need not re-read it.

    A same-size file with a new mtime is compared whole with the service's cursor; when it is
    unchanged no entries are read, and a follower that keeps stamps of its own (raw memory) would
    otherwise read it whole again to tell. ``before`` is the stamp the service read the file at,
    ``after`` the stamp it has now; the follower takes ``after`` only if it held ``before``.
    """

    def touched(self, path: Path, before: FileStamp, after: FileStamp) -> None: ...


class Companion(Protocol):
    """A process started and stopped with the service, restarted when it ends on its own."""

    def start(self) -> None: ...

    def check(self) -> None: ...

    def close(self) -> None: ...


StatusProvider = Callable[[], dict[str, Any]]
"""Returns a small JSON-able dict embedded in the status file."""

SUMMARIES = "summaries"


class IdleWorker(Protocol):
    """Work done while the person is idle (summaries); must honour ``cancel`` promptly."""

    name: str

    def run(self, cancel: threading.Event) -> None: ...


class NoIdleWork:
    """The default before summaries exist: idle periods pass with nothing to do."""

    name = "none"

    def run(self, cancel: threading.Event) -> None:  # noqa: ARG002 - the Protocol's signature
        return


@dataclass
class ServiceContext:
    """What extensions get from the service when they are built."""

    settings: Settings
    records_lock: threading.Lock = field(default_factory=threading.Lock)
    fresh: FreshRecords | None = None
    """Set by a listener that takes written records from memory (the search index): the
    service's record writer hands each write over there (``archive/fresh.py``)."""


@dataclass
class Extensions:
    listeners: list[RecordListener] = field(default_factory=list)
    followers: list[EntriesFollower] = field(default_factory=list)
    idle_worker: IdleWorker = field(default_factory=NoIdleWork)
    status_providers: dict[str, StatusProvider] = field(default_factory=dict)
    companions: list[Companion] = field(default_factory=list)
