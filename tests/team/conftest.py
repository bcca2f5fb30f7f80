"""The team index tests' server: one real PostgreSQL 15 per test session, a database per test."""

from __future__ import annotations

import importlib.util
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.postgres import PostgresServer, Unavailable

if TYPE_CHECKING:
    from pbot_watch.team.push import PushReport, TeamPusher

_numbers = itertools.count()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    try:
        server = PostgresServer.create()
    except Unavailable as reason:
        pytest.skip(f"PostgreSQL cannot be started here: {reason}")
    try:
        yield server
    finally:
        server.destroy()


@dataclass
class TeamSpace:
    """One machine of a team: its home (state, config), a workspace, and the team's DSN."""

    home: Path
    workspace: Path
    dsn: str

    @property
    def sessions(self) -> Path:
        return self.home / ".pi" / "agent" / "sessions"

    @property
    def history(self) -> Path:
        return self.workspace / ".pi" / "pbot" / "history"


@pytest.fixture
def team_dsn(postgres: PostgresServer) -> str:
    """A fresh database of the session's server, running (a test before may have stopped it)."""
    if not postgres.running():
        postgres.start()
    return postgres.create_database(f"team_{next(_numbers)}")


def write_config(
    home: Path, machine: str, workspaces: list[str], *, user: str = "alice", extra: str = ""
) -> Path:
    config = home / "config" / "pbot-watch" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    globs = ", ".join(f'"{w}"' for w in workspaces)
    config.write_text(
        f'machine = "{machine}"\nuser = "{user}"\n{extra}\n[team]\nenabled = true\nworkspaces = [{globs}]\n'
        "retry_seconds = 0.2\n",
        encoding="utf-8",
    )
    return config


@pytest.fixture
def machine(isolated_home: Path, tmp_path: Path, team_dsn: str, monkeypatch: pytest.MonkeyPatch) -> TeamSpace:
    """This process as one machine of the team, pushing its workspace ``proj``."""
    workspace = tmp_path / "proj"
    workspace.mkdir()
    write_config(isolated_home, "laptop", [str(workspace)])
    monkeypatch.setenv("PBOT_WATCH_TEAM_DSN", team_dsn)
    return TeamSpace(isolated_home, workspace, team_dsn)


def push_archive(state: Path, dsn: str, archive: Path) -> tuple[TeamPusher, PushReport]:
    """The schema made and a central archive folder pushed, as one machine's ``team push`` would."""
    import psycopg

    from pbot_watch.config import Settings
    from pbot_watch.team.gate import secret_gate
    from pbot_watch.team.push import TeamPusher
    from pbot_watch.team.schema import migrate

    with psycopg.connect(dsn) as conn:
        migrate(conn)
    settings = Settings.model_validate({"state_dir": state, "team": {"enabled": True, "workspaces": ["*"]}})
    pusher = TeamPusher(settings, dsn, secret_gate(), [(archive, None)])
    return pusher, pusher.catch_up()


# Without the `team` extra (psycopg) these tests cannot even be imported; README's and CI's test
# install has it, so this only spares a checkout installed for other work.
if importlib.util.find_spec("psycopg") is None:
    collect_ignore_glob = ["test_*.py"]
