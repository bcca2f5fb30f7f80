"""Raw memory in the team index (``team.raw_memory``): what leaves, how it is searched, and once.

Through the real CLI against a real PostgreSQL: off by default, pushed and searched with
``memory search --team`` and recalled with ``recall --team``; the allow-list and the redaction
gate hold (a planted secret is in no text column of the database); a replay, a lost ledger, a
restart and two pushers at once leave one copy; a source that leaves its branch leaves the team.
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any

import psycopg

from tests.support.cli import invoke
from tests.support.pi_sessions import PiSession
from tests.team.conftest import TeamSpace, write_config

PLANTED = "sk-" + "Zq8Xw2Lr5Tn7Vb3Mk9Pd4Hs6"  # the shape of an API key, made up for this test


def _ok(*args: str) -> str:
    done = invoke(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _raw_memory(space: TeamSpace, *, extra: str = "", workspaces: list[str] | None = None) -> None:
    """This machine's config with ``team.raw_memory = true`` (the [team] table is the file's last)."""
    config = write_config(space.home, "laptop", workspaces or [str(space.workspace)], extra=extra)
    with config.open("a", encoding="utf-8") as out:
        out.write("raw_memory = true\n")


def _tool_session(space: TeamSpace, session_id: str, output: str, workspace: Path | None = None) -> PiSession:
    pi = PiSession(session_id, str(workspace or space.workspace))
    pi.user("Run the tests please")
    pi.assistant("Running them.", calls=[("call_1", "bash", {"command": "pytest -q"})])
    pi.tool_result(output, call_id="call_1")
    pi.assistant("Two failed.")
    pi.write(space.sessions / f"{session_id}.jsonl")
    return pi


def _rows(dsn: str, sql: str, *params: object) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, params).fetchall()


def _memory_search(*args: str) -> Any:
    return json.loads(_ok("memory", "search", "--json", *args))


def test_raw_memory_is_off_by_default(machine: TeamSpace) -> None:
    """Records leave, raw memory does not: no source row, and a team memory search finds nothing."""
    _tool_session(machine, "s-1", "FAILED tests/test_cache.py::test_flaky_walrus")
    _ok("index")
    _ok("team", "init")
    out = _ok("team", "push")
    assert "raw memory" not in out
    assert _rows(machine.dsn, "SELECT count(*) FROM pbot_memory") == [(0,)]
    assert _memory_search("walrus")["total"] == 1  # local raw memory has it
    assert _memory_search("--team", "walrus")["total"] == 0
    assert "raw memory: off" in _ok("team", "status")


def test_push_search_and_recall_through_the_cli(machine: TeamSpace) -> None:
    _raw_memory(machine)
    _tool_session(
        machine, "s-1", "collected 12 items\nFAILED tests/test_cache.py::test_flaky_walrus\n数据库 timeout"
    )
    _ok("index")
    _ok("team", "init")
    out = _ok("team", "push")
    assert "raw memory: pushed 4 sources of 1 sessions" in out
    assert "raw memory: pushed 0 sources of 0 sessions" in _ok("team", "push")  # a replay sends nothing

    found = _memory_search("--team", "FLAKY_walrus")
    assert found["total"] == 1
    (hit,) = found["hits"]
    assert (hit["machine"], hit["user"], hit["workspace"]) == ("laptop", "alice", "proj")
    assert hit["kind"] == "tool" and hit["line"] == 3 and hit["section"]["title"] == "result"
    assert "test_flaky_walrus" in hit["snippet"]
    local = _memory_search("flaky_walrus")
    assert local["hits"][0]["handle"] == hit["handle"]
    assert (local["hits"][0]["line"], local["hits"][0]["snippet"]) == (hit["line"], hit["snippet"])
    page = json.loads(_ok("recall", "--team", "--json", hit["handle"]))
    assert page["text"].startswith("bash: pytest -q\ncollected 12 items")
    assert _memory_search("--team", "数")["total"] == _memory_search("数")["total"] == 1
    assert _memory_search("--team", "--match", "terms", "timeouts")["total"] == 1
    listed = _memory_search("--team")
    assert listed["total"] == _memory_search()["total"] == 4
    human = _ok("memory", "search", "--team", "walrus")
    assert "alice@laptop · proj" in human
    refused = invoke("memory", "search", "--team", "--leaf", "abc", "walrus")
    assert refused.returncode == 2 and "only" in refused.stderr


def test_the_tools_take_the_team_scope(machine: TeamSpace) -> None:
    from pbot_watch.config import load_settings
    from pbot_watch.tools.registry import call

    _raw_memory(machine)
    _tool_session(machine, "s-1", "the walrus cache was cold")
    _ok("index")
    _ok("team", "init")
    _ok("team", "push")
    settings = load_settings()
    found = call("search_memory", {"query": "walrus cache", "scope": "team"}, settings)
    assert found.structured is not None and found.structured["total"] == 1
    assert "from: laptop (alice), workspace proj" in found.text
    handle = found.structured["hits"][0]["handle"]
    page = call("recall_memory", {"handle": handle, "scope": "team"}, settings)
    assert page.structured is not None and "walrus cache was cold" in page.structured["text"]
    unknown = call("recall_memory", {"handle": "#nope", "scope": "team"}, settings)
    assert unknown.failure is not None


def test_a_planted_secret_never_reaches_the_database(machine: TeamSpace) -> None:
    """With redaction off, raw memory keeps the secret; the gate still keeps it home, and counts it."""
    _raw_memory(machine, extra="[privacy]\nredact = false")
    _tool_session(machine, "s-1", f"export OPENAI_API_KEY={PLANTED}\nwalrus ok")
    _ok("index")
    assert _memory_search(PLANTED)["total"] == 1  # there, locally (the person turned redaction off)
    _ok("team", "init")
    out = _ok("team", "push")
    assert "held back by the redaction gate: 1 sources" in out
    with psycopg.connect(machine.dsn) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public' "
            "AND data_type IN ('text', 'jsonb', 'tsvector') AND table_name LIKE 'pbot_%'"
        ).fetchall()
        assert ("pbot_memory", "text_lower") in columns
        for table, column in columns:
            # The whole key, and its body alone (a terms vector would hold it as a lexeme).
            for piece in (PLANTED, PLANTED.removeprefix("sk-")):
                found = conn.execute(
                    f"SELECT count(*) FROM {table} WHERE {column}::text ILIKE %s", (f"%{piece}%",)
                ).fetchone()
                assert found == (0,), f"{table}.{column}"
        assert conn.execute("SELECT count(*) FROM pbot_memory").fetchone() == (3,)  # the rest left
    assert "sources held back by the redaction gate: 1" in _ok("team", "status")


def test_the_allow_list_holds(machine: TeamSpace) -> None:
    other = machine.workspace.parent / "secret-project"
    other.mkdir()
    _raw_memory(machine)
    _tool_session(machine, "s-home", "walrus kept home", workspace=other)
    _tool_session(machine, "s-proj", "walrus may leave")
    _ok("index")
    _ok("team", "init")
    _ok("team", "push")
    assert _rows(machine.dsn, "SELECT DISTINCT session_id, workspace FROM pbot_memory") == [
        ("s-proj", "proj")
    ]
    assert _memory_search("--team", "walrus")["total"] == 1
    # Allowing the other workspace later pushes its sessions at the next push.
    _raw_memory(machine, workspaces=[str(machine.workspace), str(other)])
    _ok("team", "push")
    assert _memory_search("--team", "walrus")["total"] == 2


def test_replay_restart_lost_ledger_and_two_pushers_give_one_copy(machine: TeamSpace) -> None:
    _raw_memory(machine)
    for n in range(3):
        _tool_session(machine, f"s-{n}", f"output {n} of the walrus job")
    _ok("index")
    _ok("team", "init")
    _ok("team", "push")
    count = "SELECT count(*), count(DISTINCT (machine, session_id, entry_id, part)) FROM pbot_memory"
    assert _rows(machine.dsn, count) == [(12, 12)]
    state = machine.home / "state" / "pbot-watch"
    (state / "team-push.db").unlink()  # a lost ledger: everything is offered again, nothing doubles
    assert "pushed 0 sources of 3 sessions" in _ok("team", "push")
    assert _rows(machine.dsn, count) == [(12, 12)]

    # Two pushers of this machine at once (the service and `team push`), each with its own ledger.
    from pbot_watch.config import load_settings
    from pbot_watch.query import run_query
    from pbot_watch.team.gate import secret_gate
    from pbot_watch.team.push import TeamPusher

    for n in range(3, 8):
        _tool_session(machine, f"s-{n}", f"output {n} of the walrus job")
    settings = load_settings()
    copies = []
    for name in ("one", "two"):
        own = machine.home / name
        own.mkdir()
        shutil.copy(state / "team-push.db", own / "team-push.db")
        copies.append(TeamPusher(settings.model_copy(update={"state_dir": own}), machine.dsn, secret_gate()))
    errors: list[BaseException] = []

    def push(pusher: TeamPusher) -> None:
        try:
            run_query(settings, lambda query: pusher.push_memory(query.index), memory=True)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)
        finally:
            pusher.close()

    threads = [threading.Thread(target=push, args=(pusher,)) for pusher in copies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    assert _rows(machine.dsn, count) == [(32, 32)]
    assert _memory_search("--team", "walrus job")["total"] == _memory_search("walrus job")["total"] == 8


def test_the_team_follows_the_current_branch(machine: TeamSpace) -> None:
    """A /tree move takes the abandoned branch's sources out; a compaction relabels what it left behind."""
    _raw_memory(machine)
    pi = PiSession("s-1", str(machine.workspace))
    first = pi.user("first walrus question")
    pi.assistant("first answer")
    pi.user("an abandoned narwhal idea")
    pi.assistant("narwhal answer")
    path = pi.write(machine.sessions / "s-1.jsonl")
    _ok("team", "init")
    _ok("team", "push")
    assert _memory_search("--team", "narwhal")["total"] == 2
    since = len(pi.entries)
    pi.branch_at(first)
    kept = pi.assistant("walrus answer on the new branch")
    pi.compaction(kept)
    pi.user("after the compaction, walrus again")
    pi.append_to(path, since)
    _ok("team", "push")
    assert _memory_search("--team", "narwhal")["total"] == _memory_search("narwhal")["total"] == 0
    team = _memory_search("--team", "walrus")
    local = _memory_search("walrus")
    assert (team["total"], local["total"]) == (3, 3), (team, local)
    assert [h["context"] for h in team["hits"]] == [h["context"] for h in local["hits"]]
    assert team["hits"][0]["context"] == "historical"
