"""What an existing archive still holds: ``pbot-watch secrets scan`` and ``scrub``.

An archive written before redaction (or with it off, or by personal-bot) keeps secrets in
three places: the record files, the history index built from them and the raw-memory index
built from the session files. Each index lists the texts it holds (``HeldText``), so this
module knows no table and no codec. The scan reads each as it is, without refreshing anything, and
reports per place which rules matched and how often, with the session and node or entry ids
(never a value). The scrub rewrites each record that holds one, node ids, tree and summaries
kept, only the texts redacted (a summary made from such a text is redacted like any text), and
removes a search index that holds one: it is derived data, rebuilt by the next query from
redacted texts, and a removed file leaves no copy of the old text in a ``-wal`` file or in
free pages, as deleting rows would.
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class HeldText:
    """A text a store holds, named as a leak in it would be: each store lists its own
    (``search.index.held_history_texts``, ``memory.index.held_memory_texts``), so the audit
    knows no table and no codec.
    """

    place: str
    path: str
    session_id: str
    item_id: str
    texts: tuple[str, ...]
    """What is scanned together: a name, a text, or a source's label and text."""


def held_leaks(held: Iterable[HeldText]) -> Iterator[Leak]:
    """The held texts in which a rule matches, with the kinds summed over each one's texts."""
    for item in held:
        counts: Counter[str] = Counter()
        for text in item.texts:
            counts.update(kinds_in(text))
        if counts:
            yield Leak(item.place, item.path, item.session_id, item.item_id, dict(sorted(counts.items())))


def total(leaks: Iterable[Leak]) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for leak in leaks:
        counts.update(leak.kinds)
    return dict(sorted(counts.items()))
