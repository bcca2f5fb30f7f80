"""The JSON shapes of search and read: one pydantic model each (memory's are ``memory.models``).

The CLI's ``--json`` and the MCP tools emit exactly these (``model_dump(by_alias=True)``);
``docs/search.md`` documents them and a test keeps the published JSON Schema current. Field
names follow personal-bot's ``search``/``read`` results (camelCase, ``from``/``to``) so a tool
written for pbot reads ours; the extra fields (``level``, ``workspace``, ``exchanges``,
``score``, ``match``) are additions, never renames. In Python the fields are snake_case; the
alias generator gives each its camelCase JSON name.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

NodeKind = Literal["session", "exchange", "summary"]
MatchMode = Literal["literal", "terms"]


class JsonShape(BaseModel):
    """Every shape's JSON: camelCase names, unknown fields refused (memory's models share it)."""

    # Deferred: a command builds the validators of the shapes it answers with, not of all of them.
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", defer_build=True
    )


class NodeBrief(JsonShape):
    """A node as it appears in lists: pbot's ``brief()`` plus its level and workspace."""

    id: str
    kind: NodeKind
    level: int = Field(description="-1 session, 0 exchange, 1.. summary level")
    session_id: str
    name: str = Field(description="the session's name")
    preview: str = Field(description="first 100 UTF-16 units of the text, whitespace runs collapsed")
    from_: str = Field(alias="from")
    to: str
    ready: bool
    completed: bool
    workspace: str | None = Field(None, description="the workspace the record belongs to, when known")
    machine: str | None = Field(None, description="the machine that wrote the record, when it says")
    user: str | None = Field(None, description="the user who wrote the record, when it says")


class SearchMatch(NodeBrief):
    """One search hit."""

    snippet: str = Field(description="400 UTF-16 units of the text, starting 80 before the hit")
    parents: list[str]
    children: list[str] = Field(description="direct children (a summary's four nodes; a session's tops)")
    exchanges: list[str] = Field(
        description="for a summary: every exchange it covers, in order; for an exchange: itself; else empty"
    )
    score: float | None = Field(
        None,
        description="terms: relevance, BM25 (the best hit 1.0) plus the ranking rules; higher is better; literal: null",
    )


class SearchResult(JsonShape):
    """A page of search hits."""

    query: str
    match: MatchMode
    matches: list[SearchMatch]
    total: int = Field(description="all hits, not just this page")
    next_offset: int | None
    warnings: list[str] = Field(default_factory=list)


class NodeSource(JsonShape):
    """Where a node came from: the Pi session and its entries (never a file path)."""

    session_id: str
    entry_ids: list[str]


class NodePage(NodeBrief):
    """pbot's ``read()``: a page of a node's text, its parents and a page of its children."""

    text: str
    total_length: int = Field(description="length of the whole text in UTF-16 units")
    next_offset: int | None = Field(description="offset to continue reading the text, or null")
    parents: list[NodeBrief]
    children: list[NodeBrief]
    next_children_offset: int | None
    source: NodeSource
    warnings: list[str] = Field(default_factory=list)
