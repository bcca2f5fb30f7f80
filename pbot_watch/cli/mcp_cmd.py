"""``pbot-watch mcp``: the history search and read tools for Pi and other MCP clients, over stdio."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from pbot_watch.cli import main
from pbot_watch.cli.options import archive_options


@main.command("mcp")
@archive_options
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default=None,
    help="Log level (logs go to stderr; stdout carries the protocol).",
)
def mcp_command(sessions: tuple[Path, ...], archive: Path | None, log_level: str | None) -> None:
    r"""Serve history_search, history_read, search_memory and recall_memory over MCP (stdio).

    \b
    Register it with Pi:
      pi mcp add pbot-watch --exposure direct -- pbot-watch mcp

    It reads the archive and the session files itself, so it works whether or not the
    service is running. See docs/mcp.md for other clients.
    """
    from pbot_watch.config import load_settings  # noqa: PLC0415
    from pbot_watch.log import configure_logging  # noqa: PLC0415
    from pbot_watch.mcp_server.stdio import serve_stdio  # noqa: PLC0415

    settings = load_settings({"sessions": sessions, "archive": archive, "log_level": log_level})
    # stdout is the protocol channel: every log line goes to stderr, as JSON unless on a terminal.
    configure_logging(settings, stream=sys.stderr)
    serve_stdio(settings)
