"""``pbot-watch config``: the effective settings and where each one came from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pbot_watch.cli import main
from pbot_watch.cli.options import archive_options

if TYPE_CHECKING:  # the settings (pydantic) are imported when the command runs, not for --help
    from pbot_watch.config import ResolvedSettings


@main.command("config")
@archive_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON: each key's value and source.")
@click.option("--path", "show_path", is_flag=True, help="Print only the config file's path.")
@click.option(
    "--template", "show_template", is_flag=True, help="Print a commented config file with every key."
)
def config_command(
    sessions: tuple[Path, ...], archive: Path | None, *, as_json: bool, show_path: bool, show_template: bool
) -> None:
    """Show the effective settings: flags > PBOT_WATCH_* environment > config file > defaults."""
    from pbot_watch.config import resolve_settings, template  # noqa: PLC0415

    if show_template:
        click.echo(template(), nl=False)
        return
    resolved = resolve_settings({"sessions": sessions, "archive": archive})
    if show_path:
        click.echo(str(resolved.config_file))
        return
    if as_json:
        click.echo(json.dumps(as_document(resolved), ensure_ascii=False, indent=2))
        return
    for line in as_lines(resolved):
        click.echo(line)
    for var in resolved.unknown_env:
        click.echo(f"warning: {var} is not a pbot-watch setting and is ignored", err=True)


def as_document(resolved: ResolvedSettings) -> dict[str, Any]:
    """The JSON shape of ``config --json``: stable keys for scripts."""
    from pbot_watch.config import effective  # noqa: PLC0415

    values = effective(resolved.settings)
    return {
        "config_file": str(resolved.config_file),
        "config_file_found": resolved.config_file_found,
        "settings": {
            key: {
                "value": value,
                "source": resolved.origin(key).kind,
                "from": resolved.origin(key).where or None,
            }
            for key, value in values.items()
        },
        "unknown_env": resolved.unknown_env,
    }


def as_lines(resolved: ResolvedSettings) -> list[str]:
    from pbot_watch.config import effective  # noqa: PLC0415

    values = effective(resolved.settings)
    found = "" if resolved.config_file_found else " (not found; defaults apply)"
    lines = [f"# config file: {resolved.config_file}{found}"]
    width = max(len(key) for key in values)
    for key, value in values.items():
        shown = json.dumps(value, ensure_ascii=False)
        lines.append(f"{key:<{width}} = {shown}  # {resolved.origin(key).label()}")
    return lines
