"""What the archive must hold, worked out from Pi's own account of the session (RPC ``get_entries``).

This is deliberately not the project's exchange code run a second time: it is the plain reading
of a conversation the test scripted itself, where every turn ends in a normal answer. For each
tip of the entry tree (an entry no other entry names as parent), walk to the root; user messages
collect, and an assistant message that stopped with ``stop`` without calling a tool closes the
exchange as (user message ids..., answer id). ``assert_simple`` checks that the session really
is that simple (no cut, aborted or failed answers), so the reading stays valid.
"""

from __future__ import annotations

from typing import Any

Exchange = tuple[str, ...]


def role(entry: dict[str, Any]) -> str | None:
    if entry.get("type") != "message":
        return None
    return (entry.get("message") or {}).get("role")


def _is_final_answer(entry: dict[str, Any]) -> bool:
    message = entry.get("message") or {}
    calls_tool = any(
        block.get("type") == "toolCall" for block in message.get("content") or [] if isinstance(block, dict)
    )
    return message.get("stopReason") == "stop" and not calls_tool


def assert_simple(entries: list[dict[str, Any]]) -> None:
    """Every assistant turn either calls a tool or answers normally; ids are unique."""
    stops = {(e.get("message") or {}).get("stopReason") for e in entries if role(e) == "assistant"}
    assert stops <= {"stop", "toolUse"}, f"the scripted session has unexpected stop reasons: {stops}"
    ids = [e["id"] for e in entries]
    assert len(ids) == len(set(ids)), "Pi reported duplicate entry ids"


def branch_exchanges(entries: list[dict[str, Any]]) -> list[list[Exchange]]:
    """The exchanges of every branch (tips in append order), empty branches left out."""
    by_id = {e["id"]: e for e in entries}
    parents = {e.get("parentId") for e in entries}
    out: list[list[Exchange]] = []
    for tip in (e for e in entries if e["id"] not in parents):
        path: list[dict[str, Any]] = []
        current: dict[str, Any] | None = tip
        while current is not None:
            path.append(current)
            current = by_id.get(current.get("parentId")) if current.get("parentId") else None
        exchanges: list[Exchange] = []
        users: list[str] = []
        for entry in reversed(path):
            kind = role(entry)
            if kind == "user":
                users.append(entry["id"])
            elif kind == "assistant" and users and _is_final_answer(entry):
                exchanges.append((*users, entry["id"]))
                users = []
        if users:
            exchanges.append(tuple(users))
        if exchanges:
            out.append(exchanges)
    return out


def record_exchanges(record: dict[str, Any]) -> set[Exchange]:
    """The (user ids..., answer id) of every exchange node of an archive record."""
    return {tuple(node["entryIds"]) for node in record["nodes"] if node["kind"] == "exchange"}
