"""The raw memory of the sessions a Pi child works in, built ahead, a piece at a time, between requests.

A pinned ``search_memory`` can see only its own session, so the child syncs that one file
before answering. For a marathon session the service has not indexed (none runs, or Pi's
session folder is not one of its roots) that first sync is the whole file: minutes for 300 MB,
while the extension waits 30 s. So the child starts building as soon as it learns of the
session (Pi's ``session`` announcement, or the first memory call): ``step`` stores
``AHEAD_PIECE`` more bytes per idle moment, each piece committed with its cursor, and a query
that comes meanwhile lets the build go on for ``BEFORE_QUERY_S`` and then answers from what is
built, counting the session in ``sessionsNotSearched`` (``query.open_query``), rather than
waiting for the rest. A file the service has indexed costs a ``stat``: nothing is left.
"""

from __future__ import annotations

import sqlite3
import time
from collections import OrderedDict
from pathlib import Path

from pbot_watch.config import Settings
from pbot_watch.log import get_logger
from pbot_watch.memory.index import MemorySync, sync_memory_file
from pbot_watch.search.index import SearchIndex

log = get_logger(__name__)

AHEAD_PIECE = 1 << 20
"""Session bytes one idle step stores (about a second of building on a busy machine): a request
that comes meanwhile waits for at most one piece."""
BEFORE_QUERY_S = 2.0
"""How long a pinned query lets the build of its session go on before it answers from what is built
(the extension waits 30 s for a tool; the first pinned search should answer within 5)."""
KEPT_FILES = 4
"""Sessions built ahead (a Pi process works in one at a time); the least recently named go first."""


class MemoryAhead:
    """The session files whose raw memory the child builds between requests, newest named first."""

    def __init__(self, settings: Settings, piece: int = AHEAD_PIECE, wait: float = BEFORE_QUERY_S) -> None:
        self.settings = settings
        self.piece = piece
        self.wait = wait
        """How long ``before_query`` lets the build go on."""
        self._left: OrderedDict[Path, int | None] = OrderedDict()
        """Each file's bytes left to build at its last step (``None``: not stepped yet)."""
        self.bytes_read = 0
        """Session bytes read so far (what a test compares with the file)."""

    def watch(self, path: Path) -> None:
        """Build ``path`` ahead from now on (most recently named first)."""
        self._left[path] = self._left.pop(path, None)
        while len(self._left) > KEPT_FILES:
            self._left.popitem(last=False)

    def behind(self, path: Path) -> bool:
        """``path`` still has bytes its raw memory does not hold (or was never looked at)."""
        return self._left.get(path) != 0

    def step(self) -> bool:
        """Store one piece of the newest session that is behind; whether any is still behind after it."""
        for path in reversed(list(self._left)):
            if self._left[path] != 0:
                self._step(path)
                break
        return any(left != 0 for left in self._left.values())

    def left(self, path: Path) -> int | None:
        """Bytes of ``path`` its raw memory did not hold at the last step (``None``: not stepped yet)."""
        return self._left.get(path)

    def before_query(self, path: Path) -> bool:
        """Build ``path`` for at most ``wait`` seconds; whether bytes are still left (the query then answers from what is built)."""
        self.watch(path)
        deadline = time.monotonic() + self.wait
        while self.behind(path) and path in self._left:
            self._step(path)
            if time.monotonic() >= deadline:
                break
        return self.behind(path) and path in self._left

    def _step(self, path: Path) -> None:
        report = MemorySync()
        index = SearchIndex(SearchIndex.default_path(self.settings.state_dir))
        try:
            sync_memory_file(index, path, report, budget=self.piece, pinned=True)
        except (OSError, sqlite3.DatabaseError) as error:
            # Unreadable for now, or the index is busy or damaged: the next query reads or
            # rebuilds it (``query.run_query``) and says why; no retry every idle second.
            log.warning("memory_ahead_stopped", path=str(path), error=str(error))
            self._left.pop(path, None)
            return
        finally:
            index.close()
        self.bytes_read += report.bytes_read
        self._left[path] = report.bytes_left
        if report.bytes_left:
            log.debug("memory_ahead", path=str(path), left=report.bytes_left)
