"""The JSON shapes of memory search, recall and memory cues: one pydantic model each.

They follow the rules of ``search.models`` (whose ``JsonShape`` they share): the CLI's
``--json``, the tools and the Pi child emit exactly these (``model_dump(by_alias=True)``);
``docs/search.md`` and ``docs/pi.md`` document them and tests keep the docs current.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pbot_watch.search.models import JsonShape, MatchMode

MemoryContext = Literal["historical", "retained"]
CueStage = Literal["full", "brief"]
CueClass = Literal["refetchable", "state", "failure"]

MemoryKind = Literal[
    "user", "assistant", "thinking", "tool", "bash", "custom", "compaction", "branch_summary"
]


class MemorySection(JsonShape):
    """A titled run of lines inside a memory source (e.g. a tool call, its result)."""

    title: str
    first_line: int
    last_line: int


class MemoryHit(JsonShape):
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
    machine: str | None = Field(
        default=None, description="the machine the source came from (team search); else null"
    )
    user: str | None = Field(
        default=None, description="the user whose session it is (team search); else null"
    )
    workspace: str | None = Field(default=None, description="the workspace's name (team search); else null")


class MemorySearchResult(JsonShape):
    query: str
    match: MatchMode
    hits: list[MemoryHit]
    total: int
    next_cursor: str | None = Field(description="pass as --after with the same query to continue")
    scope: list[str] = Field(description="session ids searched, each along one leaf-to-root path")
    sessions_not_searched: int = Field(
        default=0,
        description="session files not searched as they are now: the running service is still "
        "building their raw memory, or (a pinned search in Pi) the Pi child is building its big session's "
        "ahead; 0 once caught up",
    )


class RecallPage(JsonShape):
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


class CueLine(JsonShape):
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


class CueState(JsonShape):
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
