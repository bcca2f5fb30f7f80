"""One branch walk and one leaf rule (``pi/branch.py``) for records and raw memory alike.

Records walk ``SessionTree.branch`` and raw memory ``memory.extract.path_to_root``: on any
tree (duplicate ids, missing parents, cycles, several roots) they must name the same entries,
and both take Pi's current leaf, the last entry appended.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pbot_watch.history.tree import SessionTree
from pbot_watch.memory.extract import EntryLink, current_leaf_id, path_to_root
from pbot_watch.pi.branch import current_leaf, walk_to_root

IDS = st.sampled_from(["a", "b", "c", "d", "e", "f"])
ENTRIES = st.lists(st.tuples(IDS, st.one_of(st.none(), IDS, st.just("gone"))), min_size=1, max_size=14)


def itself(entry_id: str | None) -> str | None:
    return entry_id


@given(ENTRIES)
def test_records_and_raw_memory_walk_the_same_branch(entries: list[tuple[str, str | None]]) -> None:
    """From every entry, the tree's branch and raw memory's path hold the same ids."""
    tree = SessionTree()
    for entry_id, parent in entries:
        tree.add({"type": "custom", "id": entry_id, "parentId": parent})
    links = [EntryLink(seq, entry_id, parent) for seq, (entry_id, parent) in enumerate(entries)]
    for tip in {entry_id for entry_id, _parent in entries}:
        assert [step.id for step in tree.branch(tip)] == path_to_root(links, tip)[::-1]
    assert tree.leaf == current_leaf_id(links) == entries[-1][0]


def walk(tip: str, parents: dict[str, str | None]) -> tuple[list[str], bool]:
    return walk_to_root(tip, {entry_id: entry_id for entry_id in parents}, parents.__getitem__)


def test_the_walk_stops_where_pi_stops() -> None:
    """At a null or missing parent, and (where Pi would loop) at the first repeated id."""
    parents: dict[str, str | None] = {"c": "b", "b": "a", "a": None}
    assert (["c", "b", "a"], False) == walk("c", parents)
    assert (["y"], False) == walk("y", {"y": "gone"})
    assert (["x", "y"], True) == walk("x", {"x": "y", "y": "x"})
    assert ([], False) == walk("nobody", parents)


def test_the_leaf_is_the_last_entry_appended() -> None:
    """Pi's ``_buildIndex`` rule: the last entry's id, none when it has none."""
    assert "b" == current_leaf(["a", "b"], itself)
    assert current_leaf([], itself) is None
    assert current_leaf(["a", None], itself) is None
