"""``pbot-watch team``: create the team index's schema, push records to it, see what was pushed."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import click

from pbot_watch.cli import main
from pbot_watch.cli.errors import CommandError
from pbot_watch.config import load_settings

if TYPE_CHECKING:
    from pbot_watch.team.memory_push import MemoryReport
    from pbot_watch.team.push import TeamPusher


@main.group("team")
def team_group() -> None:
    """The team index on PostgreSQL: init, push, status (see docs/team.md)."""


@team_group.command("init")
def init_command() -> None:
    """Create or migrate the team index's schema (needs a role that may create tables)."""
    import psycopg  # noqa: PLC0415

    from pbot_watch.team.dsn import TeamUnavailable, describe, scrub  # noqa: PLC0415 - psycopg is loaded on use
    from pbot_watch.team.schema import latest, migrate  # noqa: PLC0415

    with _errors():
        from pbot_watch.team.access import require_enabled  # noqa: PLC0415
        from pbot_watch.team.push import connect_team  # noqa: PLC0415

        dsn = require_enabled(load_settings())
        conn = connect_team(dsn)
        try:
            done = migrate(conn)
        except psycopg.Error as error:
            raise TeamUnavailable(f"team init failed: {scrub(error, dsn)}") from error
        finally:
            conn.close()
    applied = f"applied {', '.join(map(str, done))}" if done else "already up to date"
    click.echo(f"team index at {describe(dsn)}: schema version {latest()} ({applied})")


@team_group.command("push")
@click.option("--watch", is_flag=True, help="Keep pushing what changes, until stopped.")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.05),
    default=1.0,
    show_default=True,
    help="With --watch: seconds between looks at the archive.",
)
def push_command(watch: bool, interval: float) -> None:
    """Push the records of the allowed workspaces (team.workspaces) that changed since the last push."""
    with _errors():
        from pbot_watch.team.access import local_folders, require_enabled  # noqa: PLC0415
        from pbot_watch.team.dsn import TeamUnavailable  # noqa: PLC0415
        from pbot_watch.team.gate import secret_gate  # noqa: PLC0415
        from pbot_watch.team.push import TeamPusher, backoff  # noqa: PLC0415

        settings = load_settings()
        dsn = require_enabled(settings)
        gate = secret_gate()
        if not settings.team.workspaces:
            click.echo("warning: team.workspaces allows no workspace: nothing leaves this machine", err=True)
        pusher = TeamPusher(settings, dsn, gate, local_folders(settings))
        try:
            if not watch:
                report = pusher.catch_up()
                click.echo(
                    f"pushed {report.pushed} records, {report.unchanged} unchanged; held back by the "
                    f"redaction gate: {report.held_nodes} texts, {report.held_records} records"
                )
                if settings.team.raw_memory:
                    memory = _push_memory(pusher)
                    click.echo(
                        f"raw memory: pushed {memory.pushed} sources of {memory.sessions} sessions, "
                        f"{memory.removed} removed (off their branch); held back by the redaction gate: "
                        f"{memory.held} sources"
                    )
                return
            attempt = 0
            refreshed = time.monotonic()
            while True:
                try:
                    report = pusher.catch_up()
                    attempt = 0
                    if report.pushed:
                        click.echo(f"pushed {report.pushed} records")
                    if settings.team.raw_memory and (memory := _push_memory(pusher)).pushed:
                        click.echo(f"pushed {memory.pushed} raw memory sources")
                    time.sleep(interval)
                except TeamUnavailable as error:
                    wait = backoff(attempt, settings.team.retry_seconds)
                    click.echo(f"warning: {error}; trying again in {wait:.0f} s", err=True)
                    attempt += 1
                    time.sleep(wait)
                if time.monotonic() - refreshed > 30:
                    pusher.folders = local_folders(settings)
                    refreshed = time.monotonic()
        except KeyboardInterrupt:
            return
        finally:
            pusher.close()


def _push_memory(pusher: TeamPusher) -> MemoryReport:
    """Raw memory brought up to date from the session files (as a memory query does), then pushed."""
    from pbot_watch.query import run_query  # noqa: PLC0415

    return run_query(pusher.settings, lambda query: pusher.push_memory(query.index), memory=True)


@team_group.command("status")
def status_command() -> None:
    """What this machine pushed, what the gate held back, and whether the server answers."""
    with _errors():
        import psycopg.errors  # noqa: PLC0415

        from pbot_watch.team.access import require_enabled, team_connection  # noqa: PLC0415
        from pbot_watch.team.dsn import TeamUnavailable, describe  # noqa: PLC0415
        from pbot_watch.team.memory_push import MEMORY_SCHEMA  # noqa: PLC0415
        from pbot_watch.team.push import PushLedger  # noqa: PLC0415
        from pbot_watch.team.schema import applied  # noqa: PLC0415

        settings = load_settings()
        dsn = require_enabled(settings)
        ledger = PushLedger(settings.state_dir)
        try:
            pushed, held, memory_held = ledger.count(), ledger.held(), ledger.memory_held()
        finally:
            ledger.close()
        click.echo(f"server: {describe(dsn)}")
        click.echo(f"allowed workspaces: {', '.join(settings.team.workspaces) or 'none'}")
        click.echo(f"records pushed from here: {pushed}; texts held back by the redaction gate: {held}")
        if settings.team.raw_memory:
            click.echo(f"raw memory: on; sources held back by the redaction gate: {memory_held}")
        else:
            click.echo("raw memory: off (team.raw_memory = false): none leaves this machine")
        try:
            with team_connection(settings) as conn:
                row = conn.execute("SELECT count(*) FROM pbot_records").fetchone()
                click.echo(f"records in the team index: {row[0] if row else 0}")
                if applied(conn) >= MEMORY_SCHEMA:
                    try:
                        sources = conn.execute("SELECT count(*) FROM pbot_memory").fetchone()
                        click.echo(f"raw memory sources in the team index: {sources[0] if sources else 0}")
                    except psycopg.errors.InsufficientPrivilege:
                        click.echo("raw memory sources in the team index: not readable by this role")
        except TeamUnavailable as error:
            click.echo(f"server: {error}")


class _errors:  # noqa: N801 - used as a context manager, named like one
    """Team and settings errors as one line; the driver checked before anything imports it."""

    def __enter__(self) -> None:
        from pbot_watch.team.dsn import TeamUnavailable, require_driver  # noqa: PLC0415

        try:
            require_driver()
        except TeamUnavailable as error:
            raise CommandError(str(error)) from error

    def __exit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        from pbot_watch.team.dsn import TeamUnavailable  # noqa: PLC0415

        if isinstance(error, TeamUnavailable):  # a bad setting: exit 2, as from every command
            raise CommandError(str(error)) from error
