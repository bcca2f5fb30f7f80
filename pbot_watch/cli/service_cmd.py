"""``pbot-watch service install|uninstall|status``: run pbot-watch as a user service."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from pbot_watch.cli import main
from pbot_watch.cli.errors import EXIT_FAILURE, EXIT_NOT_RUNNING, CommandError
from pbot_watch.cli.options import archive_options
from pbot_watch.config import load_settings
from pbot_watch.installer import did, steps_lines, would_do
from pbot_watch.service import install as svc

F = TypeVar("F", bound=Callable[..., Any])


def manager_option(func: F) -> F:
    return click.option(
        "--manager",
        type=click.Choice(["systemd", "launchd"]),
        default=None,
        help="Service manager. Default: launchd on macOS, systemd elsewhere.",
    )(func)


def print_option(func: F) -> F:
    return click.option(
        "--print", "dry_run", is_flag=True, help="Print the service file and the commands; change nothing."
    )(func)


def env_file_option(func: F) -> F:
    return click.option(
        "--env-file",
        type=click.Path(path_type=Path, dir_okay=False),
        default=None,
        help="KEY=VALUE file with API keys for the service. Default: env_file setting, else "
        "$XDG_CONFIG_HOME/pbot-watch/env (optional).",
    )(func)


@main.group("service")
def service_group() -> None:
    """Install pbot-watch as a systemd user service or a launchd agent."""


def _unit(
    manager: str | None, sessions: tuple[Path, ...], archive: Path | None, env_file: Path | None
) -> svc.ServiceUnit:
    run_args: list[str] = []
    for root in sessions:
        run_args += ["--sessions", str(root.expanduser().absolute())]
    if archive is not None:
        run_args += ["--archive", str(archive.expanduser().absolute())]
    configured = env_file or load_settings().env_file
    return svc.render(manager or svc.default_manager(), run_args, configured)  # type: ignore[arg-type]


def _echo(lines: list[str], *, err: bool = False) -> None:
    for line in lines:
        click.echo(line, err=err)


@service_group.command("install")
@manager_option
@archive_options
@env_file_option
@print_option
def service_install(
    manager: str | None,
    sessions: tuple[Path, ...],
    archive: Path | None,
    env_file: Path | None,
    *,
    dry_run: bool,
) -> None:
    """Write the service file and start the service now and at every login.

    --sessions and --archive given here are written into the service's command line; other
    settings belong in the config file, which the service reads at start.
    """
    unit = _unit(manager, sessions, archive, env_file)
    if dry_run:
        # stdout is the file itself (to read or redirect); what would happen goes to stderr.
        click.echo(unit.content, nl=False)
        _echo([f"# {line}" for line in would_do(svc.install_plan(unit))], err=True)
        return
    outcome = svc.install(unit)
    _echo(did(outcome))
    if outcome.tool_missing:
        click.echo(f"{outcome.tool_missing} not found: the service file is written but not activated.")
        _echo(steps_lines("Next steps, where the service manager runs:", outcome.next_steps))
    elif outcome.failed:
        _echo(steps_lines("Still to do, once the error is fixed:", outcome.next_steps))
        raise CommandError(
            f"{outcome.failed.failure()}; the service file is written to {unit.path}", EXIT_FAILURE
        )
    else:
        click.echo("pbot-watch service installed and started.")
    _echo([f"hint: {hint}" for hint in outcome.plan.hints])


@service_group.command("uninstall")
@manager_option
@print_option
def service_uninstall(manager: str | None, *, dry_run: bool) -> None:
    """Stop the service, disable it and remove its file (the archive and state stay)."""
    unit = _unit(manager, (), None, None)
    if dry_run:
        _echo(would_do(svc.uninstall_plan(unit)))
        return
    outcome = svc.uninstall(unit)
    _echo(did(outcome))
    if outcome.tool_missing:
        click.echo(f"{outcome.tool_missing} not found: nothing was stopped.")
        _echo(steps_lines("Next steps, where the service manager runs:", outcome.next_steps))
    elif outcome.failed:
        raise CommandError(outcome.failed.failure(), EXIT_FAILURE)


@service_group.command("status")
@manager_option
@archive_options
@env_file_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@print_option
def service_status(
    manager: str | None,
    sessions: tuple[Path, ...],
    archive: Path | None,
    env_file: Path | None,
    *,
    as_json: bool,
    dry_run: bool,
) -> None:
    """Show whether the service is installed, current and running (exit 0 when running, 3 when not).

    "current" compares the installed file with what `service install` with the same options
    would write now (it differs after moving the virtualenv or upgrading pbot-watch).
    --print shows the installed file.
    """
    unit = _unit(manager, sessions, archive, env_file)
    if dry_run:
        if not unit.path.exists():
            raise CommandError(f"not installed: {unit.path}", EXIT_NOT_RUNNING)
        click.echo(unit.path.read_text(encoding="utf-8"), nl=False)
        return
    info = svc.status(unit)
    if as_json:
        click.echo(json.dumps({**info.model_dump(mode="json"), "running": info.running}, indent=2))
    else:
        click.echo(f"manager:   {info.manager}")
        click.echo(f"file:      {info.path} ({_file_state(info)})")
        if info.tool_available:
            click.echo(f"enabled:   {info.enabled}")
            click.echo(f"active:    {info.active}")
        else:
            click.echo(f"state:     unknown ({info.tool} not found)")
    if not info.running:
        raise SystemExit(EXIT_NOT_RUNNING)


def _file_state(info: svc.ServiceStatus) -> str:
    if not info.installed:
        return "not installed"
    return "current" if info.current else "differs from what `service install` would write now"
