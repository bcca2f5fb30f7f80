"""Commands load only what they use: ``--help`` and ``status`` stay free of pydantic and search."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

from pbot_watch.cli import COMMANDS, main
from tests.support.cli import invoke, modules_after, run
from tests.support.pi_sessions import PiSession, jsonl

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
        rich, MCP, logging framework, watcher, tokenizer or record reader: only what answers the query.
        """
        sessions = tmp_path / "sessions"
        sessions.mkdir()
        argv = ("memory", "search", "--sessions", str(sessions), "--json", "ECONNRESET")
        unwanted = ("litellm", "rich", "mcp", "structlog", "watchdog", "tokenizers", "httpx")
        # Nor the history records' reader: raw memory answers from the session files' index.
        unwanted += ("pbot_watch.archive.files", "pbot_watch.history.nodes")
        assert [] == modules_after(*argv, among=unwanted)


# A query command's own process, started as the console script starts it (``cli.run``): what it
# holds at the end, its collector's thresholds and whether the start-up objects were frozen.
AS_THE_SCRIPT = """\
import gc, json, sys
from pbot_watch.cli import run
sys.argv = ["pbot-watch", *sys.argv[1:]]
try:
    run()
except SystemExit:
    pass
print(json.dumps({"modules": sorted(sys.modules), "threshold": gc.get_threshold(), "frozen": gc.get_freeze_count()}))
"""


def as_the_script(*argv: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", AS_THE_SCRIPT, *argv], capture_output=True, text=True, env=env, check=False
    )
    assert done.stdout.strip(), done.stderr
    figures: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return figures


@pytest.fixture
def one_session() -> Path:
    """A session with a word to find, indexed, under Pi's default session folder."""
    root = Path(os.environ["PI_CODING_AGENT_DIR"]) / "sessions" / "--work--"
    root.mkdir(parents=True)
    pi = PiSession(cwd=str(root.parent / "work"))
    pi.turn("where is the walnut cache", "the walnut cache is in .cache")
    path = root / "s.jsonl"
    path.write_bytes(jsonl([pi.header(), *pi.entries]))
    assert 0 == invoke("index").returncode
    return path


class TestQueryProcess:
    """``query_process``: a query command's own process skips what is not its query's."""

    @pytest.mark.parametrize(
        "argv",
        [("memory", "search", "--json", "walnut"), ("search", "--json", "walnut"), ("recall", "--help")],
        ids=["memory search", "search", "recall --help"],
    )
    @pytest.mark.usefixtures("one_session")
    def test_no_plugin_discovery_and_usual_collection_for_the_query(self, argv: tuple[str, ...]) -> None:
        """No ``importlib.metadata`` (pydantic's plugin loader reads every distribution's entry
        points with it); the objects of start-up are frozen and the usual thresholds are back.
        """
        figures = as_the_script(*argv)
        assert [] == [
            m for m in figures["modules"] if m.startswith(("importlib.metadata", "email", "zipfile"))
        ]
        assert list(gc.get_threshold()) == figures["threshold"]
        if argv[-1] != "--help":  # --help ends before the query's modules are imported
            assert figures["frozen"] > 0

    def test_other_commands_start_as_before(self) -> None:
        """``status`` and ``config`` keep pydantic's plugin loader (when they use pydantic) and the collector."""
        figures = as_the_script("config")
        assert "importlib.metadata" in figures["modules"]
        assert (0, list(gc.get_threshold())) == (figures["frozen"], figures["threshold"])

    def test_a_person_s_plugin_setting_is_pydantic_s_to_apply(self, one_session: Path) -> None:
        """With ``PYDANTIC_DISABLE_PLUGINS`` set, pydantic's own loader runs, and the answers are the same."""
        del one_session
        argv = ("memory", "search", "--json", "walnut")
        own = {**os.environ, "PYDANTIC_DISABLE_PLUGINS": "some-plugin"}
        assert "importlib.metadata" in as_the_script(*argv, env=own)["modules"]
        for query in (argv, ("search", "--json", "walnut"), ("memory", "search", "--json")):
            plain, with_loader = run(*query), run(*query, env=own)
            assert (0, plain.stdout) == (with_loader.returncode, with_loader.stdout)
            assert "walnut" in plain.stdout or query[-1] == "--json"
