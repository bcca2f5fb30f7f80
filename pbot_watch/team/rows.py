"""A record as the team index's rows: pure (a record and labels in, rows out, no I/O).

What leaves the machine is decided here, so it can be tested without a server: a node whose text
still holds a secret (the redaction gate says so) is left out and counted, a record whose name
holds one is left out whole. Each row carries a hash of exactly what it holds, so a push can
tell an unchanged record (or node) from a changed one without reading its text back.

Texts are stored as local search stores them (``search/index.py``): well formed (a lone
surrogate becomes U+FFFD, with the exact text as JSON beside it) and, for PostgreSQL, without
NUL characters, which a ``text`` value cannot hold. ``text_lower`` is Python's ``str.lower``
of that text, the very string local literal search tests the needle against, so the team's
``LIKE`` and local search agree on every character (PostgreSQL's own ``lower`` follows the
server's locale). ``terms`` is a ``tsvector`` literal of the ranking terms of ``terms.py``,
given to the server as data, so no server text-search configuration can change it.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pbot_watch.archive.locations import exclusion
from pbot_watch.history.jstext import dumps_utf8, to_well_formed
from pbot_watch.pi.untrusted import has_lone_surrogate
from pbot_watch.search.dates import parse_ms
from pbot_watch.search.terms import exchange_sides, terms

TERMS_CHARS = 1 << 16
"""Characters of one text the ``terms`` vector sees (a ``tsvector`` holds at most 1 MB);
literal search of a longer text reads the whole of it (``capped``)."""
MAX_POSITIONS = 256  # PostgreSQL keeps at most 256 positions per lexeme
MAX_POSITION = 16383
MAX_LEXEME_BYTES = 2046

Gate = Callable[[str], bool]
"""``holds_secret(text)``: true when the text still matches a secret rule (it must not leave)."""


@dataclass(frozen=True)
class NodeRow:
    id: str
    seq: int
    kind: str
    level: int
    from_: str
    to: str
    from_ms: float | None
    to_ms: float | None
    ready: bool
    completed: bool
    searchable: bool
    capped: bool
    entry_ids: str
    children: str
    parents: str
    text: str
    text_json: str | None
    text_lower: str
    terms: str
    hash: str


@dataclass(frozen=True)
class Labels:
    """Who wrote a record and for which workspace: names only, never a path."""

    machine: str
    user: str
    workspace: str


@dataclass
class RecordRows:
    record_id: str
    session_id: str
    name: str
    name_json: str | None
    labels: Labels
    content_hash: str
    nodes: list[NodeRow] = field(default_factory=list)
    held: int = 0
    """Texts left out because the gate found a secret in them."""


def pg_text(text: str) -> tuple[str, str | None]:
    """Text PostgreSQL can hold (no NUL, no lone surrogate), and the exact text as JSON when they differ."""
    if "\x00" not in text and not has_lone_surrogate(text):
        return text, None
    return to_well_formed(text).replace("\x00", "\ufffd"), json.dumps(text)


def content_hash(record: dict[str, Any]) -> str:
    """The hash of a record's content as written (its JSON, keys in their order)."""
    return hashlib.sha256(dumps_utf8(record)).hexdigest()


@functools.lru_cache(maxsize=200_000)
def _lexeme(term: str) -> str | None:
    if not term or len(term.encode()) > MAX_LEXEME_BYTES:
        return None
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def terms_vector(parts: list[tuple[str, str]]) -> str:
    """A ``tsvector`` literal of the ranking terms of ``(text, weight)`` parts, with positions.

    Built for every node pushed, so written for speed: positions gathered per term, each term's
    list joined once (this is most of a push's CPU time).
    """
    positions: dict[str, list[str]] = {}
    weights: dict[str, str] = {}
    position = 0
    for text, weight in parts:
        for term in terms(text[:TERMS_CHARS]):
            position = min(position + 1, MAX_POSITION)
            listed = positions.get(term)
            if listed is None:
                positions[term] = listed = []
                weights[term] = weight
            if len(listed) < MAX_POSITIONS:
                # A term of both parts keeps the weight of the first (its position lists one weight).
                listed.append(str(position))
    out = []
    for term, listed in positions.items():
        lexeme = _lexeme(term)
        if lexeme is not None:
            weight = weights[term]
            out.append(f"{lexeme}:{(weight + ',').join(listed)}{weight}")
    return " ".join(out)


