"""Serving MCP on stdin and stdout until the client closes stdin (the MCP stdio shutdown).

A line that is no JSON-RPC message gets a JSON-RPC error reply, as the JSON-RPC 2.0 spec asks
(-32700 for what is not JSON, -32600 for JSON that is no message, with the request's id when
it has one). The SDK's stdio transport hands such a line to the server as an exception, which
the server logs at debug level and drops: a client that sent a broken request would wait for
its answer forever. So stdin is read here, each line checked before the SDK sees it, and the
error written through the SDK's own stdout writer.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from typing import IO, Any, Protocol, cast

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from pbot_watch import __version__
from pbot_watch.config import Settings
from pbot_watch.history.jstext import to_well_formed
from pbot_watch.log import get_logger
from pbot_watch.mcp_server.server import build_mcp_server
from pbot_watch.pi.jsonline import Malformed, loads_json


def checked(line: str) -> str | types.JSONRPCError:
    r"""The line the SDK should read, or the error reply to it.

    A JSON-RPC message comes back as it was read. One whose strings hold a lone surrogate
    (``"\udfff"``: valid JSON, which the SDK's parser refuses) comes back rewritten with U+FFFD
    in its place, the rule every text from outside follows here (``to_well_formed``): the
    tool answers, as ``pi serve`` does, instead of the caller hearing "not a message".
    """
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError:
        pass
    else:
        return line
    try:
        value = loads_json(line)
    except Malformed as error:
        return _error(None, types.PARSE_ERROR, f"Parse error: {error}")
    well_formed = to_well_formed(value)
    if well_formed != value:
        rewritten = json.dumps(well_formed, ensure_ascii=False)
        try:
            types.jsonrpc_message_adapter.validate_json(rewritten, by_name=False)
        except ValidationError:
            pass
        else:
            return rewritten
    request_id = value.get("id") if isinstance(value, dict) else None
    if isinstance(request_id, bool) or not isinstance(request_id, (int, str)):
        request_id = None
    return _error(
        to_well_formed(request_id), types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message"
    )


def _error(request_id: int | str | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))


def take_stdin() -> IO[str]:
    """The protocol's stdin, for our reader alone: fd 0 then reads ``/dev/null``.

    As the SDK's transport does with the stdin it claims: no tool, library or child process
    can read (and so steal) a message. The duplicate is never closed: a worker thread may
    still be blocked reading it when the server stops.
    """
    private = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return open(private, encoding="utf-8", errors="replace", closefd=False)


class Replies(Protocol):
    async def send(self, item: SessionMessage, /) -> None: ...


class CheckedLines:
    """stdin's lines for the SDK's reader; the broken ones are answered instead of passed on.

    An answer is written before the next line is read, through the stream the server writes
    its own answers to (known once the transport is up: ``ready``). So every error reply is
    on its way before stdin's end stops the server.
    """

    def __init__(self, lines: Any) -> None:
        self.lines = lines
        self.replies: Replies | None = None
        self.ready = anyio.Event()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._checked()

    async def _checked(self) -> AsyncIterator[str]:
        async for line in self.lines:
            if not line.strip():
                continue  # a blank line is no message and asks for nothing
            answer = checked(line)
            if isinstance(answer, str):
                yield answer
                continue
            await self.ready.wait()
            assert self.replies is not None
            await self.replies.send(SessionMessage(answer))


def serve_stdio(settings: Settings) -> None:
    server = build_mcp_server(settings)
    log = get_logger(__name__)

    async def main() -> None:
        log.info(
            "mcp_server_started",
            sessions=[str(p) for p in settings.sessions],
            archive=str(settings.archive) if settings.archive else None,
            version=__version__,
        )
        checked = CheckedLines(anyio.wrap_file(take_stdin()))
        async with stdio_server(stdin=cast("Any", checked)) as (read_stream, write_stream):
            checked.replies = write_stream
            checked.ready.set()
            await server.run(read_stream, write_stream, server.create_initialization_options())
        log.info("mcp_server_stopped")

    anyio.run(main)
