"""``pbot-watch status``: is the service running, and what is it doing. Reads the status file only.

This command must answer in a fraction of a second: it reads the file as plain JSON and finds
the state folder without validating the settings, so it imports click and the standard library,
never pydantic, watchdog, the indexer or litellm (a test checks ``sys.modules``). The file's
fields are the ``Status`` model's (``service/status.py``); a field missing from an older file
shows as empty.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from pbot_watch.cli import main
from pbot_watch.cli.errors import EXIT_NOT_RUNNING
from pbot_watch.display import plural
from pbot_watch.shorten import shorten


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
    from pbot_watch.config_paths import state_dir_unvalidated  # noqa: PLC0415
    from pbot_watch.service.status_file import assess, read_status_document  # noqa: PLC0415

    # A broken config must not hide whether the service runs; `pbot-watch config` explains it.
    folder = state_dir if state_dir is not None else state_dir_unvalidated()
    status = read_status_document(folder)
    state, detail = assess(folder, status)
    if as_json:
        document: dict[str, Any] = {"state": state, "detail": detail, "state_dir": str(folder)}
        if status is not None:
            document.update(status.data)
            document["running"] = state == "running"
        click.echo(json.dumps(document, ensure_ascii=False, indent=2))
    else:
        click.echo(f"pbot-watch: {state} ({detail})")
        if status is not None:
            for line in _lines(status.data):
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


def _lines(status: dict[str, Any]) -> list[str]:
    def get(key: str, default: Any = None) -> Any:
        value = status.get(key)
        return default if value is None else value

    observer = get("observer", {})
    kind = f"{observer.get('kind', 'none')}" + (f" ({observer['reason']})" if observer.get("reason") else "")
    roots = ", ".join(
        str(r.get("path"))
        + ("" if r.get("watched") else " (not watched: missing)" if not r.get("exists") else " (not watched)")
        for r in get("roots", [])
    )
    hours, rest = divmod(int(get("uptime_seconds", 0)), 3600)
    retrying = get("retrying_files", 0)
    backlog = get("listener_backlog", 0)
    lines = [
        f"  pid {get('pid')}, version {get('version')}, up {hours}h{rest // 60:02d}m since {get('started')}",
        f"  heartbeat  {_ago(get('heartbeat'))}",
        f"  activity   {get('activity')}, {plural(get('pending_files', 0), 'file')} pending"
        + (f", {retrying} failing (retried)" if retrying else "")
        + (f", {plural(backlog, 'record')} to index" if backlog else ""),
        *([f"  working on {get('working_on')}"] if get("working_on") else []),
        *_catch_up_lines(get("catch_up")),
        f"  observer   {kind}",
        f"  roots      {roots or '-'}",
        f"  archive    {get('archive') or 'per workspace (.pi/pbot/history)'}",
        (
            f"  tracked    {plural(get('files_tracked', 0), 'file')}, {plural(get('sessions_tracked', 0), 'session')}"
            f" ({plural(get('files_in_memory', 0), 'file')} in memory)"
        ),
        (
            f"  records    {get('records_written', 0)} written, {get('records_unchanged', 0)} unchanged,"
            f" {len(get('workspaces_written', []))} workspaces"
        ),
        *(
            [f"  legacy     {get('legacy_imported')} imported from pbot's old history"]
            if status.get("legacy_imported") is not None
            else []
        ),
        (
            f"  parsed     {_mb(get('bytes_parsed_total', 0))} total,"
            f" {_mb(get('bytes_parsed_last_append', 0))} for the last append"
        ),
        f"  last append {_ago(get('last_append'))}"
        + (f" ({get('last_append_path')})" if get("last_append_path") else ""),
    ]
    if get("state_error"):
        lines.append(
            f"  state      degraded: {get('state_error')} ({get('unsaved_cursors', 0)} unsaved, retried)"
        )
    worker = get("idle_worker", {})
    if worker:
        lines.append(
            f"  idle work  {worker.get('name')}: {'running' if worker.get('running') else 'waiting'},"
            f" {worker.get('runs', 0)} runs, {worker.get('cancelled', 0)} cancelled"
        )
    summaries = get("summaries", {})
    if summaries:
        lines.append("  summaries  " + ", ".join(f"{k}={_short(v)}" for k, v in summaries.items()))
    lines.extend(
        f"  {name:<10} " + ", ".join(f"{k}={_short(v)}" for k, v in values.items())
        for name, values in get("extensions", {}).items()
    )
    warnings = get("warnings", [])
    lines.extend(f"  warning    {warning}" for warning in warnings[-5:])
    if len(warnings) > 5:
        lines.append(f"  ...        {len(warnings) - 5} more warnings (--json)")
    lines.extend(
        f"  error      {error.get('time')} {error.get('message')}" for error in get("errors", [])[-5:]
    )
    return lines


def _catch_up_lines(catch_up: dict[str, Any] | None) -> list[str]:
    """Where the start scan's reading is: progress while catching up, what it took once done."""
    if not catch_up or not catch_up.get("files_total"):
        return []
    rate = f", {_mb(catch_up['bytes_per_second'])}/s" if catch_up.get("bytes_per_second") else ""
    total = plural(catch_up["files_total"], "file")
    if catch_up.get("finished") is not None:
        took = _duration(catch_up.get("seconds", 0))
        return [f"  caught up  {total}, {_mb(catch_up.get('bytes_total', 0))} in {took}{rate}"]
    eta = catch_up.get("eta_seconds")
    left = f", about {_duration(eta)} left" if eta is not None else ""
    return [
        (
            f"  catching up {catch_up.get('files_done', 0)} of {total},"
            f" {_mb(catch_up.get('bytes_done', 0))} of {_mb(catch_up.get('bytes_total', 0))}{rate}{left}"
        )
    ]


def _duration(seconds: float) -> str:
    if seconds < 120:  # display rounding
        return f"{seconds:.0f}s"
    return f"{seconds // 60:.0f}m{seconds % 60:02.0f}s"


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return shorten(text, 80)
