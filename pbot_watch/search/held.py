"""The search index as a long-lived process holds it: one connection, kept for as long as it is right.

The service's record listeners write to the index after every record. Other processes may
replace the file meanwhile: a query that meets a damaged index deletes it and builds a new one
(``query.run_query``), and a newer pbot-watch rebuilds one of an older schema. A connection kept
open would then go on writing to the deleted file, unseen by every query. So each use compares
the file's identity with the one opened (one ``stat``), and damage met while writing resets the
index, as a query does: it is derived data.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from pbot_watch.search.database import asked_again_on_damage

if TYPE_CHECKING:  # opened on first use: the service starts without loading the search code
    from pbot_watch.search.index import SearchIndex

T = TypeVar("T")


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


class HeldIndex:
    """``search.db`` under ``state_dir``, opened on first use on the thread that uses it."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self._index: SearchIndex | None = None
        self._identity: tuple[int, int] | None = None

    def use(self, work: Callable[[SearchIndex], T], *, reset: bool = True) -> T:
        """``work(index)`` on the current file; on damage, once more on an index started afresh.

        ``reset=False``: damage is raised to the caller, for a helper process that must leave
        starting the index afresh to the service (raw memory's build worker).
        """
        index = self._current()
        if not reset:
            return work(index)

        def afresh(_: sqlite3.DatabaseError) -> None:
            index.reset()
            self._identity = _identity(index.path)

        return asked_again_on_damage(lambda _: work(index), afresh)

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None

    def _current(self) -> SearchIndex:
        if self._index is not None and _identity(self._index.path) != self._identity:
            self.close()  # replaced or deleted by another process: follow the file
        if self._index is None:
            from pbot_watch.search.index import SearchIndex  # noqa: PLC0415 - see TYPE_CHECKING

            self._index = SearchIndex(SearchIndex.default_path(self.state_dir))
            self._identity = _identity(self._index.path)
        return self._index
