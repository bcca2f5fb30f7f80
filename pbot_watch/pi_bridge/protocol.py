"""The two formats shared with the Pi extension: its config file, and the JSON lines it exchanges.

Both are read by TypeScript that cannot import these models, so they are kept small and flat,
and ``docs/pi.md`` documents them. The extension trusts nothing it receives: a reply it cannot
read counts as "temporarily unavailable", never as "no match".

The protocol is one JSON object per line over the child's stdin and stdout (a newline only;
replies escape every non-ASCII character, so no line separator can hide inside a string)::

    -> {"id": 7, "method": "tool", "params": {"name": "search_memory", "arguments": {...}, "scope": {...}}}
    <- {"id": 7, "result": {"text": "...", "structured": {...}}}
    <- {"id": 7, "error": {"kind": "arguments", "message": "..."}}

Replies can come out of order: ``footer`` is answered at once while a query runs.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

CONFIG_FORMAT: Literal[1] = 1

ErrorKind = Literal["arguments", "unavailable", "protocol"]
"""``arguments``: the caller must change what it sent (the model reads "fix the arguments");
``unavailable``: pbot-watch could not answer now (index busy, file unreadable, a bug), try
later; ``protocol``: the extension sent something this child does not understand."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# ---- the config file beside the installed extension ---------------------------------------------


class ToolDefinition(_Strict):
    """One native tool, as the extension registers it with ``pi.registerTool``."""

    name: str
    label: str
    description: str
    parameters: dict[str, Any] = Field(description="JSON Schema of the arguments (Pi validates with it)")


class Timeouts(_Strict):
    """How long the extension waits for the child before it answers "temporarily unavailable"."""

    toolMs: int = 30_000  # noqa: N815 - read by TypeScript
    cuesMs: int = 10_000  # noqa: N815
    cueWaitMs: int = 2_000  # noqa: N815
    """How long a model request may wait for cues still being computed (then it goes without)."""
    statusMs: int = 2_000  # noqa: N815
    footerEveryMs: int = 5_000  # noqa: N815


class Pages(_Strict):
    """The page sizes ``/history`` asks the tools for: their own defaults, so the extension holds no number.

    Written from the tools' argument models (``pbot_watch.tools.arguments``), where the limits
    and defaults of every query are declared.
    """

    historySearch: int = Field(description="history_search's limit: matches per page")  # noqa: N815
    historyRead: int = Field(description="history_read's limit: UTF-16 units of text per page")  # noqa: N815


class BridgeConfig(_Strict):
    """``pbot-watch.json`` beside the installed ``extension.ts``: written by ``pbot-watch pi install``.

    It lets the extension register its tools synchronously when Pi loads it (no process is
    started from the extension's factory), and start exactly the pbot-watch that installed it.
    """

    format: Literal[1] = CONFIG_FORMAT
    version: str = Field(description="the pbot-watch version that wrote this file")
    command: list[str] = Field(description="absolute argv of `pbot-watch pi serve ...`")
    tools: list[ToolDefinition]
    pages: Pages
    timeouts: Timeouts = Field(default_factory=Timeouts)


# ---- requests and replies -----------------------------------------------------------------------


class Request(_Strict):
    id: int | str
    method: str
    params: dict[str, Any] = Field(default_factory=dict)


class ErrorBody(_Strict):
    kind: ErrorKind
    message: str


class Scope(_Strict):
    """The calling Pi session's branch: memory tools see only this path, whatever the arguments say."""

    sessionFile: str | None = None  # noqa: N815
    sessionId: str | None = None  # noqa: N815
    leaf: str | None = None


class ToolParams(_Strict):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    scope: Scope | None = None


class ToolReply(_Strict):
    """A tool's answer; a failure is an answer too, with text that tells the model what to do."""

    text: str = Field(description="what the model reads")
    structured: dict[str, Any] | None = Field(
        None, description="the JSON result (the CLI's --json); null on failure"
    )
    failure: Literal["arguments", "unavailable", "internal"] | None = Field(
        None, description="null on success; else whose the failure is (the text says it to the model)"
    )


class Hello(_Strict):
    version: str
    pid: int
    statusFile: str  # noqa: N815


class CuesParams(_Strict):
    sessionFile: str  # noqa: N815
    leaf: str | None = None
    contextWindow: int | None = Field(None, ge=1)  # noqa: N815


class CuesReply(_Strict):
    block: str | None = Field(description="the text to inject into each request, or null for none")
    batch: int = Field(0, description="compactions on the branch (0: no cues yet)")
    compactionId: str | None = Field(None, description="the latest compaction on the branch")  # noqa: N815


class SessionParams(_Strict):
    """Pi's announcement of the session it works in (at its start): the child prepares it ahead."""

    sessionFile: str | None = None  # noqa: N815
    sessionId: str | None = None  # noqa: N815


class SessionReply(_Strict):
    cues: bool = Field(description="its cue ledger is read ahead (cues are on)")
    memory: bool = Field(description="its raw memory is built ahead")


class FooterParams(_Strict):
    installed: str | None = Field(None, description="the version in the extension's pbot-watch.json")


class FooterReply(_Strict):
    text: str | None = Field(description="the footer status, or null when there is nothing to say")


class NoParams(_Strict):
    pass


def reply_line(
    request_id: int | str | None, result: BaseModel | None = None, error: ErrorBody | None = None
) -> bytes:
    """One protocol line: ASCII only, so a newline is the only line break a reader can meet."""
    body: dict[str, Any] = {"id": request_id}
    if error is not None:
        body["error"] = error.model_dump()
    else:
        body["result"] = None if result is None else result.model_dump(mode="json", by_alias=True)
    return json.dumps(body, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"
