"""The 4-ary node tree of a session, with personal-bot 0.2.3's ``indexHistory()`` rules.

Every branch is grouped on its own: four consecutive nodes make a summary one level up,
level by level; what is left over at each level (fewer than four) hangs from the session
node. Node ids are ``${recordId}:${level}:${lastEntryId}``, so branches sharing a prefix share
its nodes, and a re-indexed session keeps the ids of everything that did not change. A summary
keeps its text only while its children are the same nodes and none of them changed.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from pbot_watch.history.jstext import UNDEFINED, js_truthy, locale_key, utf16_key

GROUP = 4

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
    record_id: str = previous["id"] if previous else new_record_id(session.session_id)
    old: dict[str, dict[str, Any]] = {}
    if previous:
        for node in previous.get("nodes", []):
            if isinstance(node, dict) and isinstance(node.get("id"), str):
                old[node["id"]] = node
    nodes: dict[str, dict[str, Any]] = {}
    changed: set[str] = set()

    def add(value: dict[str, Any], level: int, children: list[str]) -> dict[str, Any]:
        key = f"{record_id}:{level}:{value['entryIds'][-1]}"
        found = nodes.get(key)
        if found is not None:
            return found
        before = old.get(key)
        same = (
            before is not None
            and before.get("children") == children
            and (
                all(child not in changed for child in children)
                if level
                # ``===``: a stored ``1`` is not ``true``
                else before.get("text") == value["text"] and before.get("completed") is value["completed"]
            )
        )
        node = dict(value)
        node.update(
            id=key, kind="summary" if level else "exchange", level=level, children=children, parents=[]
        )
        if level:
            node["text"] = before.get("text", "") if same and before is not None else ""
            node["ready"] = bool(same and before is not None and js_truthy(before.get("ready")))
            if node["ready"] and before is not None:
                # Fields pbot does not know (who wrote the summary, from what input) travel with it.
                for extra, extra_value in before.items():
                    if extra not in node:
                        node[extra] = extra_value
        else:
            node["ready"] = True
        if not same:
            changed.add(key)
        nodes[key] = node
        return node

    roots: dict[str, None] = {}
    for branch in session.branches:
        layer = [add(exchange, 0, []) for exchange in branch]
        level = 1
        while len(layer) >= GROUP:
            count = len(layer) // GROUP * GROUP
            for node in layer[count:]:
                roots.setdefault(node["id"], None)
            upper: list[dict[str, Any]] = []
            for i in range(0, count, GROUP):
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
            layer = upper
            level += 1
        for node in layer:
            roots.setdefault(node["id"], None)

    # pbot sorts every from/to with the default (UTF-16) order, missing ones last: a node
    # without a timestamp ("" here, absent in pbot) leaves the session's ``to`` empty.
    stamps = [d for n in nodes.values() for d in (n["from"], n["to"])]
    dates = [d for d in stamps if d]
    untimed = len(dates) < len(stamps)
    # Only the ends of the sorted list are used: min and max cost a pass, not a sort.
    earliest = min(dates, key=utf16_key) if dates else ""
    latest = max(dates, key=utf16_key) if dates else ""
    # ``a.from.localeCompare(b.from)``: a node without time (undefined in pbot) compares as the
    # string "undefined" whenever pbot gets through the sort at all.
    ordered_roots = sorted(roots, key=lambda key: locale_key(nodes[key]["from"] or UNDEFINED))
    nodes[record_id] = {
        "id": record_id,
        "kind": "session",
        "level": -1,
        "entryIds": [],
        "text": session.name,
        "ready": True,
        "completed": all(n["completed"] for n in nodes.values()),
        "from": earliest,
        "to": "" if untimed else latest,
        "parents": [],
        "children": ordered_roots,
    }
    for node in nodes.values():
        for child in node["children"]:
            nodes[child]["parents"].append(node["id"])
    return {
        "id": record_id,
        "sessionId": session.session_id,
        "name": session.name,
        "nodes": list(nodes.values()),
    }
