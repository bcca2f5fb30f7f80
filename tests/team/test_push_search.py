"""The team index end to end through the CLI: init, push, search and read, and what may not leave."""

from __future__ import annotations

import json

import psycopg
import pytest

from tests.support.cli import invoke
from tests.support.pi_sessions import PiSession
from tests.team.conftest import TeamSpace


def _session(space: TeamSpace, session_id: str, texts: list[tuple[str, str]]) -> PiSession:
    pi = PiSession(session_id, str(space.workspace))
    for question, answer in texts:
        pi.user(question)
        pi.assistant(answer)
    pi.write(space.sessions / f"{session_id}.jsonl")
    return pi


def _ok(*args: str) -> str:
    done = invoke(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_init_push_search_read(machine: TeamSpace) -> None:
    _session(
        machine, "s-1", [("How do I fix the Flaky cache?", "Clear it and retry."), ("数据库 broke", "修复了")]
    )
    _ok("index")
    assert "schema version 1" in _ok("team", "init")
    assert "already up to date" in _ok("team", "init")
    assert "pushed 1 records" in _ok("team", "push")
    assert "pushed 0 records" in _ok("team", "push")  # a replay sends nothing

    found = json.loads(_ok("search", "--team", "--json", "flaky CACHE"))
    assert found["total"] == 1
    hit = found["matches"][0]
    assert (hit["machine"], hit["user"], hit["workspace"]) == ("laptop", "alice", "proj")
    assert "Flaky cache" in hit["snippet"]
    page = json.loads(_ok("read", "--team", "--json", hit["id"]))
    assert page["text"].startswith("用户：\nHow do I fix")
    assert page["parents"][0]["kind"] == "session"
    assert json.loads(_ok("search", "--team", "--json", "数"))["total"] == 1
    assert json.loads(_ok("search", "--team", "--json", "--match", "terms", "caches"))["total"] == 1


def test_nothing_leaves_a_workspace_not_allowed(machine: TeamSpace, tmp_path: pytest.TempPathFactory) -> None:
    other = machine.workspace.parent / "secret-project"
    other.mkdir()
    pi = PiSession("s-other", str(other))
    pi.user("the other project's plan")
    pi.assistant("kept home")
    pi.write(machine.sessions / "s-other.jsonl")
    _ok("index")
    _ok("team", "init")
    _ok("team", "push")
    with psycopg.connect(machine.dsn) as conn:
        assert conn.execute("SELECT count(*) FROM pbot_records").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM pbot_nodes WHERE text LIKE '%plan%'").fetchone() == (0,)
