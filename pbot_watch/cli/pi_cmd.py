"""``pbot-watch pi install|uninstall``: give Pi native history tools, ``/history``, cues and a footer."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from pbot_watch.cli import main
from pbot_watch.cli.errors import EXIT_FAILURE, CommandError
from pbot_watch.cli.options import archive_options

F = TypeVar("F", bound=Callable[..., Any])


def _pi_option(func: F) -> F:
    return click.option(
        "--pi",
        "pi_path",
        default=None,
        metavar="PATH",
        help="The pi executable. Default: pi on PATH.",
    )(func)


def _local_option(func: F) -> F:
    return click.option(
        "--local",
        "-l",
        is_flag=True,
        help="The current project's .pi/settings.json instead of your user settings.",
    )(func)


@main.group("pi")
def pi_group() -> None:
    """The Pi package: native history and memory tools, /history, memory cues, a footer status."""


def _find_pi(pi_path: str | None, *, dry_run: bool = False) -> str:
    """The pi executable; with --print a missing one still shows the plan, under a warning.

    --print is how a person checks what install would do before Pi is even set up, so it
    names the command it would run (``pi``, or the --pi given) instead of stopping.
    """
    from pbot_watch.pi_bridge.install import PiNotFound, find_pi  # noqa: PLC0415

    try:
        return find_pi(pi_path)
    except PiNotFound as error:
        if not dry_run:
            raise CommandError(str(error)) from error
        click.echo(f"warning: {error}", err=True)
        return pi_path or "pi"


@pi_group.command("install")
@archive_options
@_pi_option
@_local_option
@click.option("--print", "dry_run", is_flag=True, help="Print what would be written and run; change nothing.")
def pi_install(
    sessions: tuple[Path, ...], archive: Path | None, pi_path: str | None, *, local: bool, dry_run: bool
) -> None:
    """Install (or update) the Pi package with `pi install`.

    Copies the package to $XDG_DATA_HOME/pbot-watch/pi-package, writes pbot-watch.json beside
    it (how to start this pbot-watch, the tools' definitions), then runs `pi install` on that
    folder. Run it again after upgrading pbot-watch: Pi picks up the new extension at its next
    start or /reload. --sessions and --archive given here are passed to the extension's child.
    """
    from pbot_watch.installer import did, would_do  # noqa: PLC0415
    from pbot_watch.pi_bridge import install as pkg  # noqa: PLC0415

    serve_args: list[str] = []
    for root in sessions:
        serve_args += ["--sessions", str(root.expanduser().absolute())]
    if archive is not None:
        serve_args += ["--archive", str(archive.expanduser().absolute())]
    plan = pkg.plan_install(_find_pi(pi_path, dry_run=dry_run), local=local, serve_args=serve_args)
    if dry_run:
        _echo(would_do(plan))
        config = next(file for file in plan.write if file.path.name == Path(pkg.CONFIG_NAME).name)
        click.echo(f"--- {pkg.CONFIG_NAME}")
        click.echo(config.text, nl=False)
        return
    outcome = pkg.install(plan)
    _echo(did(outcome))
    if outcome.failed:
        raise CommandError(outcome.failed.failure(said_last=True), EXIT_FAILURE)
    where = "this project's .pi/settings.json" if local else "your Pi user settings"
    click.echo(f"pbot-watch's Pi package is installed in {where}; start Pi, or /reload a running one.")


@pi_group.command("uninstall")
@_pi_option
@_local_option
@click.option("--print", "dry_run", is_flag=True, help="Print what would be run and removed; change nothing.")
def pi_uninstall(pi_path: str | None, *, local: bool, dry_run: bool) -> None:
    """Remove the Pi package from Pi's settings (`pi remove`), and its folder (not with --local)."""
    from pbot_watch.installer import did, would_do  # noqa: PLC0415
    from pbot_watch.pi_bridge import install as pkg  # noqa: PLC0415

    plan = pkg.plan_uninstall(_find_pi(pi_path, dry_run=dry_run), local=local)
    if dry_run:
        _echo(would_do(plan))
        return
    outcome = pkg.uninstall(plan)
    _echo(did(outcome))
    if outcome.failed:
        raise CommandError(outcome.failed.failure(said_last=True), EXIT_FAILURE)


@pi_group.command("serve", hidden=True)
@archive_options
def pi_serve(sessions: tuple[Path, ...], archive: Path | None) -> None:
    """The Pi extension's child: JSON lines on stdin and stdout (see docs/pi.md)."""
    from pbot_watch.config import load_settings  # noqa: PLC0415
    from pbot_watch.log import configure_logging  # noqa: PLC0415
    from pbot_watch.pi_bridge.serve import serve  # noqa: PLC0415

    settings = load_settings({"sessions": sessions, "archive": archive})
    # stdout carries the protocol: every log line goes to stderr.
    configure_logging(settings, stream=sys.stderr)
    serve(settings, sys.stdin.buffer, sys.stdout.buffer)


def _echo(lines: list[str]) -> None:
    for line in lines:
        click.echo(line)
