"""The service pushes what it writes: two machines at once, the server stopped, the network cut."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from tests.support.machines import ScratchMachine
from tests.support.pi_sessions import PiSession
from tests.support.postgres import PortProxy, PostgresServer
from tests.support.service import wait_for
from tests.team.conftest import write_config

pytestmark = pytest.mark.slow

PLANTED = "sk-" + "Zq8Xw2Lr5Tn7Vb3Mk9Pd4Hs6"  # the shape of an API key, made up for this test


class Machine(ScratchMachine):
    """A home with its own state, config and workspace, and its service, pushing to ``dsn``."""

    def __init__(self, root: Path, name: str, dsn: str) -> None:
        super().__init__(root, name, root / name / "work" / "proj", {"PBOT_WATCH_TEAM_DSN": dsn})
        write_config(self.home, name, [str(self.workspace)], user=f"user-{name}")
        self.session_count = 0

    def session(self, *texts: str) -> PiSession:
        self.session_count += 1
        pi = PiSession(f"{self.home.name}-s{self.session_count}", str(self.workspace))
        for text in texts:
            pi.user(text)
            pi.assistant(f"answered: {text}")
        pi.write(self.sessions / f"{pi.session_id}.jsonl")
        return pi


def _count(dsn: str, sql: str, *params: object) -> int:
    try:
        with psycopg.connect(dsn, connect_timeout=3) as conn:
            row = conn.execute(sql, params).fetchone()
    except psycopg.OperationalError:
        return -1
    return int(row[0]) if row else 0


def _records(dsn: str) -> int:
    return _count(dsn, "SELECT count(*) FROM pbot_records")


def test_two_services_push_at_once_and_hold_back_a_secret(tmp_path: Path, team_dsn: str) -> None:
    laptop, server = Machine(tmp_path, "laptop", team_dsn), Machine(tmp_path, "devbox", team_dsn)
    laptop.cli("team", "init")
    for number in range(6):
        laptop.session(f"laptop question {number} about the parser", "and a follow-up")
        server.session(f"devbox question {number} about the parser")
    laptop.session("a harmless first question", f"here is my key {PLANTED} please keep it")
    with laptop.service, server.service:
        laptop.service.start(wait=False)
        server.service.start(wait=False)
        wait_for(lambda: _records(team_dsn) == 13, 30, "both machines' records in the team index")
        # A record written now is found by the team a moment later.
        server.session("a brand new zebra question")
        wait_for(
            lambda: json.loads(laptop.cli("search", "--team", "--json", "ZEBRA"))["total"] == 1,
            15,
            "the new record searchable by the team",
        )
        # The secret is redacted when the record is written, or else the gate holds its text back
        # and status counts it; either way it never reaches the server.
        history = "".join(p.read_text() for p in laptop.workspace.glob(".pi/pbot/history/*.json"))
        if PLANTED in history:
            status = laptop.service.wait_status(
                lambda s: s.extensions.get("team", {}).get("held_back", 0) >= 1,
                "the held-back count in status",
            )
            assert status.extensions["team"]["server"].startswith("127.0.0.1")
    assert PLANTED not in (laptop.home / "service.log").read_text()
    assert _count(team_dsn, "SELECT count(*) FROM pbot_nodes WHERE text LIKE %s", f"%{PLANTED}%") == 0
    assert _count(team_dsn, "SELECT count(*) FROM pbot_records WHERE name LIKE %s", f"%{PLANTED}%") == 0
    found = json.loads(laptop.cli("search", "--team", "--json", "about the parser", "--limit", "50"))
    assert found["total"] == 12
    assert {(m["machine"], m["user"], m["workspace"]) for m in found["matches"]} == {
        ("laptop", "user-laptop", "proj"),
        ("devbox", "user-devbox", "proj"),
    }
    # Each machine pushed its own records once: the two services never fought over a row.
    assert _count(team_dsn, "SELECT count(DISTINCT pushed_by) FROM pbot_records") == 2


def test_server_stopped_during_a_push_and_back(
    tmp_path: Path, postgres: PostgresServer, team_dsn: str
) -> None:
    laptop = Machine(tmp_path, "laptop", team_dsn)
    laptop.cli("team", "init")
    laptop.session("first question before the outage")
    with laptop.service:
        laptop.service.start(wait=False)
        wait_for(lambda: _records(team_dsn) == 1, 20, "the first record pushed")
        postgres.stop()
        for number in range(40):
            laptop.session(f"written while the server was down {number}")
        laptop.service.wait_status(
            lambda s: "last_error" in s.extensions.get("team", {}),
            "status to say the team index is unreachable",
        )
        postgres.start()
        wait_for(lambda: _records(team_dsn) == 41, 40, "the records written offline pushed")
        total = json.loads(laptop.cli("search", "--team", "--json", "while the server was down"))["total"]
        assert total == 40
        laptop.service.wait_status(
            lambda s: "last_error" not in s.extensions.get("team", {}), "status to recover"
        )


def test_network_cut_for_a_while(tmp_path: Path, postgres: PostgresServer, team_dsn: str) -> None:
    proxy = PortProxy(postgres.port)
    database = team_dsn.rsplit("/", 1)[1]
    through = f"{proxy.dsn}/{database}"
    laptop = Machine(tmp_path, "laptop", through)
    laptop.cli("team", "init")
    laptop.session("before the cut")
    with laptop.service:
        laptop.service.start(wait=False)
        wait_for(lambda: _records(team_dsn) == 1, 20, "the first record pushed")
        proxy.cut()
        for number in range(10):
            laptop.session(f"during the cut {number}")
        laptop.service.wait_status(
            lambda s: "last_error" in s.extensions.get("team", {}),
            "status to say the team index is unreachable",
        )
        assert _records(team_dsn) == 1
        proxy.restore()
        wait_for(lambda: _records(team_dsn) == 11, 40, "the records written during the cut pushed")
    assert _count(team_dsn, "SELECT count(*) FROM pbot_nodes WHERE kind = 'exchange'") == 11
