"""The JSON shapes of search, read, memory search, recall and memory cues: one pydantic model each.

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
MemoryContext = Literal["historical", "retained"]
CueStage = Literal["full", "brief"]
CueClass = Literal["refetchable", "state", "failure"]


class _Shape(BaseModel):
    # Deferred: a command builds the validators of the shapes it answers with, not of all of them.
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", defer_build=True
    )


class NodeBrief(_Shape):
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


class SearchResult(_Shape):
    """A page of search hits."""

    query: str
    match: MatchMode
    matches: list[SearchMatch]
    total: int = Field(description="all hits, not just this page")
    next_offset: int | None
    warnings: list[str] = Field(default_factory=list)


class NodeSource(_Shape):
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


MemoryKind = Literal[
    "user", "assistant", "thinking", "tool", "bash", "custom", "compaction", "branch_summary"
]


class MemorySection(_Shape):
    """A titled run of lines inside a memory source (e.g. a tool call, its result)."""

    title: str
    first_line: int
    last_line: int


class MemoryHit(_Shape):
    """One memory search result: a source, and where in it the query hit."""

    handle: str = Field(description="opaque; pass to `recall` or `memory search --in`")
    kind: MemoryKind
    session_id: str
    entry_id: str
    timestamp: str
    label: str = Field(description="one line saying what this source is (time, role, tool call)")
    total_lines: int
    line: int | None = Field(description="the line the query hit (1-based); null when listing")
    snippet: str = Field(description="the hit line and its neighbours, whole lines")
    snippet_lines: tuple[int, int] | None = Field(description="first and last line of the snippet")
    section: MemorySection | None = Field(description="the section holding the hit line")
    score: float | None = None
    context: MemoryContext = Field(
        description="historical: left the model's context at the branch's latest compaction; retained: "
        "still in it (or no compaction). About context, not about truth"
    )


class MemorySearchResult(_Shape):
    query: str
    match: MatchMode
    hits: list[MemoryHit]
    total: int
    next_cursor: str | None = Field(description="pass as --after with the same query to continue")
    scope: list[str] = Field(description="session ids searched, each along one leaf-to-root path")


class RecallPage(_Shape):
    """Whole lines of one memory source, from a 1-based line."""

    handle: str
    kind: MemoryKind
    session_id: str
    entry_id: str
    timestamp: str
    label: str
    from_line: int
    to_line: int
    total_lines: int
    text: str
    sections: list[MemorySection]
    next_line: int | None = Field(description="where to continue, or null at the end")


class CueLine(_Shape):
    """One tool event in the cues, as it is shown this batch."""

    handle: str = Field(description="the memory handle of the event's source (recall_memory, search_memory)")
    entry_id: str = Field(description="the entry the source is anchored at (the tool result)")
    timestamp: str
    stage: CueStage = Field(description="full: call, outcome and size; brief: the call and its size only")
    cue_class: CueClass = Field(
        serialization_alias="class", description="how fast it fades: refetchable > state > failure"
    )
    age: int = Field(description="batches since it entered the cues or was last reinforced")
    batch: int = Field(description="the batch (compaction) at which it left the model's context")
    protected: bool = Field(description="reinforced by a recall: delivered in full, spared by pressure")
    count: int = Field(1, description="identical successful events of the batch this line stands for (×N)")
    text: str = Field(description="the line as shown in the block")


class CueState(_Shape):
    """The memory cues of one branch after its latest compaction."""

    session_id: str
    leaf: str | None = Field(description="the branch's leaf entry (null for an empty session)")
    batch: int = Field(description="compactions on the branch; 0: no cues yet")
    compaction_id: str | None = Field(description="the latest compaction on the branch (the batch's)")
    context_window: int = Field(description="the model's context window, in tokens, the pressure is based on")
    reference_tokens: int = Field(description="pi-echo's reference size: 20 % of the context window")
    max_tokens: int | None = Field(
        None, description="the user's cap on the block ([cues] in config); null: none"
    )
    tokens: int = Field(
        description="tokens of text, by the Anthropic tokenizer litellm ships (else UTF-16 length / 4)"
    )
    pi_tokens: int = Field(0, description="Pi's estimate of text's tokens: UTF-16 length / 4")
    lines: list[CueLine] = Field(description="the lines in the block, oldest event first")
    text: str = Field(description="the block to inject into the model's request; empty when no line")
