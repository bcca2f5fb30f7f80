"""Records this process just wrote, handed to whoever indexes them, with what changed in them.

The search index used to learn of a written record by its path only: it read the whole file
back, decoded it, redacted and compared every node, 2.4 s for the 6 MB record of a 200 MB
session, after every append. The writer has the record in memory and knows which nodes it
encoded anew (``archive/encode.py``): those are what an index must change. So each write
leaves a ``Written`` here (the record, the file's stamp after the write and the stamp of the
write before, the ids of the nodes that differ), and the search listener takes it.

A ``Written`` says what changed since the file stood at ``base``: a consumer that holds the
file at ``base`` applies the change, any other (its copy is older, or another tool wrote the
file meanwhile) reads the file as before. Writes not yet taken are merged, so a consumer that
falls behind still applies one change. The records are the writer's, shared: read only.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pbot_watch.archive.stamp import FileStamp

KEPT = 256
"""Writes kept for a consumer that does not come (a bound, not a budget: each is shared)."""
KEPT_BYTES = 16 << 20
"""And at most this much of them, by their size on disk. Count alone was no bound: on a first run
over a long history the listener falls behind the reading, and 256 records of a megabyte each
(their exchanges' text) stayed in memory until it caught up. A write dropped here costs its
consumer one read of the file, which is what it did before hand-overs."""


@dataclass(frozen=True, slots=True)
class Delta:
    """What one write changed in a record's node list, against the record written before it."""

    changed: frozenset[str]
    """Ids of nodes new or different."""
    removed: frozenset[str]
    """Ids of nodes no longer in the record."""
    moved: frozenset[str]
    """Ids of nodes still there, at another position in the list (new ones are ``changed``)."""

    def then(self, later: Delta) -> Delta:
        """This change followed by ``later``: what both did to the record before this one.

        A node that kept its place in both kept it; one removed, then made again, is changed.
        """
        return Delta(
            self.changed | later.changed,
            (self.removed - later.changed) | later.removed,
            self.moved | later.moved,
        )


@dataclass(frozen=True, slots=True)
class Written:
    """One record as written, and which of its nodes differ from the file at ``base``."""

    record: dict[str, Any]
    stamp: FileStamp
    base: FileStamp | None
    """The file's stamp before (``None``: the writer knew no earlier write; all nodes count)."""
    changed: frozenset[str] | None
    """Ids of nodes new or changed since ``base``; ``None``: any node may have."""
    delta: Delta | None = None
    """With ``changed``, the nodes gone and moved since ``base`` too (``None``: not known): an
    index that holds the file at ``base`` then reads the rows of those nodes only."""
    size: int = 0
    """The record's bytes as written: what ``FreshRecords`` counts against ``KEPT_BYTES``."""

    def after(self, earlier: Written) -> Written:
        """This write merged with an ``earlier`` one nobody took: the change since its base."""
        if earlier.stamp != self.base:
            return self
        changed = None if earlier.changed is None or self.changed is None else earlier.changed | self.changed
        delta = None if earlier.delta is None or self.delta is None else earlier.delta.then(self.delta)
        return Written(self.record, self.stamp, earlier.base, changed, delta, self.size)


class FreshRecords:
    """Written records by path, from the writing thread to the indexing one (thread-safe)."""

    def __init__(self, kept: int = KEPT, kept_bytes: int = KEPT_BYTES) -> None:
        self.kept = kept
        self.kept_bytes = kept_bytes
        self._lock = threading.Lock()
        self._by_path: OrderedDict[Path, Written] = OrderedDict()
        self._bytes = 0

    def put(self, path: Path, written: Written) -> None:
        """Keep ``written`` for its consumer; the oldest writes go beyond ``kept`` or ``kept_bytes``.

        The newest is kept whatever its size: it is the one its consumer is about to take.
        """
        with self._lock:
            earlier = self._by_path.pop(path, None)
            if earlier is not None:
                self._bytes -= earlier.size
                written = written.after(earlier)
            self._by_path[path] = written
            self._bytes += written.size
            while len(self._by_path) > 1 and (
                len(self._by_path) > self.kept or self._bytes > self.kept_bytes
            ):
                self._bytes -= self._by_path.popitem(last=False)[1].size

    def take(self, path: Path) -> Written | None:
        with self._lock:
            written = self._by_path.pop(path, None)
            if written is not None:
                self._bytes -= written.size
            return written
