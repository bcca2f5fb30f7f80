"""The archive contract: the record file personal-bot 0.2.3 reads and writes.

Both tools write ``<workspace>/.pi/pbot/history/<recordId>.json``; its keys are camelCase (the
models' fields are snake_case, named by the alias generator). Unknown fields are kept
(``extra="allow"``): pbot-watch marks summaries with who wrote them, pbot ignores that, and a
record from a newer tool must survive a round trip through an older one.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidatorFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

# pbot builds nodes from object literals, so its key order is part of what it compares
# (``JSON.stringify(before) !== JSON.stringify(value)``): a record that passes through our
# models must come out in the order it went in, or pbot would rewrite it for nothing.
EXCHANGE_ORDER = (
    "entryIds",
    "from",
    "to",
    "completed",
    "text",
    "id",
    "kind",
    "level",
    "children",
    "parents",
    "ready",
)
SUMMARY_ORDER = (
    "entryIds",
    "text",
    "from",
    "to",
    "completed",
    "id",
    "kind",
    "level",
    "children",
    "parents",
    "ready",
)
SESSION_ORDER = (
    "id",
    "kind",
    "level",
    "entryIds",
    "text",
    "ready",
    "completed",
    "from",
    "to",
    "parents",
    "children",
)
RECORD_ORDER = ("id", "sessionId", "name", "nodes")


class _Ordered(BaseModel):
    """Serialises its keys in the order they were read (or pbot's order for new objects)."""

    _key_order: tuple[str, ...] | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _remember_order(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        instance = handler(data)
        if isinstance(data, dict) and isinstance(instance, _Ordered):
            instance._key_order = tuple(data)  # noqa: SLF001 - set by the class on its own instance
        return instance

    def _default_order(self) -> tuple[str, ...]:
        return ()

    @classmethod
    def _spellings(cls) -> dict[str, str]:
        """Each field's JSON name to its Python name and back: a key order holds either."""
        pairs = {(field.alias or name, name) for name, field in cls.model_fields.items()}
        return {**dict(pairs), **{name: alias for alias, name in pairs}}

    @model_serializer(mode="wrap")
    def _ordered(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        order = self._key_order or self._default_order()
        spellings = self._spellings()
        ordered: dict[str, Any] = {}
        for key in order:
            for name in (key, spellings.get(key, key)):
                if name in out and name not in ordered:
                    ordered[name] = out[name]
                    break
        for key, value in out.items():
            ordered.setdefault(key, value)
        return ordered


class HistoryNode(_Ordered):
    """One node: an exchange (level 0), a summary of four nodes (level >= 1) or the session (level -1)."""

    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True)

    id: str = Field(
        description="`${recordId}:${level}:${lastEntryId}`, or the record id for the session node"
    )
    kind: Literal["session", "exchange", "summary"]
    level: int = Field(description="-1 session, 0 exchange, 1.. summary levels")
    entry_ids: list[str] = Field(
        description="exchange: its user messages then the answer; summary: first and last entry covered"
    )
    text: str = Field(description="exchange text, summary text (empty until ready), or the session name")
    from_: str = Field(alias="from", description="ISO timestamp of the first entry covered")
    to: str = Field(description="ISO timestamp of the last entry covered")
    completed: bool = Field(description="false when an exchange (or any below a summary) has no final answer")
    children: list[str]
    parents: list[str]
    ready: bool = Field(description="false for a summary not written yet")

    def _default_order(self) -> tuple[str, ...]:
        return {"session": SESSION_ORDER, "summary": SUMMARY_ORDER}.get(self.kind, EXCHANGE_ORDER)


class HistoryRecord(_Ordered):
    """One native Pi session's history. No file paths are stored."""

    model_config = ConfigDict(extra="allow", alias_generator=to_camel)

    id: str = Field(description="record id; kept for the life of the session")
    session_id: str = Field(description="the Pi session id from the session header")
    name: str = Field(description="latest session_info name, else the first exchange's text cut to 80 units")
    nodes: list[HistoryNode]

    def _default_order(self) -> tuple[str, ...]:
        return RECORD_ORDER


def record_json_schema() -> dict[str, Any]:
    """The published JSON Schema (docs/record.schema.json), generated from the models above."""
    schema = HistoryRecord.model_json_schema(by_alias=True)
    # Only records in a central archive carry it; an optional property, not a model field, so
    # that a workspace record read and written back does not gain a ``"workspace": null``.
    schema["properties"]["workspace"] = {
        "description": "central archive only: the session header's cwd (absent in workspace folders)",
        "title": "Workspace",
        "type": "string",
    }
    for key, what in (("machine", "machine label"), ("user", "user label")):
        # Provenance (archive/provenance.py): set when the record is created, then kept.
        schema["properties"][key] = {
            "description": f"the {what} of whoever first wrote the record (a label, never a path); optional",
            "title": key.title(),
            "type": "string",
        }
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "pbot history record"
    return schema
