"""The archive contract: the record file personal-bot 0.2.3 reads and writes.

Both tools write ``<workspace>/.pi/pbot/history/<recordId>.json``. Unknown fields are kept
(``extra="allow"``): pbot-watch marks summaries with who wrote them, pbot ignores that, and a
record from a newer tool must survive a round trip through an older one.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class HistoryNode(BaseModel):
    """One node: an exchange (level 0), a summary of four nodes (level >= 1) or the session (level -1)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    id: str = Field(description="`${recordId}:${level}:${lastEntryId}`, or the record id for the session node")
    kind: Literal["session", "exchange", "summary"]
    level: int = Field(description="-1 session, 0 exchange, 1.. summary levels")
    entryIds: list[str] = Field(  # noqa: N815 - contract field name
        description="exchange: its user messages then the answer; summary: first and last entry covered"
    )
    text: str = Field(description="exchange text, summary text (empty until ready), or the session name")
    from_: str = Field(alias="from", description="ISO timestamp of the first entry covered")
    to: str = Field(description="ISO timestamp of the last entry covered")
    completed: bool = Field(description="false when an exchange (or any below a summary) has no final answer")
    children: list[str]
    parents: list[str]
    ready: bool = Field(description="false for a summary not written yet")


class HistoryRecord(BaseModel):
    """One native Pi session's history. No file paths are stored."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(description="record id; kept for the life of the session")
    sessionId: str = Field(description="the Pi session id from the session header")  # noqa: N815
    name: str = Field(description="latest session_info name, else the first exchange's text cut to 80 units")
    nodes: list[HistoryNode]


def record_json_schema() -> dict[str, Any]:
    schema = HistoryRecord.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "pbot history record"
    return schema
