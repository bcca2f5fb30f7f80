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


class TestQueryCommands:
    def test_memory_search_imports_no_model_client_or_terminal_code(self, tmp_path: Path) -> None:
        """``memory search --json`` (a script's or an agent's call, paid per query) imports no litellm,
        rich, MCP, logging framework, watcher or tokenizer: only what answers the query.
        """
        sessions = tmp_path / "sessions"
        sessions.mkdir()
        argv = ("memory", "search", "--sessions", str(sessions), "--json", "ECONNRESET")
        unwanted = ("litellm", "rich", "mcp", "structlog", "watchdog", "tokenizers", "httpx")
        assert [] == modules_after(*argv, among=unwanted)
