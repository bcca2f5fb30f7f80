"""A session id may be given as a unique prefix, as Pi's ``--session`` takes one."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pbot_watch.config import Settings
from pbot_watch.tools.registry import Failure, call
from tests.support.cli import invoke
from tests.support.pi_sessions import PiSession, jsonl

IDS = ("01a228f5-aaaa-7000-8000-000000000001", "01a228f5-aaab-7000-8000-000000000002")


@pytest.fixture
def two_sessions(tmp_path: Path) -> None:
    root = Path(os.environ["PI_CODING_AGENT_DIR"]) / "sessions" / "--work--"
    root.mkdir(parents=True)
    workspace = tmp_path / "work"
    workspace.mkdir()
    for n, session_id in enumerate(IDS):
        pi = PiSession(session_id=session_id, cwd=str(workspace))
        pi.turn(f"the walnut question number {n}", "an answer")
        (root / f"s{n}.jsonl").write_bytes(jsonl([pi.header(), *pi.entries]))
    assert 0 == invoke("index").returncode


@pytest.mark.usefixtures("two_sessions")
class TestPrefix:
    def test_search_takes_a_unique_prefix(self) -> None:
        found = json.loads(invoke("search", "walnut", "--session", "01a228f5-aaab", "--json").stdout)
        assert [IDS[1]] == [m["sessionId"] for m in found["matches"]]

    def test_an_ambiguous_prefix_names_the_sessions(self) -> None:
        done = invoke("search", "walnut", "--session", "01a228f5-aaa")
        assert 2 == done.returncode
        assert f"is the start of several sessions ({IDS[0]}, {IDS[1]}): give more of it" in done.stderr

    def test_memory_search_takes_a_unique_prefix(self) -> None:
        found = json.loads(
            invoke("memory", "search", "walnut", "--session", "01a228f5-aaaa", "--json").stdout
        )
        assert found["hits"] and {IDS[0]} == {h["sessionId"] for h in found["hits"]}

    def test_tools_take_a_unique_prefix(self) -> None:
        answer = call("history_search", {"query": "walnut", "sessionId": "01a228f5-aaab"}, Settings())
        assert answer.structured is not None
        assert [IDS[1]] == [m["sessionId"] for m in answer.structured["matches"]]
        refused = call("search_memory", {"query": "walnut", "sessionId": "01a228f5-aaa"}, Settings())
        assert Failure.ARGUMENTS == refused.failure and "several sessions" in refused.text
