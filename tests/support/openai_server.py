"""A real OpenAI chat-completions server on 127.0.0.1, scripted per request, for tests.

It speaks ``POST /v1/chat/completions`` (plain JSON and ``"stream": true`` server-sent events)
and ``GET /v1/models`` over a real socket, so clients are tested through their own HTTP path.
Each request takes the next scripted ``Reply`` (or asks a ``handler`` callable); when the script
is empty the ``default`` reply is used. Everything is recorded: the requests (path, headers, JSON
body) and the requests whose client went away before the answer was complete (``disconnects``).

    with OpenAIServer() as server:
        server.script(Reply.rate_limited(), Reply.answer("a summary"))
        call_model(api_base=server.base_url, ...)
        assert server.requests[1].body["messages"][1]["content"] == "..."

Behaviours (``Reply`` constructors): ``answer(text)`` (optionally ``tool_calls=[ToolCall(...)]``,
``finish_reason``, ``usage``), ``empty()``, ``error(status, message)`` and its shortcuts
``rate_limited()`` (429), ``server_error()`` (500), ``unauthorized()`` (401), ``bad_request()``
(400); ``not_json()`` (a 200 whose body is no JSON); ``hang()`` (never answers until the client
disconnects or the server stops) and any reply with ``delay=`` seconds before it is sent. While a reply waits, the server watches the
socket, so a client that disconnects is seen at once and logged in ``disconnects``.

Usage: by default ``prompt_tokens`` is the number of characters of all message contents divided
by four, rounded up, and ``completion_tokens`` likewise for the answer; pass ``usage=`` to fix them.
"""

from __future__ import annotations

import json
import math
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

POLL_SECONDS = 0.01


@dataclass(frozen=True)
class ToolCall:
    """A function call the scripted model makes; ``arguments`` is sent as a JSON string."""

    name: str
    arguments: dict[str, Any]
    id: str = ""


@dataclass(frozen=True)
class Reply:
    """What the server does with one request."""

    status: int = 200
    text: str | None = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    usage: tuple[int, int] | None = None
    delay: float = 0.0
    hang: bool = False
    error_message: str = ""
    error_type: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    model: str | None = None
    raw: bytes | None = None

    @classmethod
    def answer(
        cls,
        text: str,
        *,
        tool_calls: list[ToolCall] | None = None,
        finish_reason: str | None = None,
        usage: tuple[int, int] | None = None,
        delay: float = 0.0,
    ) -> Reply:
        return cls(
            text=text,
            tool_calls=tuple(tool_calls or ()),
            finish_reason=finish_reason,
            usage=usage,
            delay=delay,
        )

    @classmethod
    def tools(cls, *calls: ToolCall, text: str | None = None, delay: float = 0.0) -> Reply:
        """An assistant turn that calls tools (``finish_reason`` ``tool_calls``)."""
        return cls(text=text, tool_calls=calls, finish_reason="tool_calls", delay=delay)

    @classmethod
    def empty(cls, delay: float = 0.0) -> Reply:
        """A well-formed answer with no content at all."""
        return cls(text=None, delay=delay)

    @classmethod
    def error(
        cls, status: int, message: str = "scripted error", *, kind: str = "", delay: float = 0.0
    ) -> Reply:
        return cls(status=status, error_message=message, error_type=kind or f"http_{status}", delay=delay)

    @classmethod
    def rate_limited(cls, retry_after: float | None = None) -> Reply:
        headers = (("Retry-After", f"{retry_after:g}"),) if retry_after is not None else ()
        reply = cls.error(429, "Rate limit reached", kind="rate_limit_exceeded")
        return Reply(**{**reply.__dict__, "headers": headers})

    @classmethod
    def server_error(cls) -> Reply:
        return cls.error(500, "The server had an error", kind="server_error")

    @classmethod
    def unauthorized(cls) -> Reply:
        return cls.error(401, "Incorrect API key provided", kind="invalid_api_key")

    @classmethod
    def bad_request(cls, message: str = "Invalid request") -> Reply:
        return cls.error(400, message, kind="invalid_request_error")

    @classmethod
    def not_json(cls, body: bytes = b"<html>502 Bad Gateway</html>") -> Reply:
        """A 200 whose body is not JSON (a proxy's error page): the client cannot read an answer."""
        return cls(raw=body)

    @classmethod
    def hanging(cls) -> Reply:
        """Never answers; the request ends when the client gives up or the server stops."""
        return cls(hang=True)


