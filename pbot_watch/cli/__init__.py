"""The command line: thin click commands that call one package function each.

Commands are loaded lazily (click's lazy group): ``pbot-watch status`` imports the status
command's module and nothing of ``search``, ``run`` or ``summarize``. Each command module
registers itself on ``main`` when imported; ``COMMANDS`` says which module holds which command
and the one line ``pbot-watch --help`` shows for it, so the overview imports no command at all
(a test keeps those lines equal to the commands' own). Importing this package must stay cheap
(click and nothing else): ``status`` and ``--help`` answer in a fraction of a second.

Beside the ``*_cmd`` modules (one per command, named in ``COMMANDS``): ``answer`` (what the
query commands share), ``team_answer`` (``--team`` on them), ``options`` (options declared
once), ``run_parts`` (the parts ``run`` assembles the service from), ``errors`` (expected
failures and exit codes), ``console`` (rich output), ``progress`` (progress bars) and
``query_process`` (how a query command's own process starts).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from pbot_watch import __version__
from pbot_watch.cli.errors import EXIT_FAILURE, CommandError
from pbot_watch.errors import PbotWatchError, exit_code, failure_kind
from pbot_watch.prefork import wire

COMMANDS: dict[str, tuple[str, str]] = {
    # name: (module under pbot_watch.cli, the summary line of its docstring)
    "config": (
        "config_cmd",
        "Show the effective settings: flags > PBOT_WATCH_* environment > config file > defaults.",
    ),
    "cues": (
        "cues_cmd",
        "The memory cues of a session branch after its latest compaction (none before the first).",
    ),
    "index": ("index_cmd", "Index every Pi session once and write the history archive."),
    "mcp": (
        "mcp_cmd",
        "Serve history_search, history_read, search_memory and recall_memory over MCP (stdio).",
    ),
    "memory": ("memory_cmd", "Raw memory: every message of a session branch (tool calls and results too)."),
    "pi": (
        "pi_cmd",
        "The Pi package: native history and memory tools, /history, memory cues, a footer status.",
    ),
    "read": ("read_cmd", "Read NODE_ID (from search or from another node's parents/children)."),
    "recall": ("memory_cmd", "Whole source lines of a memory HANDLE from a line, and where to continue."),
    "reindex": (
        "reindex_cmd",
        "Rebuild the search index from scratch (it is derived data; nothing is lost).",
    ),
    "run": ("run_cmd", "Watch Pi's session folders and keep the history archive up to date, until stopped."),
    "search": ("search_cmd", "Search exchanges and summaries; without QUERY, list sessions (newest first)."),
    "service": ("service_cmd", "Install pbot-watch as a systemd user service or a launchd agent."),
    "secrets": (
        "secrets_cmd",
        "Secrets in the archive and the search index: report them (scan) or remove them (scrub).",
    ),
    "status": (
        "status_cmd",
        "Show whether the service runs and what it is doing; exit 0 when running, 3 when not (or stale).",
    ),
    "team": ("team_cmd", "The team index on PostgreSQL: init, push, status (see docs/team.md)."),
    "summarize": (
        "summarize_cmd",
        "Index every session, then summarize pending nodes now (lowest level first).",
    ),
}


class LazyGroup(click.Group):
    """A group whose commands are imported when used (click's documented lazy-loading pattern).

    It is also where every command's expected errors become one stderr line and an exit code,
    the same for every command (``pbot_watch.errors.exit_code``): a bad setting, a query to
    correct, an id that names nothing, an SQLite library too old for the index. So is what a
    person's machine does to any command and no change of arguments fixes: a full disk, a
    read-only or busy database, a file that cannot be read (``failure_kind`` "unavailable"):
    one line naming it, exit 1, where a traceback said nothing more. Bugs keep their traceback.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException:
            raise
        except PbotWatchError as error:
            raise CommandError(str(error), exit_code(error)) from error
        except Exception as error:
            if failure_kind(error) != "unavailable":
                raise
            raise CommandError(f"cannot go on: {error} ({type(error).__name__})", EXIT_FAILURE) from error

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            importlib.import_module(f"pbot_watch.cli.{COMMANDS[cmd_name][0]}")
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from ``COMMANDS``: ``--help`` imports no command module."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            command = self.commands.get(name)
            if command is not None and command.hidden:
                continue
            # An unloaded command is described by a stand-in with its summary: the same short help.
            shown = command or click.Command(name, help=COMMANDS[name][1])
            rows.append((name, shown.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.command(
    cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.version_option(__version__, prog_name="pbot-watch")
def main() -> None:
    """A long memory for the Pi coding agent: archive, summarize and search Pi sessions."""


QUERY_COMMANDS = wire.QUERY_COMMANDS


def run() -> None:
    """A command in a process of its own (the console script's, when no warm server ran it).

    Only here, not in ``main``: a process that runs commands in itself (a test's runner, an
    embedding program) keeps its own collector and pydantic's plugins.
    """
    if len(sys.argv) < 2 or sys.argv[1] not in QUERY_COMMANDS:
        main(prog_name="pbot-watch")
        return
    from pbot_watch.cli import query_process  # noqa: PLC0415 - only query commands use it

    query_process.start()
    try:
        main(prog_name="pbot-watch")
    finally:  # a command that ended before its query (--help, a usage error) collects as usual too
        query_process.imported()
