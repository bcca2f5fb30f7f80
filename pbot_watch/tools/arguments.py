"""Each query's parameters, declared once: the tools' argument models.

A model here is the one declaration of what a query takes: names, types, defaults, limits,
choices and the sentence that explains each. Everything else is derived from it:

* the JSON Schema that MCP lists and the Pi extension registers (``Tool.input_schema``);
* validation of a model's arguments, and the message that names each bad one;
* the command line's options of ``search``, ``read``, ``memory search`` and ``recall``
  (``pbot_watch.cli.options.query_options``), with ``Cli`` saying how a person spells an
  argument where its published name does not fit a flag;
* the page sizes the Pi extension asks for (``pbot-watch.json``, written by ``pi install``).

The numbers come from ``pbot_watch.search.pages``, which the query functions check too.

Why a pydantic model per tool and not a Python signature: pbot and pi-echo name parameters
``from`` and ``in`` (Python keywords), the schemas must forbid unknown keys, and a model that
passes a bad argument needs to be told in one sentence what to change.

This module imports pydantic and nothing of search or SQLite: the command line builds its
options from it at start-up. The models are deferred (``defer_build``): the options need only
the fields, and a command builds the validator of the one model it validates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from pbot_watch.search.models import MatchMode
from pbot_watch.search.pages import (
    CHILDREN_PAGE,
    DEFAULT_READ_LIMIT,
    DEFAULT_SEARCH_LIMIT,
    MAX_MEMORY_PAGE,
    MAX_READ_LIMIT,
    MAX_SEARCH_LIMIT,
    MEMORY_PAGE,
)


class ToolArguments(BaseModel):
    """Tool arguments: unknown keys are errors (a misspelt ``qurey`` must not silently list sessions).

    Fields are snake_case in Python and camelCase for the model (``session_id`` is ``sessionId``),
    as pbot and pi-echo name them; ``from`` and ``in`` are Python keywords and carry their alias.
    Only those published names are accepted: ``session_id`` or ``from_`` is an unknown argument,
    as the schema (``additionalProperties: false``) says.
    """

    # Deferred: a command validates one model; building the others' validators is start-up it waits for.
    model_config = ConfigDict(alias_generator=to_camel, extra="forbid", defer_build=True)


@dataclass(frozen=True)
class Cli:
    """How the command line spells one argument, where the default does not fit.

    The default is an option named after the published argument (``childrenOffset`` is
    ``--children-offset``), explained by the field's description, with its default, limits and
    choices; an argument without a default is a positional argument.
    """

    flag: str | None = None
    """The option's name, when not the argument's (``sessionId`` is ``--session``, as Pi says)."""
    metavar: str | None = None
    positional: bool = False
    """A positional argument even with a default (the query)."""
    omitted: bool = False
    """Not an option: the command says it another way (``scope`` is ``--team``)."""
    old_flags: tuple[str, ...] = ()
    """Earlier names still accepted for one release, shown nowhere (``HiddenAliasOption``)."""


Scope = Literal["local", "team"]
"""Which history a history tool asks: this machine's, or the team's shared index."""
TEAM_SCOPE = Cli(omitted=True)


class HistorySearchArgs(ToolArguments):
    """``history_search`` and ``pbot-watch search``: personal-bot 0.2.3's search parameters."""

    query: Annotated[str | None, Cli(positional=True)] = Field(
        None,
        description="Text to find, case-insensitively, as one continuous piece (literal) or as words "
        "(terms). Omit to list sessions, newest first.",
    )
    match: MatchMode = Field(
        "literal",
        description="literal (default): the query must appear as is; terms: rank by the query's words "
        "(BM25), for when you remember some words but not the phrase.",
    )
    session_id: Annotated[str | None, Cli(flag="--session", metavar="ID")] = Field(
        None, description="Only this Pi session id."
    )
    workspace: Annotated[str | None, Cli(metavar="DIR")] = Field(
        None, description="Only sessions of this workspace (the absolute project folder Pi ran in)."
    )
    from_: Annotated[str | None, Cli(metavar="ISO")] = Field(
        None,
        alias="from",
        description="Lower bound, ISO date or time (e.g. 2026-11-29 or 2026-11-29T14:30:00Z): nodes that "
        "end at or after it.",
    )
    to: Annotated[str | None, Cli(metavar="ISO")] = Field(
        None, description="Upper bound, ISO date or time: nodes that start at or before it."
    )
    offset: int = Field(0, ge=0, description="Skip this many matches: pass the previous result's nextOffset.")
    limit: int = Field(
        DEFAULT_SEARCH_LIMIT,
        ge=1,
        le=MAX_SEARCH_LIMIT,
        description=f"Matches per page, 1-{MAX_SEARCH_LIMIT} (default {DEFAULT_SEARCH_LIMIT}).",
    )
    scope: Annotated[Scope, TEAM_SCOPE] = Field(
        "local",
        description="local (default): this machine's history; team: the team's shared index, each match "
        "labelled with the machine, user and workspace it came from (when the team index is set up).",
    )


