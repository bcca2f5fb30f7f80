"""What a branch's compactions took out of the model's context. Pure.

Pi builds a request from the path between the root and the current leaf; when that path holds
compactions, the latest one stands in for everything before its ``firstKeptEntryId`` (Pi's
``buildContextEntries``): the model sees the summary, the kept entries from that id up to the
compaction, and everything after it. pi-echo calls what was left out *historical* and what is
still there *retained*; memory search puts historical hits first and the memory cues are made
of the historical tool work, batch by batch, so both use this one reading of a compaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pbot_watch.memory.models import MemoryContext

HISTORICAL: MemoryContext = "historical"
RETAINED: MemoryContext = "retained"


def first_kept(path: Sequence[str], compaction_at: int, kept_id: str) -> int | None:
    """The position on ``path`` (root to leaf) of the compaction's first kept entry, or ``None``.

    Only entries before the compaction count, as in Pi; a retain-none compaction names itself,
    so its own position comes back and everything before it was left out. ``None`` when the
    kept id is nowhere before the compaction.
    """
    if kept_id == path[compaction_at]:
        return compaction_at
    for position in range(compaction_at - 1, -1, -1):
        if path[position] == kept_id:
            return position
    return None


def kept_boundary(path: Sequence[str], compaction_at: int, kept_id: str) -> int:
    """Where what the compaction at ``compaction_at`` kept starts: everything before it left.

    The one rule memory search's labels and the memory cues both follow. Pi's own: when the
    kept id is not on the path before the compaction (none was written, a v1 index pointed
    past it, an extension named an entry of another branch), Pi's ``buildContextEntries``
    keeps nothing before the compaction, so all of it left the context. A file read the way
    Pi reads it (the same skipped lines, the same missing parents) gives Pi's path, so there
    is nothing to doubt: the entries are historical, and cues list their tool work.
    """
    return boundary_at(compaction_at, first_kept(path, compaction_at, kept_id))


def boundary_at(compaction_at: int, kept_at: int | None) -> int:
    """``kept_boundary`` from where the kept entry is on the path (``None``: not on it).

    For a reader that keeps each entry's position instead of the path (raw memory's index):
    a branch holds an entry once, so the kept entry counts only at or before the compaction.
    """
    return kept_at if kept_at is not None and kept_at <= compaction_at else compaction_at


def context_labels(path: Sequence[str], compactions: Mapping[str, str]) -> list[MemoryContext]:
    """Each entry of ``path`` (root to leaf) labelled by what the latest compaction on it left.

    ``compactions`` maps the ids of compaction entries to their ``firstKeptEntryId`` ("" for
    none). Without a compaction on the path everything is retained; with one, what is before
    its ``kept_boundary`` is historical, the rest retained.
    """
    latest = next((i for i in range(len(path) - 1, -1, -1) if path[i] in compactions), None)
    if latest is None:
        return [RETAINED] * len(path)
    boundary = kept_boundary(path, latest, compactions[path[latest]])
    return [HISTORICAL] * boundary + [RETAINED] * (len(path) - boundary)
