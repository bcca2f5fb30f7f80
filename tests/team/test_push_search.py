"""The team index end to end through the CLI: init, push, search and read, and what may not leave."""

from __future__ import annotations

import json

import psycopg
import pytest

from pbot_watch.team.gate import guarded, secret_gate
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
    assert "schema version 3 (applied 1, 2, 3)" in _ok("team", "init")
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


def test_nothing_leaves_a_workspace_not_allowed(machine: TeamSpace) -> None:
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


def test_a_gate_that_fails_holds_the_text_back() -> None:
    """Fail closed: a check that raises keeps the text home; an empty text holds nothing."""

    def broken(text: str) -> bool:
        raise RuntimeError(text)

    gate = guarded(broken)
    assert gate("an ordinary answer") is True
    assert gate("") is False
    assert secret_gate()("an ordinary answer") is False
    planted = "sk-" + "Zq8Xw2Lr5Tn7Vb3Mk9Pd4Hs6"  # the shape of an API key, made up for this test
    assert secret_gate()(f"the key is {planted}") is True


def test_history_tools_with_the_team_scope(machine: TeamSpace) -> None:
    """The tools MCP and the Pi package serve take ``scope: "team"`` and label each match."""
    from pbot_watch.config import load_settings
    from pbot_watch.tools.registry import call

    _session(machine, "s-1", [("Where is the retry budget set?", "In config.toml, retry_budget.")])
    _ok("index")
    _ok("team", "init")
    _ok("team", "push")
    settings = load_settings()
    found = call("history_search", {"query": "retry budget", "scope": "team"}, settings)
    assert found.structured is not None and found.structured["total"] == 1
    assert "written on: laptop by alice" in found.text
    node = found.structured["matches"][0]["id"]
    page = call("history_read", {"id": node, "scope": "team"}, settings)
    assert page.structured is not None and "retry_budget" in page.structured["text"]
    # The local scope still answers from this machine's index.
    assert call("history_search", {"query": "retry budget"}, settings).structured["total"] == 1
    missing = call("history_read", {"id": "no-such-node", "scope": "team"}, settings)
    assert missing.failure is not None and "no node" in missing.text


def test_team_scope_when_the_index_is_off(isolated_home: object) -> None:
    from pbot_watch.config import load_settings
    from pbot_watch.tools.registry import call

    answer = call("history_search", {"query": "x", "scope": "team"}, load_settings())
    assert answer.failure is not None and "team index is off" in answer.text
    done = invoke("search", "--team", "x")
    assert done.returncode == 1 and "team index is off" in done.stderr


def test_reader_role_searches_and_cannot_push_and_the_dsn_is_never_shown(
    machine: TeamSpace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read-only role of docs/team.md: search and read work, a push is refused, no password shown."""
    _session(machine, "s-1", [("How is the reader role set up?", "With GRANT SELECT.")])
    _ok("index")
    _ok("team", "init")
    _ok("team", "push")
    with psycopg.connect(machine.dsn, autocommit=True) as conn:
        conn.execute("CREATE ROLE pbot_reader")
        conn.execute("GRANT SELECT ON pbot_records, pbot_nodes, pbot_meta, pbot_migrations TO pbot_reader")
        conn.execute("CREATE ROLE bob LOGIN PASSWORD 'hunter2-Secret' IN ROLE pbot_reader")
    reader = machine.dsn.replace("postgres@", "bob:hunter2-Secret@")
    monkeypatch.setenv("PBOT_WATCH_TEAM_DSN", reader)
    assert json.loads(_ok("search", "--team", "--json", "reader role"))["total"] == 1
    _session(machine, "s-2", [("A second question", "A second answer")])
    _ok("index")
    refused = invoke("team", "push")
    assert refused.returncode == 1
    assert "permission denied" in refused.stderr
    status = _ok("team", "status")
    for output in (refused.stdout + refused.stderr, status, _ok("config")):
        assert "hunter2" not in output


@pytest.mark.slow
def test_push_watch_follows_the_archive(machine: TeamSpace) -> None:
    """``team push --watch`` pushes records as they appear, until stopped."""
    import os
    import subprocess
    import time

    from tests.support.cli import pbot_watch_executable

    _session(machine, "s-1", [("first", "one")])
    _ok("index")
    _ok("team", "init")
    child = subprocess.Popen(
        [pbot_watch_executable(), "team", "push", "--watch", "--interval", "0.2"],
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _session(machine, "s-2", [("a walrus question", "two")])
        _ok("index")
        deadline = time.monotonic() + 20
        while json.loads(_ok("search", "--team", "--json", "walrus"))["total"] != 1:
            assert time.monotonic() < deadline, "the new record was not pushed"
            time.sleep(0.2)
    finally:
        child.terminate()
        child.wait(10)
