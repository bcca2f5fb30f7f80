"""The 4-ary node tree of a session, with personal-bot 0.2.3's ``indexHistory()`` rules.

Every branch is grouped on its own: four consecutive nodes make a summary one level up,
level by level; what is left over at each level (fewer than four) hangs from the session
node. Node ids are ``${recordId}:${level}:${lastEntryId}``, so branches sharing a prefix share
its nodes, and a re-indexed session keeps the ids of everything that did not change. A summary
keeps its text only while its children are the same nodes and none of them changed.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from pbot_watch.history.jstext import UNDEFINED, js_truthy, locale_key, utf16_key

GROUP = 4
KEPT_KEYS = 1 << 16
"""Sort keys of root timestamps one indexer keeps (a long session has hundreds of roots)."""

# Record ids for sessions pbot-watch sees first: a UUID derived from the session id, so that
# a one-shot index and the live watcher name a new record identically. pbot uses random v4
# UUIDs; both are plain strings to every reader, and existing records keep their id.
RECORD_NAMESPACE = uuid.UUID("5b0f3c1e-8d2a-4f6b-9c7e-2a1d4e6f8b90")


def new_record_id(session_id: str) -> str:
    return str(uuid.uuid5(RECORD_NAMESPACE, session_id))


@dataclass(frozen=True, slots=True)
class SessionHistory:
    """What ``projectHistory()`` returns: a session's id, display name and per-branch exchanges."""

    session_id: str
    name: str
    branches: list[list[dict[str, Any]]]


