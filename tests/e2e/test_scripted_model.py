"""The scripted model answers as its directives say, and refuses loudly what it cannot script."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.scripted_model import MCP_TOOL_PREFIX, ScriptError, ToolCall, decide


def request(
    text: str, *, tools: tuple[str, ...] = ("read", "bash"), system: str = "You are pi."
) -> dict[str, Any]:
    return {
        "model": "scripted-model",
        "stream": True,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": text}],
        "tools": [{"type": "function", "function": {"name": name, "parameters": {}}} for name in tools],
    }


class TestDecide:
    def test_plain_prompt_is_echoed_without_directives(self) -> None:
        """A prompt without a tool directive comes back as an echo answer."""
        reply = decide(request("Hello [[nothing]] there"))
        assert ("Echo: Hello there", None, "stop") == (reply.text, reply.tool_call, reply.finish_reason)

    def test_bash_directive_calls_bash(self) -> None:
        """[[bash: CMD]] is a bash tool call that ends the turn with tool_calls."""
        reply = decide(request("Run it [[bash: ls -la]]"))
        assert (ToolCall("bash", {"command": "ls -la"}), "tool_calls") == (
            reply.tool_call,
            reply.finish_reason,
        )

    def test_history_directive_needs_the_declared_mcp_tool(self) -> None:
        """Without pbot-watch's tool declared by Pi, the request is refused with the declared names."""
        with pytest.raises(ScriptError, match="not declared to the model; declared: read, bash"):
            decide(request("[[history: quokka]]"))

    def test_history_directive_searches(self) -> None:
        """With the tool declared, [[history: WORDS]] searches for them."""
        name = MCP_TOOL_PREFIX + "history_search"
        reply = decide(request("Earlier? [[history: quokka]]", tools=("read", name)))
        assert ToolCall(name, {"query": "quokka"}) == reply.tool_call

    def test_mcp_directive_passes_arguments_verbatim(self) -> None:
        """[[mcp: TOOL {json}]] sends exactly that object; bad JSON is refused."""
        name = MCP_TOOL_PREFIX + "history_read"
        reply = decide(request('[[mcp: history_read {"id": "a:0:b", "offset": 5}]]', tools=(name,)))
        assert ToolCall(name, {"id": "a:0:b", "offset": 5}) == reply.tool_call
        with pytest.raises(ScriptError, match="not JSON"):
            decide(request("[[mcp: history_read {id: x}]]", tools=(name,)))

    def test_tool_result_gets_a_final_answer_quoting_it(self) -> None:
        """After a tool result the model answers and stops."""
        body = request("x")
        body["messages"].append({"role": "tool", "tool_call_id": "c", "content": "line one\nline two"})
        reply = decide(body)
        assert ("Final answer: the tool returned: line one line two", "after-tool") == (reply.text, reply.why)

    def test_summarisation_prompt_gets_a_summary(self) -> None:
        """Pi's compaction and branch-summary requests are recognised by their system prompt."""
        reply = decide(request("summarise", system="You are a context summarization assistant."))
        assert reply.why == "summary"
        assert reply.text is not None and reply.text.startswith("## Goal")
