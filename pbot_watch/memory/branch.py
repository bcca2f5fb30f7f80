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

from pbot_watch.search.models import MemoryContext

HISTORICAL: MemoryContext = "historical"
RETAINED: MemoryContext = "retained"
UNKNOWN: MemoryContext = "unknown"


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


def context_labels(path: Sequence[str], compactions: Mapping[str, str]) -> list[MemoryContext]:
    """Each entry of ``path`` (root to leaf) labelled by what the latest compaction on it left.

    ``compactions`` maps the ids of compaction entries to their ``firstKeptEntryId``. Without a
    compaction on the path everything is retained. When the latest compaction's kept id is not
    on the path before it, the entries before the compaction are *unknown*, not historical:
    Pi 1.6 would then keep none of them, but a kept id we cannot find means our path is not
    the one Pi built (a line we skipped as malformed, a parent missing from the file, an
    extension's compaction naming an entry elsewhere), so what Pi really kept is unknowable
    from the file. The compaction itself and what follows are retained in every case.
    """
    latest = next((i for i in range(len(path) - 1, -1, -1) if path[i] in compactions), None)
    if latest is None:
        return [RETAINED] * len(path)
    kept = first_kept(path, latest, compactions[path[latest]])
    if kept is None:
        return [UNKNOWN] * latest + [RETAINED] * (len(path) - latest)
    return [HISTORICAL] * kept + [RETAINED] * (len(path) - kept)
