"""The scripted server itself, through the official OpenAI client (JSON and SSE, tool calls, errors)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageFunctionToolCall, ChatCompletionMessageParam

from tests.support.openai_server import OpenAIServer, Reply, ToolCall


@pytest.fixture
def client(server: OpenAIServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0, timeout=5) as made:
        yield made


MESSAGES: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hello"}]


class TestAnswers:
    def test_plain_answer_with_usage(self, server: OpenAIServer, client: openai.OpenAI) -> None:
        """A JSON completion with the scripted text and the estimated usage."""
        server.script(Reply.answer("hi there"))
        response = client.chat.completions.create(model="m", messages=MESSAGES)
        assert response.choices[0].message.content == "hi there"
        assert response.choices[0].finish_reason == "stop"
        assert response.usage is not None
        assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (2, 2)
        assert server.requests[0].body["messages"] == MESSAGES

    def test_streamed_answer(self, server: OpenAIServer, client: openai.OpenAI) -> None:
        """With stream=true the text arrives as SSE chunks, then usage when asked for."""
        server.script(Reply.answer("a longer answer that spans several chunks"))
        stream = client.chat.completions.create(
            model="m",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "a longer answer that spans several chunks"
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
        assert chunks[-1].usage is not None

    def test_tool_calls(self, server: OpenAIServer, client: openai.OpenAI) -> None:
        """A scripted tool call comes back as the API shapes it, JSON and streamed."""
        call = ToolCall("read", {"path": "README.md"}, id="call_1")
        server.script(Reply.tools(call), Reply.tools(call))
        response = client.chat.completions.create(model="m", messages=MESSAGES)
        (made,) = response.choices[0].message.tool_calls or []
        assert isinstance(made, ChatCompletionMessageFunctionToolCall)
        assert (made.id, made.function.name, json.loads(made.function.arguments)) == (
            "call_1",
            "read",
            {"path": "README.md"},
        )
        assert response.choices[0].finish_reason == "tool_calls"
        stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        deltas = [d for c in stream if c.choices for d in (c.choices[0].delta.tool_calls or [])]
        assert [(d.function.name if d.function else None) for d in deltas] == ["read"]

    def test_handler_sees_each_request(self, server: OpenAIServer, client: openai.OpenAI) -> None:
        """A handler decides per request, e.g. from the user's text."""
        server.handler = lambda request: Reply.answer(request.user_text.upper())
        response = client.chat.completions.create(model="m", messages=MESSAGES)
        assert response.choices[0].message.content == "HELLO"


class TestFailures:
    @pytest.mark.parametrize(
        ("reply", "error"),
        [
            (Reply.rate_limited(retry_after=1), openai.RateLimitError),
            (Reply.server_error(), openai.InternalServerError),
            (Reply.unauthorized(), openai.AuthenticationError),
            (Reply.bad_request("nope"), openai.BadRequestError),
        ],
    )
    def test_error_statuses(
        self, server: OpenAIServer, client: openai.OpenAI, reply: Reply, error: type[Exception]
    ) -> None:
        """Each scripted status reaches the client as the matching error."""
        server.script(reply)
        with pytest.raises(error):
            client.chat.completions.create(model="m", messages=MESSAGES)

    def test_client_timeout_is_logged_as_a_disconnect(self, server: OpenAIServer) -> None:
        """A hanging reply is abandoned by the client; the server records the disconnect."""
        server.script(Reply.hanging())
        with (
            openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=0.3) as impatient,
            pytest.raises(openai.APITimeoutError),
        ):
            impatient.chat.completions.create(model="m", messages=MESSAGES)
        server.wait_for_disconnects(1)
        assert not server.requests[0].completed

    def test_models_endpoint(self, server: OpenAIServer) -> None:
        """GET /v1/models lists the server's model name."""
        listed = httpx.get(server.base_url + "/models", timeout=5).json()
        assert listed["data"][0]["id"] == "fake-model"
