"""The current branch of a session: Pi's leaf rule and Pi's ``getBranch`` walk. Pure.

On load Pi makes the last entry appended the current leaf (``SessionManager._buildIndex``
sets ``leafId`` entry by entry; the leaf itself is never written), and ``getBranch(leaf)``
follows ``parentId`` through an id map where the last entry with an id wins, until a parent
is null or missing, then reverses the list. Records (``history/tree.py``) and raw memory
(``memory/``) both ask here. The one difference from Pi is where Pi breaks: a ``parentId``
cycle is cut at the first repeated id (Pi walks it until memory runs out) and said.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

Node = TypeVar("Node")


def current_leaf(entries: Sequence[Node], id_of: Callable[[Node], str | None]) -> str | None:
    """The id of the last entry appended (``None`` when there is none, or it has no id).

    Records give it every entry, as pbot sees them; raw memory gives it the entries its tree
    holds, those with an id (an entry without one can be no entry's parent, nor be pinned), so
    its leaf is the last entry with an id.
    """
    return id_of(entries[-1]) if entries else None


def walk_to_root(
    tip: str, by_id: Mapping[str, Node], parent_of: Callable[[Node], str | None]
) -> tuple[list[Node], bool]:
    """The entries from ``tip`` up to its root (leaf first), and whether a cycle was cut.

    ``by_id`` holds the last entry with each id. The walk stops at an entry whose parent is
    null, empty or not in ``by_id``, and at the first id seen twice.
    """
    path: list[Node] = []
    seen: set[str] = set()
    current_id = tip
    current = by_id.get(tip)
    while current is not None:
        if current_id in seen:
            return path, True
        seen.add(current_id)
        path.append(current)
        parent = parent_of(current)
        if not parent:
            break
        current_id, current = parent, by_id.get(parent)
    return path, False
