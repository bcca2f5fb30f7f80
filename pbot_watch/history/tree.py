"""The entry tree of one session file and its branches, kept up to date entry by entry.

personal-bot takes every tip (an entry that is nobody's parent) and walks ``getBranch(tip)``
(``pi/branch.walk_to_root``, the walk raw memory uses too): ``parentId`` links through an id
map where the last entry with an id wins, stopping at a missing or falsy parent. We do the
same, with two differences that only matter where pbot breaks: a ``parentId`` cycle is cut
(pbot loops until memory runs out) and reported, and each tip keeps its exchange state so an
append resumes it instead of re-walking the branch.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pbot_watch.history.exchanges import ExchangeBuilder, Step, step_of
from pbot_watch.history.jstext import js_trim
from pbot_watch.pi.branch import current_leaf, walk_to_root
from pbot_watch.pi.entries import ID_MISSING, ID_NULL, PARENT_MISSING, PARENT_NULL


def _parent(step: Step) -> str | None:
    return step.parent


def _id(step: Step) -> str | None:
    return step.id


@dataclass
class SessionTree:
    steps: list[Step] = field(default_factory=list)
    by_id: dict[str, Step] = field(default_factory=dict)
    parent_count: Counter[str] = field(default_factory=Counter)
    name: str | None = None
    cycles: set[str] = field(default_factory=set)
    # Whether some entry's parentId is null / missing: pbot's ``parents`` set then holds that
    # value, and entries whose id is null / missing are not tips.
    parent_null: bool = False
    parent_missing: bool = False
    # tip id -> exchange state of the branch ending there; tips without an entry are recomputed.
    _tips: dict[str, ExchangeBuilder | None] = field(default_factory=dict)
    # Ids that are nobody's parent, in the order they first appeared, with that step's index:
    # kept as steps arrive (a count only grows, so an id that stops being a tip never comes
    # back), so that ``tips`` costs the tips, not a walk over every entry at each append.
    _tip_ids: dict[str, int] = field(default_factory=dict)
    # Indexes of steps without an id that may stand for the leaf (see ``tips``): rare.
    _idless: list[int] = field(default_factory=list)

    def add(self, entry: dict[str, Any], links: int = 0) -> None:
        self.add_step(step_of(entry, links))

    def add_step(self, step: Step) -> None:
        """``add`` for an entry already reduced to its ``Step`` (a resumed state replays them)."""
        index = len(self.steps)
        self.steps.append(step)
        if step.links & PARENT_NULL:
            self.parent_null = True
        elif step.links & PARENT_MISSING:
            self.parent_missing = True
        if step.is_info:
            # getSessionName(): the latest session_info in file order; an empty name clears it.
            self.name = js_trim(step.name) if step.name is not None else None
            self.name = self.name or None
        entry_id, parent = step.id, step.parent
        if parent is not None:
            self.parent_count[parent] += 1
            self._tip_ids.pop(parent, None)
        if entry_id is None:
            if step.links & (ID_NULL | ID_MISSING):
                self._idless.append(index)
            return
        if entry_id not in self.by_id and not self.parent_count[entry_id]:
            self._tip_ids[entry_id] = index
        if entry_id in self.by_id or self.parent_count[entry_id]:
            # A duplicate id, or the missing parent of earlier entries arriving late: branches
            # through this id change shape, so every cached branch is recomputed.
            self.by_id[entry_id] = step
            self._tips = {}
            return
        self.by_id[entry_id] = step
        resumed = self._tips.pop(parent, None) if parent is not None else None
        if resumed is not None and parent is not None and self.parent_count[parent] == 1:
            resumed.add(step)
            self._tips[entry_id] = resumed
        else:
            if resumed is not None and parent is not None:
                self._tips[parent] = resumed
            self._tips[entry_id] = None

    @property
    def leaf(self) -> str | None:
        """Pi's ``leafId`` (``current_leaf``): the id of the last entry in file order, if it has one."""
        return current_leaf(self.steps, _id)

    def tips(self) -> list[str]:
        """Tip ids in file order, each once (duplicate tips give identical branches).

        pbot keeps every entry whose raw id is not some entry's raw parentId. An entry with a
        null or missing id can pass that test; ``getBranch(undefined)`` then walks from the leaf,
        so the leaf's branch takes that entry's place in the order.
        """
        leaf = self.leaf
        at = self._stand_in() if leaf is not None else None
        if leaf is None or at is None:
            return list(self._tip_ids)
        seen: dict[str, None] = {}
        for tip, first in self._tip_ids.items():
            if at is not None and first > at:
                seen.setdefault(leaf, None)
                at = None
            seen.setdefault(tip, None)
        if at is not None:
            seen.setdefault(leaf, None)
        return list(seen)

    def _stand_in(self) -> int | None:
        """The index of the first step without an id that is a tip by pbot's test, if any."""
        for index in self._idless:
            links = self.steps[index].links
            if (links & ID_NULL and not self.parent_null) or (links & ID_MISSING and not self.parent_missing):
                return index
        return None

    def tipless(self) -> bool:
        """Whether no entry with an id is a tip: each is some entry's parent.

        Then a ``parentId`` cycle runs through all of them (a finite set where every entry has
        a child has one), and pbot, which walks from tips only, finds no branch at all.
        """
        return bool(self.by_id) and not self.tips()

    def branch(self, tip: str) -> list[Step]:
        """``getBranch(tip)``: root first; a cycle is cut at the first repeated id (``walk_to_root``)."""
        path, cut = walk_to_root(tip, self.by_id, _parent)
        if cut:
            self.cycles.add(tip)
        path.reverse()
        return path

    def branches(self) -> list[list[dict[str, Any]]]:
        """Exchanges of every branch, in tip order, empty branches dropped (as pbot does)."""
        out: list[list[dict[str, Any]]] = []
        tips = self.tips()
        missing = {tip for tip in tips if self._tips.get(tip) is None}
        walked = self._walked(missing) if len(missing) > 1 else {}
        fresh: dict[str, ExchangeBuilder | None] = {}
        for tip in tips:
            builder = self._tips.get(tip)
            if builder is None:
                builder = walked.get(tip)
            if builder is None:
                builder = ExchangeBuilder()
                for step in self.branch(tip):
                    builder.add(step)
            fresh[tip] = builder
            result = builder.result()
            if result:
                out.append(result)
        self._tips = fresh
        return out

    def _walked(self, wanted: set[str]) -> dict[str, ExchangeBuilder]:
        """The exchange state of each tip in ``wanted``, from one walk down the tree.

        Walking up from every tip (``branch``) repeats the shared trunk once per tip: a long
        session with hundreds of ``/tree`` branches paid its trunk hundreds of times whenever
        its tips were rebuilt (a file read from 0, or resumed from its log). Down from the
        roots, through the same links (``by_id``, the last entry with an id wins), each entry is
        added once and the state is copied only where branches part. A tip no root reaches sits
        on a ``parentId`` cycle: it is left out, for ``branch`` to cut as before.
        """
        by_id = self.by_id
        children: dict[int, list[Step]] = {}
        roots: list[Step] = []
        for step in by_id.values():
            parent = by_id.get(step.parent) if step.parent else None
            if parent is None:
                roots.append(step)
            else:
                children.setdefault(id(parent), []).append(step)
        out: dict[str, ExchangeBuilder] = {}
        stack = [(root, ExchangeBuilder()) for root in roots]
        while stack:
            step, builder = stack.pop()
            builder.add(step)
            kids = children.get(id(step))
            if not kids:
                if step.id in wanted:
                    out[step.id] = builder
                continue
            stack.extend((kid, builder.copy()) for kid in kids[1:])
            stack.append((kids[0], builder))
        return out
