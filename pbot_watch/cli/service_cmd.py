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
from pbot_watch.installer import Step
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


def _plan(
    manager: str | None, sessions: tuple[Path, ...], archive: Path | None, env_file: Path | None
) -> svc.ServicePlan:
    run_args: list[str] = []
    for root in sessions:
        run_args += ["--sessions", str(root.expanduser().absolute())]
    if archive is not None:
        run_args += ["--archive", str(archive.expanduser().absolute())]
    configured = env_file or load_settings().env_file
    return svc.plan(manager or svc.default_manager(), run_args, configured)  # type: ignore[arg-type]


def _echo_steps(title: str, steps: list[Step]) -> None:
    if steps:
        click.echo(title)
        for step in steps:
            click.echo(f"  {step.shell()}")


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
    plan = _plan(manager, sessions, archive, env_file)
    if dry_run:
        click.echo(plan.content, nl=False)
        click.echo(f"# would write {plan.path}", err=True)
        for step in plan.install_steps:
            click.echo(f"# then run: {step.shell()}", err=True)
        return
    outcome = svc.install(plan)
    click.echo(f"{'wrote' if outcome.file_changed else 'unchanged'}: {plan.path}")
    for result in outcome.ran:
        click.echo(
            f"ran: {result.step.shell()}" + ("" if result.returncode == 0 else f" (exit {result.returncode})")
        )
    if outcome.tool_missing:
        click.echo(f"{outcome.tool_missing} not found: the service file is written but not activated.")
        _echo_steps("Next steps, where the service manager runs:", outcome.next_steps)
    elif outcome.failed:
        _echo_steps("Still to do, once the error is fixed:", outcome.next_steps)
        raise CommandError(
            f"`{outcome.failed.step.shell()}` failed (exit {outcome.failed.returncode}): "
            f"{_first_line(outcome.failed.output)}; the service file is written to {plan.path}",
            EXIT_FAILURE,
        )
    else:
        click.echo("pbot-watch service installed and started.")
    for hint in plan.hints:
        click.echo(f"hint: {hint}")


@service_group.command("uninstall")
@manager_option
@print_option
def service_uninstall(manager: str | None, *, dry_run: bool) -> None:
    """Stop the service, disable it and remove its file (the archive and state stay)."""
    plan = _plan(manager, (), None, None)
    if dry_run:
        click.echo(f"would remove {plan.path}" + ("" if plan.path.exists() else " (not installed)"))
        _echo_steps("would run:", plan.uninstall_steps)
        return
    outcome = svc.uninstall(plan)
    for result in outcome.ran:
        click.echo(
            f"ran: {result.step.shell()}" + ("" if result.returncode == 0 else f" (exit {result.returncode})")
        )
    click.echo(f"removed: {plan.path}" if outcome.file_changed else f"not installed: {plan.path}")
    if outcome.tool_missing:
        click.echo(f"{outcome.tool_missing} not found: nothing was stopped.")
        _echo_steps("Next steps, where the service manager runs:", outcome.next_steps)
    elif outcome.failed:
        raise CommandError(
            f"`{outcome.failed.step.shell()}` failed (exit {outcome.failed.returncode}): "
            f"{_first_line(outcome.failed.output)}",
            EXIT_FAILURE,
        )


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
    plan = _plan(manager, sessions, archive, env_file)
    if dry_run:
        if not plan.path.exists():
            raise CommandError(f"not installed: {plan.path}", EXIT_NOT_RUNNING)
        click.echo(plan.path.read_text(encoding="utf-8"), nl=False)
        return
    info = svc.status(plan)
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


def _first_line(text: str) -> str:
    return next((line for line in text.splitlines() if line.strip()), "no output")