@dataclass
class Request:
    """One request as the server received it."""

    index: int
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    received_at: float
    reply: Reply | None = None
    completed: bool = False
    disconnected: bool = False

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    @property
    def user_text(self) -> str:
        """The content of the last user message (what a summarizer asked about)."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, list):
                    return "".join(p.get("text", "") for p in content if isinstance(p, dict))
                return str(content)
        return ""


Handler = Callable[[Request], Reply]


def _count_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


@dataclass
class OpenAIServer:
    """A threaded HTTP server; use as a context manager, or ``start()`` / ``stop()``."""

    default: Reply = field(default_factory=lambda: Reply.answer("scripted summary"))
    handler: Handler | None = None
    model_name: str = "fake-model"
    requests: list[Request] = field(default_factory=list)
    _script: deque[Reply] = field(default_factory=deque)
    # Re-entrant: ``wait_for`` predicates read the properties below while holding it.
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _changed: threading.Condition = field(init=False)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        self._changed = threading.Condition(self._lock)

    # ---- lifecycle --------------------------------------------------------------------------
    def start(self) -> Self:
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
                return

            def do_GET(self) -> None:  # stdlib name
                if self.path.rstrip("/").endswith("/models"):
                    outer._send_json(
                        self, 200, {"object": "list", "data": [{"id": outer.model_name, "object": "model"}]}
                    )
                else:
                    outer._send_json(self, 404, {"error": {"message": "not found", "type": "not_found"}})

            def do_POST(self) -> None:  # stdlib name
                outer._handle(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        # serve_forever notices shutdown() once per poll: at the default 0.5 s, every test paid it.
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="openai-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The ``api_base`` to give a client (``http://127.0.0.1:PORT/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # ---- scripting --------------------------------------------------------------------------
    def script(self, *replies: Reply) -> None:
        """Queue replies for the next requests, in order."""
        with self._lock:
            self._script.extend(replies)

    @property
    def chat_requests(self) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.path.rstrip("/").endswith("/chat/completions")]

    @property
    def disconnects(self) -> list[Request]:
        """Requests whose client closed the connection before the reply was complete."""
        with self._lock:
            return [r for r in self.requests if r.disconnected]

    def wait_for(self, predicate: Callable[[OpenAIServer], bool], timeout: float = 10.0) -> None:
        """Block until ``predicate(self)`` holds (checked on every request event); fail at ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"condition not met within {timeout}s; requests: {len(self.requests)}")
                self._changed.wait(left)

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> None:
        self.wait_for(lambda s: len(s.requests) >= count, timeout)

    def wait_for_disconnects(self, count: int, timeout: float = 10.0) -> None:
        self.wait_for(lambda s: sum(r.disconnected for r in s.requests) >= count, timeout)

    # ---- serving ----------------------------------------------------------------------------
    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def _handle(self, http: BaseHTTPRequestHandler) -> None:
        length = int(http.headers.get("Content-Length") or 0)
        raw = http.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        with self._changed:
            request = Request(
                index=len(self.requests),
                method="POST",
                path=http.path,
                headers={k.lower(): v for k, v in http.headers.items()},
                body=body if isinstance(body, dict) else {"_value": body},
                received_at=time.monotonic(),
            )
            self.requests.append(request)
            if self.handler is not None:
                reply = self.handler(request)
            elif self._script:
                reply = self._script.popleft()
            else:
                reply = self.default
            request.reply = reply
            self._changed.notify_all()
        if not self._wait(http, request, math.inf if reply.hang else reply.delay):
            return
        try:
            if reply.raw is not None:
                self._send_raw(http, reply.raw)
            elif reply.status != 200:
                payload = {
                    "error": {
                        "message": reply.error_message,
                        "type": reply.error_type,
                        "code": reply.error_type,
                    }
                }
                self._send_json(http, reply.status, payload, reply.headers)
            elif body.get("stream"):
                self._stream(http, body, reply)
            else:
                self._send_json(http, 200, self._completion(body, reply), reply.headers)
            request.completed = True
        except (BrokenPipeError, ConnectionResetError):
            request.disconnected = True
        self._notify()

    def _wait(self, http: BaseHTTPRequestHandler, request: Request, seconds: float) -> bool:
        """Sleep up to ``seconds`` while watching the socket; ``False`` when the client left."""
        deadline = time.monotonic() + seconds
        sock: socket.socket = http.connection
        while time.monotonic() < deadline and not self._stopping.is_set():
            readable, _, _ = select.select(
                [sock], [], [], min(POLL_SECONDS, max(0.0, deadline - time.monotonic()))
            )
            if readable:
                try:
                    peeked = sock.recv(1, socket.MSG_PEEK)
                except OSError:
                    peeked = b""
                if not peeked:
                    request.disconnected = True
                    http.close_connection = True
                    self._notify()
                    return False
        if self._stopping.is_set() and seconds == math.inf:
            http.close_connection = True
            return False
        return True

    def _usage(self, body: dict[str, Any], reply: Reply, answer: str) -> dict[str, int]:
        if reply.usage is not None:
            prompt, completion = reply.usage
        else:
            contents = []
            for message in body.get("messages", []):
                content = message.get("content")
                contents.append(
                    content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
                )
            prompt, completion = _count_tokens("".join(contents)), _count_tokens(answer)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _tool_calls(self, reply: Reply) -> list[dict[str, Any]]:
        return [
            {
                "id": call.id or f"call_{i}",
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for i, call in enumerate(reply.tool_calls)
        ]

    def _finish(self, reply: Reply) -> str:
        return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")

    def _completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if reply.tool_calls:
            message["tool_calls"] = self._tool_calls(reply)
        return {
            "id": f"chatcmpl-{time.monotonic_ns()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or body.get("model") or self.model_name,
            "choices": [
                {"index": 0, "message": message, "finish_reason": self._finish(reply), "logprobs": None}
            ],
            "usage": self._usage(body, reply, reply.text or ""),
        }

    def _stream(self, http: BaseHTTPRequestHandler, body: dict[str, Any], reply: Reply) -> None:
        http.send_response(200)
        http.send_header("Content-Type", "text/event-stream")
        http.send_header("Cache-Control", "no-cache")
        http.send_header("Connection", "close")
        for name, value in reply.headers:
            http.send_header(name, value)
        http.end_headers()
        http.close_connection = True
        base = {
            "id": f"chatcmpl-{time.monotonic_ns()}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": reply.model or body.get("model") or self.model_name,
        }

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> None:
            data = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
            http.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
            http.wfile.flush()

        chunk({"role": "assistant", "content": ""})
        text = reply.text or ""
        for start in range(0, len(text), 16):
            chunk({"content": text[start : start + 16]})
        for i, call in enumerate(self._tool_calls(reply)):
            chunk({"tool_calls": [{"index": i, **call}]})
        chunk({}, self._finish(reply))
        if (body.get("stream_options") or {}).get("include_usage"):
            final: dict[str, Any] = {**base, "choices": [], "usage": self._usage(body, reply, text)}
            http.wfile.write(f"data: {json.dumps(final)}\n\n".encode())
        http.wfile.write(b"data: [DONE]\n\n")
        http.wfile.flush()

    @staticmethod
    def _send_raw(http: BaseHTTPRequestHandler, data: bytes) -> None:
        http.send_response(200)
        http.send_header("Content-Type", "application/json")
        http.send_header("Content-Length", str(len(data)))
        http.end_headers()
        http.wfile.write(data)
        http.wfile.flush()

    @staticmethod
    def _send_json(
        http: BaseHTTPRequestHandler,
        status: int,
        payload: dict[str, Any],
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        data = json.dumps(payload).encode()
        http.send_response(status)
        http.send_header("Content-Type", "application/json")
        http.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            http.send_header(name, value)
        http.end_headers()
        http.wfile.write(data)
        http.wfile.flush()


def iter_sse(raw: bytes) -> Iterator[dict[str, Any]]:
    """Decode a server-sent event stream body into its JSON chunks (for tests of the server itself)."""
    for line in raw.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            yield json.loads(line[len("data: ") :])
