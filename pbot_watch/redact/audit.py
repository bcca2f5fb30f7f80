"""What an existing archive still holds: ``pbot-watch secrets scan`` and ``scrub``.

An archive written before redaction (or with it off, or by personal-bot) keeps secrets in
three places: the record files, the history index built from them and the raw-memory index
built from the session files. The scan reads each as it is, without refreshing anything, and
reports per place which rules matched and how often, with the session and node or entry ids
(never a value). The scrub rewrites each record that holds one, node ids, tree and summaries
kept, only the texts redacted (a summary made from such a text is redacted like any text), and
removes a search index that holds one: it is derived data, rebuilt by the next query from
redacted texts, and a removed file leaves no copy of the old text in a ``-wal`` file or in
free pages, as deleting rows would.
"""

from __future__ import annotations

import sqlite3
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pbot_watch.redact.core import find_secrets, redact


@dataclass
class Leak:
    """One place that holds secrets: what it is, which session and id, and the kinds found."""

    place: str
    """``record``, ``history index`` or ``memory index``."""
    path: str
    session_id: str
    item_id: str
    """The node id (records, history index), the entry id (memory index); "" for a session name."""
    kinds: dict[str, int] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "place": self.place,
            "path": self.path,
            "session_id": self.session_id,
            "id": self.item_id,
            "kinds": self.kinds,
        }


def kinds_in(text: str) -> dict[str, int]:
    return dict(sorted(Counter(finding.kind for finding in find_secrets(text)).items()))


def record_leaks(path: Path, record: dict[str, Any]) -> Iterator[Leak]:
    session_id = str(record.get("sessionId", ""))
    name = record.get("name")
    if isinstance(name, str) and (kinds := kinds_in(name)):
        yield Leak("record", str(path), session_id, "", kinds)
    for node in record.get("nodes") or []:
        if isinstance(node, dict) and isinstance(node.get("text"), str) and (kinds := kinds_in(node["text"])):
            yield Leak("record", str(path), session_id, str(node.get("id", "")), kinds)


def scrubbed_record(record: dict[str, Any]) -> dict[str, Any]:
    """The record with its name and node texts redacted; every id, link and field else kept."""
    out = dict(record)
    if isinstance(out.get("name"), str):
        out["name"] = redact(out["name"]).text
    nodes = [
        {**node, "text": redact(node["text"]).text}
        if isinstance(node, dict) and isinstance(node.get("text"), str)
        else node
        for node in out.get("nodes") or []
    ]
    if "nodes" in out:
        out["nodes"] = nodes
    return out


def index_leaks(db: Path) -> Iterator[Leak]:
    """What the search index file holds: node texts and names (history), source texts (memory)."""
    from pbot_watch.memory.index import text_codec  # noqa: PLC0415 - only the audit reads packed texts

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if {"records", "nodes", "node_texts"} <= tables:
            for path, session_id, name in conn.execute("SELECT path, session_id, name FROM records"):
                if kinds := kinds_in(name or ""):
                    yield Leak("history index", path, session_id, "", kinds)
            rows = conn.execute(
                "SELECT r.path, r.session_id, n.id, t.text FROM nodes n JOIN node_texts t ON t.rowid = n.rowid "
                "JOIN records r ON r.rowid = n.record"
            )
            for path, session_id, node_id, text in rows:
                if kinds := kinds_in(text or ""):
                    yield Leak("history index", path, session_id, node_id, kinds)
        if {"mem_sources", "mem_texts", "mem_dicts"} <= tables:
            yield from _memory_leaks(conn, text_codec(conn).unpack)
        elif {"mem_sources", "mem_texts"} <= tables:
            yield from _old_memory_leaks(conn)
    finally:
        conn.close()


def _memory_leaks(conn: sqlite3.Connection, unpack: Any) -> Iterator[Leak]:
    rows = conn.execute(
        "SELECT f.path, s.session_id, s.entry_id, s.label, t.data, t.packed FROM mem_sources s "
        "JOIN mem_files f ON f.id = s.file JOIN mem_texts t ON t.rowid = s.text"
    )
    for path, session_id, entry_id, shown, data, packed in rows:
        kinds = dict(Counter(kinds_in(shown or "")) + Counter(kinds_in(unpack(data, packed))))
        if kinds:
            yield Leak("memory index", path, session_id, entry_id, dict(sorted(kinds.items())))
    # The compression dictionary is made of pieces of the texts it was trained on.
    for ident, data in conn.execute("SELECT id, data FROM mem_dicts"):
        if kinds := kinds_in(data.decode("utf-8", "replace")):
            yield Leak("memory index", "", "", f"compression dictionary {ident}", kinds)


def _old_memory_leaks(conn: sqlite3.Connection) -> Iterator[Leak]:
    """Raw memory as schema 6 and before kept it (zlib, a text per source row), which the next
    query or service start rebuilds: until then it is on disk, so it is audited too.
    """
    rows = conn.execute(
        "SELECT s.file, s.session_id, s.entry_id, s.label, t.data, t.packed FROM mem_sources s "
        "JOIN mem_texts t ON t.rowid = s.rowid"
    )
    for path, session_id, entry_id, shown, data, packed in rows:
        text = (zlib.decompress(data) if packed else data).decode("utf-8", "surrogatepass")
        if kinds := dict(Counter(kinds_in(shown or "")) + Counter(kinds_in(text))):
            yield Leak("memory index", str(path), session_id, entry_id, dict(sorted(kinds.items())))


def total(leaks: Iterable[Leak]) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for leak in leaks:
        counts.update(leak.kinds)
    return dict(sorted(counts.items()))