class HistoryReadArgs(ToolArguments):
    """``history_read`` and ``pbot-watch read``: personal-bot 0.2.3's read parameters."""

    id: Annotated[str, Cli(metavar="NODE_ID")] = Field(
        description="Node id from history_search (matches[].id) or from another read's parents/children."
    )
    offset: int = Field(
        0, ge=0, description="Text offset in UTF-16 units: pass the previous result's nextOffset."
    )
    # On the command line this is --length: there --limit counts matches or hits (search, memory search).
    limit: Annotated[int, Cli(flag="--length", old_flags=("--limit",))] = Field(
        DEFAULT_READ_LIMIT,
        ge=1,
        le=MAX_READ_LIMIT,
        description=f"Text length in UTF-16 units, 1-{MAX_READ_LIMIT} (default {DEFAULT_READ_LIMIT}).",
    )
    children_offset: int = Field(
        0,
        ge=0,
        description=f"First child to list ({CHILDREN_PAGE} per page): pass the previous result's "
        "nextChildrenOffset.",
    )
    scope: Annotated[Scope, TEAM_SCOPE] = Field(
        "local", description="local (default): this machine's history; team: a node from a team search."
    )


class SearchMemoryArgs(ToolArguments):
    """``search_memory`` and ``pbot-watch memory search``: pi-echo's search parameters."""

    query: Annotated[str | None, Cli(positional=True)] = Field(
        None,
        description="Text to find. literal: case-insensitive substring of one line, characters such as "
        ".* match themselves; terms: words ranked by BM25. Omit (and omit in) to list sources, newest first.",
    )
    match: MatchMode = Field(
        "literal",
        description="literal (default): case-insensitive substring of one line; terms: words ranked by BM25.",
    )
    in_: Annotated[str | None, Cli(metavar="HANDLE")] = Field(
        None,
        alias="in",
        description="A handle from an earlier result: search only inside that source; every hit line is returned.",
    )
    session_id: Annotated[str | None, Cli(flag="--session", metavar="ID")] = Field(
        None, description="Only this Pi session id."
    )
    leaf: Annotated[str | None, Cli(metavar="ENTRY")] = Field(
        None,
        description="An entry id: search the branch from this entry to the root instead of each session's "
        "current branch (with the session id when ids repeat across sessions).",
    )
    after: Annotated[str | None, Cli(metavar="CURSOR")] = Field(
        None,
        description="The previous result's nextCursor, to get the next page; keep the query and the "
        "other arguments unchanged.",
    )
    limit: int = Field(
        MEMORY_PAGE,
        ge=1,
        le=MAX_MEMORY_PAGE,
        description=f"Hits per page, 1-{MAX_MEMORY_PAGE} (default {MEMORY_PAGE}).",
    )
    scope: Annotated[Scope, TEAM_SCOPE] = Field(
        "local",
        description="local (default): this machine's raw memory; team: the team's shared index (raw memory "
        "its members push), each hit labelled with the machine, user and workspace it came from; "
        "in and leaf are local only.",
    )


class RecallMemoryArgs(ToolArguments):
    """``recall_memory`` and ``pbot-watch recall``: pi-echo's recall parameters."""

    handle: str = Field(
        description="A handle from search_memory (hits[].handle) or from a memory cue line (#id)."
    )
    from_: Annotated[int, Cli(metavar="LINE")] = Field(
        1,
        alias="from",
        ge=1,
        description="First line to return (1-based; default 1): pass the previous nextLine.",
    )
    scope: Annotated[Scope, TEAM_SCOPE] = Field(
        "local", description="local (default): this machine's raw memory; team: a handle from a team search."
    )
