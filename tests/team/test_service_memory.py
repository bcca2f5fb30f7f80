"""The service pushes raw memory as sources arrive, and catches up after the server was away."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.pi_sessions import PiSession
from tests.support.postgres import PostgresServer
from tests.support.service import wait_for
from tests.team.test_service_push import PLANTED, Machine, _count

pytestmark = pytest.mark.slow


def _memory_machine(root: Path, name: str, dsn: str) -> Machine:
    machine = Machine(root, name, dsn)
    config = machine.home / "config" / "pbot-watch" / "config.toml"
    with config.open("a", encoding="utf-8") as out:
        out.write("raw_memory = true\n")
    return machine


def _team_total(machine: Machine, query: str) -> int:
    total: int = json.loads(machine.cli("memory", "search", "--team", "--json", query))["total"]
    return total


def test_sources_are_searchable_by_the_team_moments_after_they_are_written(
    tmp_path: Path, postgres: PostgresServer, team_dsn: str
) -> None:
    laptop = _memory_machine(tmp_path, "laptop", team_dsn)
    laptop.cli("team", "init")
    pi = PiSession("laptop-tools", str(laptop.workspace))
    pi.user("run the suite")
    pi.assistant("running", calls=[("call_1", "bash", {"command": "pytest"})])
    pi.tool_result(f"FAILED test_walrus.py\nkey={PLANTED}", call_id="call_1")
    path = pi.write(laptop.sessions / "laptop-tools.jsonl")
    with laptop.service:
        laptop.service.start(wait=False)
        wait_for(lambda: _count(team_dsn, "SELECT count(*) FROM pbot_memory") >= 2, 30, "the first sources")
        # A tool result appended now is found by the team a moment later.
        since = len(pi.entries)
        pi.assistant("again", calls=[("call_2", "bash", {"command": "pytest -x"})])
        pi.tool_result("1 failed: test_narwhal_cache", call_id="call_2")
        written = time.monotonic()
        pi.append_to(path, since)
        wait_for(
            lambda: _team_total(laptop, "narwhal_cache") == 1, 15, "the new tool result in the team index"
        )
        lag = time.monotonic() - written
        assert lag < 10, lag
        # The server away: what is written meanwhile goes when it is back.
        postgres.stop()
        since = len(pi.entries)
        for number in range(5):
            pi.user(f"offline question {number} about the orca")
        pi.append_to(path, since)
        laptop.service.wait_status(
            lambda s: "last_error" in s.extensions.get("team", {}), "status to say the team index is away"
        )
        postgres.start()
        wait_for(lambda: _team_total(laptop, "about the orca") == 5, 40, "the offline sources pushed")
        status = laptop.service.wait_status(
            lambda s: "last_error" not in s.extensions.get("team", {}), "status to recover"
        )
        assert status.extensions["team"]["memory_pushed"] >= 8
    # The secret was redacted when raw memory took it in; either way it never reaches the server.
    assert _count(team_dsn, "SELECT count(*) FROM pbot_memory WHERE text LIKE %s", f"%{PLANTED}%") == 0
    assert _team_total(laptop, "walrus") == 1