def tsquery_of(query_terms: list[str]) -> str:
    """A ``tsquery`` literal matching any of these terms (as the local ``terms`` search does)."""
    lexemes = [lexeme for lexeme in map(_lexeme, query_terms) if lexeme is not None]
    return " | ".join(lexemes)


def _strs(value: Any) -> list[str]:
    return [to_well_formed(v) for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def node_row(raw: Any, seq: int) -> NodeRow | None:
    """A record node as a row (``None`` for a node without id), by local search's rules."""
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
        return None
    kind = raw.get("kind") if raw.get("kind") in ("session", "exchange", "summary") else "exchange"
    level = raw.get("level") if isinstance(raw.get("level"), int) else 0
    text, text_json = pg_text(_str(raw.get("text")))
    from_, to = _str(raw.get("from")), _str(raw.get("to"))
    from_ms, to_ms = parse_ms(from_), parse_ms(to)
    ready = raw.get("ready") is True
    if kind == "exchange":
        question, answer = exchange_sides(text[:TERMS_CHARS])
        vector = terms_vector([(question, "A"), (answer, "B")])
    elif kind == "summary":
        vector = terms_vector([(text, "C")])
    else:
        vector = ""
    values = {
        "id": to_well_formed(raw["id"]),
        "seq": seq,
        "kind": kind,
        "level": level,
        "from_": pg_text(from_)[0],
        "to": pg_text(to)[0],
        "from_ms": from_ms,
        "to_ms": to_ms,
        "ready": ready,
        "completed": raw.get("completed") is True,
        # pbot never finds a node whose dates JavaScript cannot parse (NaN compares false).
        "searchable": kind != "session"
        and ready
        and text != ""
        and from_ms is not None
        and to_ms is not None,
        "capped": len(text) > TERMS_CHARS,
        "entry_ids": json.dumps(_strs(raw.get("entryIds"))),
        "children": json.dumps(_strs(raw.get("children"))),
        "parents": json.dumps(_strs(raw.get("parents"))),
        "text": text,
        "text_json": text_json,
        "text_lower": text.lower(),
        "terms": vector,
    }
    digest = hashlib.sha256(repr(tuple(values.values())).encode("utf-8", "surrogatepass")).hexdigest()
    return NodeRow(**values, hash=digest)


def record_rows(record: dict[str, Any], labels: Labels, holds_secret: Gate) -> RecordRows | None:
    """The rows of ``record``, minus what the gate holds back; ``None`` when the whole record is held.

    The hash covers the record and its workspace's name, so a replay of the same content is
    recognised as one, whoever pushes it.
    """
    name = _str(record.get("name"))
    if holds_secret(name):
        return None
    stored_name, name_json = pg_text(name)
    # The record's own provenance fields are part of its content; the labels a pusher supplies
    # for a record without them are not, so two machines pushing one synced record agree.
    digest = hashlib.sha256(dumps_utf8([labels.workspace]) + content_hash(record).encode()).hexdigest()
    rows = RecordRows(
        record_id=to_well_formed(_str(record.get("id"))),
        session_id=to_well_formed(_str(record.get("sessionId"))),
        name=stored_name,
        name_json=name_json,
        labels=labels,
        content_hash=digest,
    )
    seen: set[str] = set()
    for seq, raw in enumerate(record.get("nodes") or []):
        row = node_row(raw, seq)
        if row is None or row.id in seen:
            continue
        seen.add(row.id)
        if row.kind != "session" and holds_secret(row.text):
            rows.held += 1
            continue
        rows.nodes.append(row)
    return rows


def workspace_label(workspace: str | None) -> str:
    """A workspace's name for the team: its folder's last part, never the path."""
    if not workspace:
        return ""
    return Path(workspace.rstrip("/\\")).name or workspace


def allowed(workspace: str | None, globs: Sequence[str]) -> bool:
    """Whether ``team.workspaces`` lets this workspace's records leave (nothing by default)."""
    return bool(workspace) and bool(globs) and exclusion(str(workspace), globs, ()) is None
