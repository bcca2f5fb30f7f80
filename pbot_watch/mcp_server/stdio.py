"""Serving MCP on stdin and stdout until the client closes stdin (the MCP stdio shutdown)."""

from __future__ import annotations

import anyio
from mcp.server.stdio import stdio_server

from pbot_watch import __version__
from pbot_watch.config import Settings
from pbot_watch.log import get_logger
from pbot_watch.mcp_server.server import build_server


def serve_stdio(settings: Settings) -> None:
    server = build_server(settings)
    log = get_logger(__name__)

    async def main() -> None:
        log.info(
            "mcp_server_started",
            sessions=[str(p) for p in settings.sessions],
            archive=str(settings.archive) if settings.archive else None,
            version=__version__,
        )
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        log.info("mcp_server_stopped")

    anyio.run(main)