def index_history(session: SessionHistory, previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """Build the record of ``session``, reusing ``previous`` (the record already on disk).

    Key order in each node dict follows pbot's object literals, so pbot finds our records
    byte-for-byte stable and does not rewrite them.
    """
    return RecordIndexer().index(session, previous)


Node = dict[str, Any]


def _first_last(dates: list[str]) -> tuple[str, str]:
    """The first and the last of ``dates`` in UTF-16 order (JavaScript's default sort).

    Only the ends of the sorted list are used: min and max cost a pass, not a sort. ASCII
    strings (timestamps) are in the same order as Python's, which saves encoding each one.
    """
    if all(date.isascii() for date in dates):
        return min(dates), max(dates)
    return min(dates, key=utf16_key), max(dates, key=utf16_key)


@dataclass(slots=True)
class _Made:
    """Nodes made by some branches, in the order pbot's loop first makes them.

    ``roots`` are the leftovers of those branches in order; ``layers`` the last branch's
    nodes level by level. The span of their dates and whether all are completed are kept to
    make the session node from.
    """

    nodes: dict[str, Node] = field(default_factory=dict)
    roots: dict[str, None] = field(default_factory=dict)
    changed: set[str] = field(default_factory=set)
    layers: list[list[Node]] = field(default_factory=list)
    earliest: str | None = None
    latest: str | None = None
    untimed: bool = False
    completed: bool = True

    def span(self) -> None:
        """Add these nodes' dates and completion to what was known (``earliest``, ``latest``, ...)."""
        dates = [] if self.earliest is None or self.latest is None else [self.earliest, self.latest]
        for node in self.nodes.values():
            for stamp in (node["from"], node["to"]):
                if stamp:
                    dates.append(stamp)
                else:
                    self.untimed = True
            if not node["completed"]:
                self.completed = False
        if dates:
            self.earliest, self.latest = _first_last(dates)


@dataclass(slots=True)
class _Trunk:
    """The nodes of every branch but the last, kept for the next index of the same record."""

    record_id: str
    branches: list[list[dict[str, Any]]]
    made: _Made


@dataclass
class RecordIndexer:
    """``index_history`` for one record, again and again, redoing only what an append changed.

    An append to a session extends its current branch, which is the last one (branches come in
    the file order of their tips, and the entry just written is the newest tip). The nodes of
    the other branches (the trunk) are the same as last time, and so are their parents except
    where the last branch or the session node names them: those nodes are kept and only the
    few named are copied to take their new parents. Of the last branch, the exchanges it had
    last time make the same nodes again, and so do the summaries of four of them, level by
    level: only the nodes past the first exchange that differs are made anew. A node whose
    parents did not change is the same object as in the last record, which lets the writer
    reuse its JSON. A 200 MB session of 170 branches then costs the nodes its append made,
    plus a pass over the last branch's nodes for their parents and dates.

    This holds only if ``previous`` is the record this indexer made last, unchanged: any other
    (a record written by pbot or by the summarizer, read back from disk) is indexed in full, as
    are branches other than the last that changed (a ``/tree`` move, a rewrite). Either way the
    result equals ``index_history`` of the same arguments (``tests/core/test_properties.py``).
    Records made here share node dicts with each other: they must not be changed in place.
    """

    _trunk: _Trunk | None = None
    _made: dict[str, Any] | None = None
    _mine: _Made | None = None
    """What the last branch made last time: its nodes (as in the record) and layers."""
    _branch: list[dict[str, Any]] = field(default_factory=list)
    _extended: dict[str, tuple[Node, list[str], Node]] = field(default_factory=dict)
    """Trunk nodes given more parents: the node, those parents, the copy in the record."""
    _keys: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=dict)
    reused: int = -1
    """Exchanges of the last branch kept from the last index; -1: indexed in full (for tests)."""

    def index(self, session: SessionHistory, previous: dict[str, Any] | None = None) -> dict[str, Any]:
        record_id: str = previous["id"] if previous else new_record_id(session.session_id)
        trunk = self._trunk
        *others, last = session.branches or [[]]
        earlier = self._mine
        if (
            trunk is not None
            and earlier is not None
            and previous is not None
            and previous is self._made
            and trunk.record_id == record_id
            and trunk.branches == others
        ):
            old, changed = earlier.nodes, set()
            stable = _common_prefix(self._branch, last)
            self.reused = stable
            shared_layers = earlier.layers
        else:
            self.reused = -1
            old = {}
            if previous:
                for node in previous.get("nodes", []):
                    if isinstance(node, dict) and isinstance(node.get("id"), str):
                        old[node["id"]] = node
            made = _Made()
            # Branches in tip order mostly part from the one before them (``/tree`` moves off a
            # long trunk): the nodes of the exchanges two neighbours share are taken from the
            # first one's layers, as the incremental path takes them from the last index, so a
            # full index of a session of 170 branches costs its nodes, not 170 walks of its trunk.
            layers: list[list[Node]] = []
            before_branch: list[dict[str, Any]] = []
            for branch in others:
                shared = _common_prefix(before_branch, branch) if layers else 0
                _branch_nodes(branch, record_id, old, {}, made, shared, layers)
                layers, before_branch = made.layers, branch
            made.span()
            for node in made.nodes.values():
                for child in node["children"]:
                    made.nodes[child]["parents"].append(node["id"])
            trunk = self._trunk = _Trunk(record_id, others, made)
            self._extended = {}
            changed = set(made.changed)
            stable = _common_prefix(before_branch, last) if layers else 0
            shared_layers = layers
        base = trunk.made
        mine = _Made(roots=dict(base.roots), changed=changed)
        _branch_nodes(last, record_id, old, base.nodes, mine, stable, shared_layers)
        mine.earliest, mine.latest = base.earliest, base.latest
        mine.untimed, mine.completed = base.untimed, base.completed
        mine.span()
        nodes = {**base.nodes, **mine.nodes}
        # ``a.from.localeCompare(b.from)``: a node without time (undefined in pbot) compares as the
        # string "undefined" whenever pbot gets through the sort at all.
        ordered_roots = sorted(mine.roots, key=lambda key: self._order(nodes[key]["from"] or UNDEFINED))
        # pbot sorts every from/to with the default (UTF-16) order, missing ones last: a node
        # without a timestamp ("" here, absent in pbot) leaves the session's ``to`` empty.
        session_node = {
            "id": record_id,
            "kind": "session",
            "level": -1,
            "entryIds": [],
            "text": session.name,
            "ready": True,
            "completed": mine.completed,
            "from": mine.earliest or "",
            "to": "" if mine.untimed else mine.latest or "",
            "parents": [],
            "children": ordered_roots,
        }
        # Parents in pbot's order: every node's, in the order of the node list, session last.
        parents: dict[str, list[str]] = {}
        for node in (*mine.nodes.values(), session_node):
            for child in node["children"]:
                parents.setdefault(child, []).append(node["id"])
        out = [
            node if key not in parents else self._named(node, parents[key])
            for key, node in base.nodes.items()
        ]
        for key, node in mine.nodes.items():
            fresh = parents.get(key, [])
            if node["parents"] == fresh:
                out.append(node)
            elif node is not old.get(key):
                node["parents"] = fresh  # made just now: not in any record yet
                out.append(node)
            else:
                mine.nodes[key] = copy = {**node, "parents": fresh}
                out.append(copy)
        out.append(session_node)
        for layer in mine.layers:
            layer[:] = [mine.nodes.get(node["id"], node) for node in layer]
        self._mine, self._branch = mine, last
        self._made = record = {
            "id": record_id,
            "sessionId": session.session_id,
            "name": session.name,
            "nodes": out,
        }
        return record

    def _order(self, stamp: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """``locale_key(stamp)``, kept: the roots of a long session are sorted again at each append."""
        key = self._keys.get(stamp)
        if key is None:
            if len(self._keys) > KEPT_KEYS:
                self._keys.clear()
            key = self._keys[stamp] = locale_key(stamp)
        return key

    def _named(self, node: Node, more: list[str]) -> Node:
        """A trunk node with the parents the last branch and the session add: the same copy while they are."""
        key = node["id"]
        known = self._extended.get(key)
        if known is not None and known[0] is node and known[1] == more:
            return known[2]
        copy = {**node, "parents": [*node["parents"], *more]}
        self._extended[key] = (node, more, copy)
        return copy


def _common_prefix(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> int:
    """How many exchanges both lists start with (the same objects, or equal ones)."""
    count = min(len(before), len(after))
    for i in range(count):
        if before[i] is not after[i] and before[i] != after[i]:
            return i
    return count


def _branch_nodes(
    branch: list[dict[str, Any]],
    record_id: str,
    old: dict[str, Node],
    before: dict[str, Node],
    made: _Made,
    stable: int = 0,
    layers: list[list[Node]] | None = None,
) -> None:
    """The loop of pbot over one branch: its exchanges, then four nodes to a summary level by level.

    Nodes already made (``before``, then ``made``'s own) are found again by id, as pbot's map
    finds them; new ones go into ``made``. The first ``stable`` exchanges are those of the
    branch ``layers`` were made from (against the record those layers are in): the nodes they
    make, and the summaries of four of them level by level, are taken from there.
    """
    nodes, changed, roots = made.nodes, made.changed, made.roots

    def add(value: dict[str, Any], level: int, children: list[str]) -> Node:
        key = f"{record_id}:{level}:{value['entryIds'][-1]}"
        found = before.get(key)
        if found is None:
            found = nodes.get(key)
        if found is not None:
            return found
        previous = old.get(key)
        same = (
            previous is not None
            and previous.get("children") == children
            and (
                all(child not in changed for child in children)
                if level
                # ``===``: a stored ``1`` is not ``true``
                else previous.get("text") == value["text"] and previous.get("completed") is value["completed"]
            )
        )
        node = dict(value)
        node.update(
            id=key, kind="summary" if level else "exchange", level=level, children=children, parents=[]
        )
        if level:
            node["text"] = previous.get("text", "") if same and previous is not None else ""
            node["ready"] = bool(same and previous is not None and js_truthy(previous.get("ready")))
            if node["ready"] and previous is not None:
                # Fields pbot does not know (who wrote the summary, from what input) travel with it.
                for extra, extra_value in previous.items():
                    if extra not in node:
                        node[extra] = extra_value
        else:
            node["ready"] = True
        if not same:
            changed.add(key)
        nodes[key] = node
        return node

    def kept(node: Node) -> Node:
        # As ``add`` would find or make it again: the trunk's, else ours from last time.
        key = node["id"]
        if key not in before:
            nodes.setdefault(key, node)
        return node

    layers = layers or []
    layer = [kept(node) for node in layers[0][:stable]] if layers else []
    layer += [add(exchange, 0, []) for exchange in branch[len(layer) :]]
    made.layers = [layer]
    level = 1
    while len(layer) >= GROUP:
        count = len(layer) // GROUP * GROUP
        for node in layer[count:]:
            roots.setdefault(node["id"], None)
        stable //= GROUP
        upper = [kept(node) for node in layers[level][:stable]] if level < len(layers) else []
        for i in range(len(upper) * GROUP, count, GROUP):
            group = layer[i : i + GROUP]
            first, last = group[0], group[-1]
            upper.append(
                add(
                    {
                        "entryIds": [first["entryIds"][0], last["entryIds"][-1]],
                        "text": "",
                        "from": first["from"],
                        "to": last["to"],
                        "completed": all(n["completed"] for n in group),
                    },
                    level,
                    [n["id"] for n in group],
                )
            )
        made.layers.append(upper)
        layer = upper
        level += 1
    for node in layer:
        roots.setdefault(node["id"], None)
