"""``pbot-watch run``: the live watcher, in the foreground (a service manager runs it the same way)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from pbot_watch.cli import main
from pbot_watch.cli.errors import EXIT_FAILURE, CommandError
from pbot_watch.cli.options import archive_options

if TYPE_CHECKING:
    from pbot_watch.config import Settings


@main.command("run")
@archive_options
@click.option("--include", multiple=True, help="Only workspaces matching this glob (repeatable).")
@click.option("--exclude", multiple=True, help="Skip workspaces matching this glob (repeatable).")
@click.option("--poll/--no-poll", default=None, help="Poll the folders instead of using inotify/FSEvents.")
@click.option("--poll-seconds", type=float, default=None, help="Polling interval when polling.")
@click.option(
    "--debounce-seconds", type=float, default=None, help="Quiet time per file before it is re-read."
)
@click.option("--reconcile-seconds", type=float, default=None, help="Period of the full rescan.")
@click.option(
    "--idle-seconds", type=float, default=None, help="No append for this long means idle: summaries run."
)
@click.option(
    "--model", default=None, help="litellm model for summaries (e.g. openai/gpt-4o-mini); none: offline."
)
@click.option("--api-base", default=None, help="Base URL of an OpenAI-compatible server for --model.")
@click.option(
    "--env-file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="File of KEY=VALUE lines (API keys) loaded at start.",
)
@click.option("--max-sessions-in-memory", type=int, default=None, help="Parsed session files kept in memory.")
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Service state, status and lock. Default: $XDG_STATE_HOME/pbot-watch.",
)
@click.option(
    "--log-format", type=click.Choice(["auto", "json", "console"]), default=None, help="Log format."
)
@click.option(
    "--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default=None, help="Log level."
)
def run_command(**flags: Any) -> None:
    """Watch Pi's session folders and keep the history archive up to date, until stopped.

    Stops cleanly on SIGTERM or Ctrl-C (a second Ctrl-C forces it). Only one instance runs per
    user: a second one exits with code 1, naming the first one's pid.
    """
    from pbot_watch import config  # noqa: PLC0415 - keep `pbot-watch status` free of the service

    settings = config.load_settings(flags)
    config.apply_env_file(settings)
    _configure_logging(settings)

    from pbot_watch.cli.run_parts import build_extensions  # noqa: PLC0415
    from pbot_watch.service.hooks import ServiceContext  # noqa: PLC0415
    from pbot_watch.service.lock import AlreadyRunning  # noqa: PLC0415
    from pbot_watch.service.run import Service, StartupError  # noqa: PLC0415

    context = ServiceContext(settings)
    service = Service(settings, build_extensions(context), context)
    try:
        service.run()
    except (AlreadyRunning, StartupError) as error:
        raise CommandError(str(error), EXIT_FAILURE) from error
    _leave_now()


def _leave_now() -> NoReturn:
    """Exit 0 at once, skipping the interpreter's finalization.

    The service has stopped: its status is final, its databases are committed and closed, its
    lock is released. What is left is Python's last garbage collection over every object ever
    imported, which after the model client (litellm) took 3 s of a SIGTERM's budget.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _configure_logging(settings: Settings) -> None:
    from pbot_watch.log import configure_logging  # noqa: PLC0415

    configure_logging(settings)
