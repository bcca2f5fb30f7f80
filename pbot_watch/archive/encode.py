"""A record's JSON, made again after an append from the pieces of the nodes that did not change.

The record of a long session is one JSON file (personal-bot 0.2.3 reads the whole file, so
it stays one), 6-16 MB for a 200 MB session, and encoding it was a third of what an append
cost. ``history.nodes.RecordIndexer`` gives every node an append did not touch as the very
object of the last record, so each node's JSON is kept beside it and a write encodes only the
nodes that are new objects (and of those, only the ones that differ from the node of the same
id last time: comparing is cheaper than encoding, which helps a record indexed in full); the
rest is a join. The bytes are those of ``dumps_utf8`` of the whole record
(``tests/core/test_archive.py``).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pbot_watch.archive.fresh import Delta
from pbot_watch.history.jstext import dumps_utf8

KEPT_BYTES = 32 << 20
"""Node JSON kept over all records, least recently written out first: the records of the two or
three long sessions a person works in (a 300 MB session's is 9.5 MB). A one-shot index writes
each record once and gains nothing from it, so this is also what it costs that index in RSS."""

Pieces = dict[str, tuple[Any, bytes]]
"""``node id -> (node, its JSON)``: the JSON stands while the node is the same object or equal to it."""


@dataclass
class RecordEncoder:
    """Encodes records, keeping the JSON of each record's nodes for its next write."""

    kept_bytes: int = KEPT_BYTES
    _kept: OrderedDict[Path, tuple[Pieces, int, dict[str, int]]] = field(default_factory=OrderedDict)
    _total: int = 0
    reused: int = 0
    """Nodes whose JSON the last ``encode`` took from the last write (for tests and benchmarks)."""
    from_file: int = 0
    """Of those, the nodes whose JSON the last ``encode`` cut out of the file (``read_json``)."""
    changed: frozenset[str] | None = None
    """Ids of the nodes the last ``encode`` did not find as they were (``None``: nothing was kept)."""
    delta: Delta | None = None
    """``changed``, and the nodes the last ``encode`` found gone or moved (``None``: nothing was kept)."""

    def encode(
        self,
        path: Path,
        record: dict[str, Any],
        read: dict[str, Any] | None = None,
        read_json: list[bytes] | None = None,
    ) -> bytes:
        """The record's line (``dumps_utf8`` and a newline), reusing the JSON of the nodes ``path`` had.

        ``read``: the record as read from the file, for a path nothing is kept of (the first
        write after a start): ``changed`` then names the nodes that differ from it.
        ``read_json``: the JSON of each of ``read``'s nodes as in the file, when that file is one
        we wrote (``archive/marks.py``): the nodes equal to theirs are not encoded again.
        """
        nodes = record.get("nodes")
        if not isinstance(nodes, list):
            self.changed = None
            return dumps_utf8(record) + b"\n"
        kept = self._kept.pop(path, None)
        before, size, was_at = kept if kept is not None else ({}, 0, None)
        if kept is None and read is not None and isinstance(read.get("nodes"), list):
            read_nodes = read["nodes"]
            was_at = _positions(read_nodes)
            if read_json is None or len(read_json) != len(read_nodes):
                read_json = [b""] * len(read_nodes)
            before = {
                n["id"]: (n, data)
                for n, data in zip(read_nodes, read_json, strict=True)
                if isinstance(n, dict) and isinstance(n.get("id"), str)
            }
        self._total -= size
        pieces: Pieces = {}
        parts: list[bytes] = []
        reused = from_file = 0
        changed: set[str] = set()
        at: dict[str, int] = {}
        for index, node in enumerate(nodes):
            key = node.get("id") if isinstance(node, dict) else None
            if isinstance(key, str):
                at.setdefault(key, index)
            known = before.get(key) if isinstance(key, str) else None
            # Equal and in the same key order (dict equality ignores it; the JSON does not).
            if known is not None and (
                known[0] is node or (known[0] == node and list(known[0]) == list(node))
            ):
                data = known[1] or dumps_utf8(node)  # read, not written: its JSON was not kept
                reused += 1
                from_file += kept is None and bool(known[1])
            else:
                data = dumps_utf8(node)
                if isinstance(key, str):
                    changed.add(key)
            if isinstance(key, str):
                pieces[key] = (node, data)
            parts.append(data)
        self.reused, self.from_file = reused, from_file
        self.changed = frozenset(changed) if before or kept is not None else None
        self.delta = None
        if self.changed is not None and was_at is not None:
            moved = frozenset(key for key, index in at.items() if was_at.get(key, index) != index)
            self.delta = Delta(self.changed, frozenset(was_at.keys() - at.keys()), moved)
        # One join for the whole line: a 50 MB node copied once, not once per concatenation.
        out = [b"{"]
        for key, value in record.items():
            if len(out) > 1:
                out.append(b",")
            out += (dumps_utf8(key), b":")
            if key != "nodes":
                out.append(dumps_utf8(value))
                continue
            out.append(b"[")
            for index, data in enumerate(parts):
                if index:
                    out.append(b",")
                out.append(data)
            out.append(b"]")
        out.append(b"}\n")
        size = sum(map(len, parts)) + max(len(parts) - 1, 0) + 2
        if size <= self.kept_bytes:
            self._kept[path] = (pieces, size, at)
            self._total += size
            while self._total > self.kept_bytes:
                _, (_, dropped, _) = self._kept.popitem(last=False)
                self._total -= dropped
        return b"".join(out)

    def holds(self, path: Path) -> bool:
        """Whether the JSON of ``path``'s last write is kept (its next ``encode`` needs no ``read``)."""
        return path in self._kept

    def forget(self, path: Path | None = None) -> None:
        """Drop what is kept of ``path`` (a write that failed), or of every record."""
        if path is None:
            self._kept.clear()
            self._total = 0
            return
        _, size, _ = self._kept.pop(path, ({}, 0, {}))
        self._total -= size


def _positions(nodes: list[Any]) -> dict[str, int]:
    """Each node id's first position in ``nodes`` (where an index keeps its row)."""
    at: dict[str, int] = {}
    for index, node in enumerate(nodes):
        key = node.get("id") if isinstance(node, dict) else None
        if isinstance(key, str):
            at.setdefault(key, index)
    return at
