"""Commands load only what they use: ``--help`` and ``status`` stay free of pydantic and search."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from pbot_watch.cli import COMMANDS, main
from tests.support.cli import modules_after

HEAVY = ("pydantic", "pbot_watch.search", "pbot_watch.config", "litellm", "watchdog", "mcp", "sqlite3")


def loaded_after(*argv: str) -> list[str]:
    """The heavy modules (not their submodules) a fresh interpreter holds after ``pbot-watch argv``."""
    return [m for m in modules_after(*argv, among=HEAVY) if m in HEAVY or m.startswith("pbot_watch.search")]


class TestLazyCommands:
    @pytest.mark.parametrize(
        "argv",
        [("--help",), ("status",), ("status", "--json"), ("index", "--help"), ("config", "--help")],
        ids=["--help", "status", "status --json", "index --help", "config --help"],
    )
    def test_light_commands_import_nothing_heavy(self, argv: tuple[str, ...]) -> None:
        """``--help``, ``status`` and a command's ``--help`` import no pydantic, search, SQLite or model code."""
        assert [] == loaded_after(*argv)

    def test_config_imports_no_search(self) -> None:
        """``config`` validates the settings (pydantic) and imports nothing of search, litellm or watchdog."""
        assert ["pbot_watch.config", "pydantic"] == loaded_after("config")

    def test_overview_lines_are_the_commands_own(self) -> None:
        """Each command's line in ``--help`` is its docstring's summary, as if it were loaded."""
        ctx = click.Context(main)
        for name, (_, summary) in COMMANDS.items():
            command = main.get_command(ctx, name)
            assert command is not None
            assert (name, command.get_short_help_str(1000)) == (name, summary)

    def test_every_command_is_listed(self) -> None:
        """Every registered command is in ``COMMANDS``, so the overview misses none."""
        ctx = click.Context(main)
        for name in COMMANDS:
            main.get_command(ctx, name)
        assert sorted(main.commands) == sorted(COMMANDS)


# What no query command needs: the service, the indexer, summaries, the team index, the edges,
# and the modules of the standard library they bring. Each one imported is start-up a script
# or an agent waits for on every call (bench/cli_latency.py measures it).
NOT_FOR_QUERIES = (
    "litellm",
    "rich",
    "mcp",
    "structlog",
    "watchdog",
    "tokenizers",
    "httpx",
    "psycopg",
    "concurrent.futures",
    "tomllib",
    "difflib",
    "pbot_watch.service.run",
    "pbot_watch.indexer",
    "pbot_watch.summarize",
    "pbot_watch.team",
    "pbot_watch.mcp_server",
    "pbot_watch.pi_bridge",
    "pbot_watch.history.record",
)


class TestQueryCommands:
    @pytest.mark.parametrize(
        "argv",
        [
            ("memory", "search", "--json", "ECONNRESET"),
            ("memory", "search", "--json"),
            ("search", "--json", "ECONNRESET"),
            ("search", "--json"),
            ("read", "--json", "no-such-node"),
        ],
        ids=["memory search", "memory list", "search", "session list", "read"],
    )
    def test_query_commands_import_only_what_answers(self, tmp_path: Path, argv: tuple[str, ...]) -> None:
        """A query with ``--json`` loads no service, indexer, summarizer, team, MCP or Pi code, no
        terminal rendering, no thread pool, and no TOML parser when there is no config file.
        """
        sessions = tmp_path / "sessions"
        sessions.mkdir()
        assert [] == modules_after(*argv, "--sessions", str(sessions), among=NOT_FOR_QUERIES)

    def test_status_imports_no_settings_parser_or_search(self) -> None:
        """``status`` without a config file reads the status file with the standard library's json alone."""
        assert [] == modules_after("status", among=(*NOT_FOR_QUERIES, *HEAVY))

    def test_memory_search_imports_no_model_client_or_terminal_code(self, tmp_path: Path) -> None:
        """``memory search --json`` (a script's or an agent's call, paid per query) imports no litellm,
        rich, MCP, logging framework, watcher or tokenizer: only what answers the query.
        """
        sessions = tmp_path / "sessions"
        sessions.mkdir()
        argv = ("memory", "search", "--sessions", str(sessions), "--json", "ECONNRESET")
        unwanted = ("litellm", "rich", "mcp", "structlog", "watchdog", "tokenizers", "httpx")
        assert [] == modules_after(*argv, among=unwanted)
