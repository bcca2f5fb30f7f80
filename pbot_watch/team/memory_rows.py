"""A raw-memory source as the team index's row: pure (a source, its text and labels in, a row out).

What leaves the machine is decided here, as ``rows.py`` decides it for records: a source whose
text or label still holds a secret (the redaction gate says so, or fails) is not a row at all;
the caller counts it as held back. The text is stored as records' texts are (``pg_text``: no
NUL, lone surrogates as U+FFFD with the exact text as JSON beside it), ``text_lower`` is
Python's ``str.lower`` of it, the string local memory search tests a needle against, so the
team's ``LIKE`` finds what local literal memory search finds. ``terms`` is the same kind of
``tsvector`` literal as a record node's, of the first ``TERMS_CHARS`` characters.

The hash covers everything stored but the context label: a source does not change when a
later compaction makes it historical, only its label does, which a push updates alone.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pbot_watch.memory.query import BranchSource
from pbot_watch.team.rows import TERMS_CHARS, Gate, Labels, pg_text, terms_vector


@dataclass(frozen=True)
class MemoryRow:
    session_id: str
    entry_id: str
    part: int
    kind: str
    timestamp: str
    label: str
    sections: str
    line_count: int
    context: str
    capped: bool
    text: str
    text_json: str | None
    text_lower: str
    terms: str
    hash: str

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.session_id, self.entry_id, self.part)


def memory_row(source: BranchSource, text: str, holds_secret: Gate) -> MemoryRow | None:
    """The row of ``source`` (whose whole text is ``text``), or ``None`` when the gate holds it back."""
    if holds_secret(source.label) or holds_secret(text):
        return None
    stored, text_json = pg_text(text)
    values: dict[str, Any] = {
        "session_id": pg_text(source.session_id)[0],
        "entry_id": pg_text(source.entry_id)[0],
        "part": source.part,
        "kind": source.kind,
        "timestamp": pg_text(source.timestamp)[0],
        "label": pg_text(source.label)[0],
        "sections": json.dumps([list(section) for section in source.sections]),
        "line_count": source.line_count,
        "capped": len(stored) > TERMS_CHARS,
        "text": stored,
        "text_json": text_json,
        "text_lower": stored.lower(),
        "terms": terms_vector([(stored, "B")]),
    }
    digest = hashlib.sha256(repr(tuple(values.values())).encode("utf-8", "surrogatepass")).hexdigest()
    return MemoryRow(**values, context=source.context, hash=digest)


def row_values(row: MemoryRow, labels: Labels, pushed_by: str) -> tuple[object, ...]:
    """The row as ``MEMORY_COLUMNS`` (``memory_push.py``) list them."""
    return (
        labels.machine,
        row.session_id,
        row.entry_id,
        row.part,
        labels.user,
        labels.workspace,
        row.kind,
        row.timestamp,
        row.label,
        row.sections,
        row.line_count,
        row.context,
        row.capped,
        row.text,
        row.text_json,
        row.text_lower,
        row.terms,
        row.hash,
        pushed_by,
    )
