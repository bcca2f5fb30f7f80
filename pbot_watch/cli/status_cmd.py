"""``pbot-watch status``: is the service running, and what is it doing. Reads the status file only.

This command must answer in a fraction of a second: it imports the status model and the
standard library, never watchdog, the indexer or litellm (a test checks ``sys.modules``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import click

from pbot_watch.cli import main
from pbot_watch.cli.errors import EXIT_NOT_RUNNING


def _state_dir(explicit: Path | None) -> Path:
    """The service's state folder, without validating the whole configuration (status must not fail on it)."""
    if explicit is not None:
        return explicit
    from pbot_watch.config import SettingsError, default_state_dir, load_settings  # noqa: PLC0415

    try:
        return load_settings().state_dir
    except SettingsError:
        # A broken config must not hide whether the service runs; `pbot-watch config` explains it.
        configured = os.environ.get("PBOT_WATCH_STATE_DIR")
        return Path(configured).expanduser() if configured else default_state_dir()


@main.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the status file's JSON plus a 'state' field.")
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Service state folder. Default: $PBOT_WATCH_STATE_DIR or $XDG_STATE_HOME/pbot-watch.",
)
def status_command(*, as_json: bool, state_dir: Path | None) -> None:
    """Show whether the service runs and what it is doing; exit 0 when running, 3 when not (or stale)."""
    from pbot_watch.service.status import assess, read_status  # noqa: PLC0415

    folder = _state_dir(state_dir)
    status = read_status(folder)
    state, detail = assess(folder, status)
    if as_json:
        document: dict[str, Any] = {"state": state, "detail": detail, "state_dir": str(folder)}
        if status is not None:
            document.update(status.model_dump(mode="json"))
            document["running"] = state == "running"
        click.echo(json.dumps(document, ensure_ascii=False, indent=2))
    else:
        click.echo(f"pbot-watch: {state} ({detail})")
        if status is not None:
            for line in _lines(status):
                click.echo(line)
    if state != "running":
        raise SystemExit(EXIT_NOT_RUNNING)


def _ago(iso_time: str | None) -> str:
    if not iso_time:
        return "never"
    from datetime import datetime  # noqa: PLC0415

    then = datetime.fromisoformat(iso_time).timestamp()
    seconds = max(0, time.time() - then)
    if seconds < 120:  # display rounding
        return f"{iso_time} ({seconds:.0f}s ago)"
    if seconds < 7200:
        return f"{iso_time} ({seconds / 60:.0f}m ago)"
    return f"{iso_time} ({seconds / 3600:.1f}h ago)"


def _mb(count: int) -> str:
    return f"{count / 1e6:.1f} MB" if count >= 100_000 else f"{count} bytes"


def _lines(status: Any) -> list[str]:
    observer = status.observer.kind + (f" ({status.observer.reason})" if status.observer.reason else "")
    roots = ", ".join(
        r.path + ("" if r.watched else " (not watched: missing)" if not r.exists else " (not watched)")
        for r in status.roots
    )
    hours, rest = divmod(int(status.uptime_seconds), 3600)
    lines = [
        f"  pid {status.pid}, version {status.version}, up {hours}h{rest // 60:02d}m since {status.started}",
        f"  heartbeat  {_ago(status.heartbeat)}",
        f"  activity   {status.activity}, {status.pending_files} files pending"
        + (f", {status.retrying_files} failing (retried)" if status.retrying_files else ""),
        *([f"  working on {status.working_on}"] if status.working_on else []),
        *_catch_up_lines(status.catch_up),
        f"  observer   {observer}",
        f"  roots      {roots or '-'}",
        f"  archive    {status.archive or 'per workspace (.pi/pbot/history)'}",
        (
            f"  tracked    {status.files_tracked} files, {status.sessions_tracked} sessions"
            f" ({status.files_in_memory} files in memory)"
        ),
        (
            f"  records    {status.records_written} written, {status.records_unchanged} unchanged,"
            f" {len(status.workspaces_written)} workspaces"
        ),
        (
            f"  parsed     {_mb(status.bytes_parsed_total)} total,"
            f" {_mb(status.bytes_parsed_last_append)} for the last append"
        ),
        f"  last append {_ago(status.last_append)}"
        + (f" ({status.last_append_path})" if status.last_append_path else ""),
    ]
    if status.state_error:
        lines.append(
            f"  state      degraded: {status.state_error} ({status.unsaved_cursors} unsaved, retried)"
        )
    worker = status.idle_worker
    if worker:
        lines.append(
            f"  idle work  {worker.get('name')}: {'running' if worker.get('running') else 'waiting'},"
            f" {worker.get('runs', 0)} runs, {worker.get('cancelled', 0)} cancelled"
        )
    if status.summaries:
        lines.append("  summaries  " + ", ".join(f"{k}={_short(v)}" for k, v in status.summaries.items()))
    lines.extend(
        f"  {name:<10} " + ", ".join(f"{k}={_short(v)}" for k, v in values.items())
        for name, values in status.extensions.items()
    )
    lines.extend(f"  warning    {warning}" for warning in status.warnings[-5:])
    if len(status.warnings) > 5:
        lines.append(f"  ...        {len(status.warnings) - 5} more warnings (--json)")
    lines.extend(f"  error      {error.time} {error.message}" for error in status.errors[-5:])
    return lines


def _catch_up_lines(catch_up: Any) -> list[str]:
    """Where the start scan's reading is: progress while catching up, what it took once done."""
    if catch_up is None or not catch_up.files_total:
        return []
    rate = f", {_mb(catch_up.bytes_per_second)}/s" if catch_up.bytes_per_second else ""
    if catch_up.finished is not None:
        return [
            (
                f"  caught up  {catch_up.files_total} files, {_mb(catch_up.bytes_total)}"
                f" in {_duration(catch_up.seconds)}{rate}"
            )
        ]
    left = f", about {_duration(catch_up.eta_seconds)} left" if catch_up.eta_seconds is not None else ""
    return [
        (
            f"  catching up {catch_up.files_done} of {catch_up.files_total} files,"
            f" {_mb(catch_up.bytes_done)} of {_mb(catch_up.bytes_total)}{rate}{left}"
        )
    ]


def _duration(seconds: float) -> str:
    if seconds < 120:  # display rounding
        return f"{seconds:.0f}s"
    return f"{seconds // 60:.0f}m{seconds % 60:02.0f}s"


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."
