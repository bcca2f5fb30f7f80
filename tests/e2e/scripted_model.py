"""The scripted model the real Pi talks to in the end-to-end test: what it answers, and how.

Pi sends OpenAI chat-completions requests (its ``openai-completions`` api, streaming). The
script decides each reply from the request alone, so a test controls the conversation by what
it writes in its prompts:

``[[bash: CMD]]``     the reply calls Pi's ``bash`` tool with ``{"command": CMD}``
``[[read: PATH]]``    the reply calls Pi's ``read`` tool with ``{"path": PATH}``
``[[history: WORDS]]`` the reply calls the archive's search tool over MCP (the declared tool whose
                      name is ``mcp__pbot_watch__<HISTORY_TOOL>``) with ``{"query": WORDS}``
``[[mcp: TOOL {...}]]`` the reply calls ``mcp__pbot_watch__TOOL`` with exactly that JSON object, so
                      a test can also send arguments the server must refuse

After a tool result the reply is a final answer that quotes the start of the result, so the
session shows the tool really ran. Pi's summarisation requests (compaction and branch summaries)
get a short structured summary. Anything else is echoed back. A request that asks for a tool the
request does not declare gets HTTP 400 with a message naming the tool, so a missing MCP
registration fails loudly in Pi's session instead of passing silently.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from tests.support.openai_server import Reply as ServerReply
from tests.support.openai_server import Request
from tests.support.openai_server import ToolCall as ServerToolCall

# The MCP server is registered under this name; Pi turns "-" into "_" in tool names.
MCP_SERVER = "pbot-watch"
MCP_TOOL_PREFIX = "mcp__pbot_watch__"
HISTORY_TOOL = "history_search"
SUMMARY_MARKER = "context summarization assistant"
RESULT_QUOTE_CHARS = 400

_DIRECTIVE = re.compile(r"\[\[(bash|read|history|mcp|tool|recall-cue):\s*(.+?)\]\]", re.DOTALL)
CUE_HEADER = "Memory cues (batch "
_HANDLE = re.compile(r" (#\S+|m1\.\S+)$")
_MCP_CALL = re.compile(r"(\w+)\s+(\{.*\})", re.DOTALL)
_ANY_DIRECTIVE = re.compile(r"\[\[.*?\]\]", re.DOTALL)


class ScriptError(Exception):
    """The request cannot be answered as scripted (HTTP 400 with this message)."""


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    """One scripted assistant turn."""

    text: str | None
    tool_call: ToolCall | None = None
    finish_reason: str = "stop"
    why: str = "echo"  # which rule answered, for the request log


def message_text(content: Any) -> str:
    """Text of an OpenAI message ``content`` (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def declared_tools(body: dict[str, Any]) -> list[str]:
    names = []
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.append(function["name"])
    return names


def decide(body: dict[str, Any]) -> Reply:
    """The reply to one chat-completions request body."""
    messages = body.get("messages") or []
    system = "\n".join(
        message_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer")
    )
    if SUMMARY_MARKER in system:
        return Reply(
            "## Goal\nScripted summary of the conversation so far.\n\n"
            "## Progress\n- Ran the scripted turns.\n\n## Next Steps\n- Continue.",
            why="summary",
        )
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        result = message_text(last.get("content")).strip()
        quoted = " ".join(result.split())[:RESULT_QUOTE_CHARS]
        return Reply(f"Final answer: the tool returned: {quoted}", why="after-tool")
    user = next((message_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    match = _DIRECTIVE.search(user)
    if match is None:
        clean = " ".join(_ANY_DIRECTIVE.sub("", user).split())
        return Reply(f"Echo: {clean}")
    kind, argument = match[1], match[2].strip()
    if kind == "bash":
        call = ToolCall("bash", {"command": argument})
    elif kind == "read":
        call = ToolCall("read", {"path": argument})
    elif kind == "history":
        call = _mcp_call(body, HISTORY_TOOL, {"query": argument})
    elif kind == "recall-cue":
        call = _declared_call(body, "recall_memory", {"handle": cue_handle(messages, argument)})
    else:
        parts = _MCP_CALL.fullmatch(argument)
        if parts is None:
            raise ScriptError(f"[[{kind}: ...]] wants 'TOOL {{json object}}', got {argument!r}")
        try:
            arguments = json.loads(parts[2])
        except ValueError as error:
            raise ScriptError(f"[[{kind}: ...]] arguments are not JSON: {error}") from error
        call = (
            _mcp_call(body, parts[1], arguments)
            if kind == "mcp"
            else _declared_call(body, parts[1], arguments)
        )
    return Reply(f"Calling {call.name}.", tool_call=call, finish_reason="tool_calls", why=kind)


def cue_block(messages: list[dict[str, Any]]) -> str | None:
    """The memory cue block a request carries (the extension's message), if any."""
    for message in messages:
        text = message_text(message.get("content"))
        if message.get("role") == "user" and text.startswith(CUE_HEADER):
            return text
    return None


def cue_handle(messages: list[dict[str, Any]], words: str) -> str:
    block = cue_block(messages)
    if block is None:
        raise ScriptError("[[recall-cue: ...]] but the request carries no memory cue block")
    for line in block.splitlines():
        found = _HANDLE.search(line)
        if words in line and found:
            return found[1]
    raise ScriptError(f"no cue line holds {words!r}:\n{block}")


def _mcp_call(body: dict[str, Any], tool: str, arguments: dict[str, Any]) -> ToolCall:
    return _declared_call(body, MCP_TOOL_PREFIX + tool, arguments)


def _declared_call(body: dict[str, Any], name: str, arguments: dict[str, Any]) -> ToolCall:
    declared = declared_tools(body)
    if name not in declared:
        raise ScriptError(f"tool {name} is not declared to the model; declared: {', '.join(declared)}")
    return ToolCall(name, arguments)


def handler(request: Request) -> ServerReply:
    """``OpenAIServer(handler=...)``: the scripted reply in the shared test server's terms."""
    try:
        reply = decide(request.body)
    except ScriptError as error:
        return ServerReply.bad_request(str(error))
    if reply.tool_call is not None:
        call = ServerToolCall(reply.tool_call.name, reply.tool_call.arguments, id=f"call_e2e_{request.index}")
        return ServerReply.tools(call, text=reply.text)
    return ServerReply.answer(reply.text or "", finish_reason=reply.finish_reason)


def why(request: Request) -> str:
    """Which rule answered a logged request (``decide`` is pure, so asking again gives the same answer)."""
    try:
        return decide(request.body).why
    except ScriptError as error:
        return f"error: {error}"
