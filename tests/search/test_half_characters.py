"""Half a character in a session (a lone surrogate) breaks no index, query or output.

Pi cuts a session's name at 80 UTF-16 units, which can split an emoji, and ``JSON.stringify``
writes the lone half as a ``\\udXXX`` escape; text pasted from elsewhere can hold one too. Every
query command and MCP tool must go on working, for that session and every other, and say what
is there: ``--json`` with the escape, as pbot's JSON would, a terminal with U+FFFD in its place.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pbot_watch.pi import untrusted
from tests.support.cli import invoke, run
from tests.test_mcp import World, connect


def entry_line(entry: dict[str, Any]) -> bytes:
    """A line as ``JSON.stringify`` writes it: a lone surrogate as its escape."""
    return (json.dumps(entry, separators=(",", ":")) + "\n").encode("ascii")


def session_file(path: Path, session_id: str, cwd: Path, question: str, name: str | None = None) -> None:
    """A session of one exchange (and a name, when given), written as Pi writes it."""
    stamp = "2026-11-29T20:00:0{}.000Z"
    lines = [
        {"type": "session", "version": 3, "id": session_id, "timestamp": stamp.format(0), "cwd": str(cwd)},
        {
            "type": "message",
            "id": f"u-{session_id}",
            "parentId": None,
            "timestamp": stamp.format(1),
            "message": {"role": "user", "content": [{"type": "text", "text": question}], "timestamp": 0},
        },
        {
            "type": "message",
            "id": f"a-{session_id}",
            "parentId": f"u-{session_id}",
            "timestamp": stamp.format(2),
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "ok"}],
                "stopReason": "stop",
                "timestamp": 0,
            },
        },
    ]
    if name is not None:
        lines.append(
            {
                "type": "session_info",
                "id": f"n-{session_id}",
                "parentId": f"a-{session_id}",
                "timestamp": stamp.format(3),
                "name": name,
            }
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(entry_line(e) for e in lines))


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    """The issue's sessions: a name whose 80-unit cut splits an emoji, an unrelated session, and
    text holding half a pair; indexed once. Returns the environment the commands run with."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PBOT_WATCH_", "XDG_"))},
        "HOME": str(tmp_path / "home"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "PI_CODING_AGENT_DIR": str(tmp_path / "pi"),
    }
    sessions = tmp_path / "pi" / "sessions" / "--w--"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    session_file(sessions / "s1.jsonl", "s1", workspace, "a" * 75 + "😀 help")
    session_file(sessions / "s2.jsonl", "s2", workspace, "unrelated")
    session_file(sessions / "s3.jsonl", "s3", workspace, "half \ud83d here", name="cut \ud83d name")
    assert 0 == run("index", env=env).returncode
    return env


class TestTheCommandLine:
    def test_every_session_stays_searchable(self, home: dict[str, str]) -> None:
        """A session whose name ends in half an emoji does not stop search for the others."""
        done = run("search", "unrelated", env=home)
        assert (0, "") == (done.returncode, done.stderr)
        assert "1 of 1" in done.stdout

    def test_json_writes_the_half_as_an_escape(self, home: dict[str, str]) -> None:
        """--json is valid JSON holding the lone surrogate, as JSON.stringify writes it."""
        done = run("search", "help", "--json", env=home)
        assert 0 == done.returncode, done.stderr
        assert "\\ud83d" in done.stdout
        (match,) = json.loads(done.stdout)["matches"]
        assert match["name"].endswith("\ud83d")

    def test_a_terminal_shows_a_replacement_character(self, home: dict[str, str]) -> None:
        """The plain output of search, read and memory search shows U+FFFD for the half."""
        found = run("search", "half", "--json", env=home)
        node = json.loads(found.stdout)["matches"][0]["id"]
        done = run("search", "help", env=home)  # the list cuts the name before its half
        assert (0, "") == (done.returncode, done.stderr)
        for args in (["search", "half"], ["read", node], ["memory", "search", "half"]):
            done = run(*args, env=home)
            assert (0, "") == (done.returncode, done.stderr), args
            assert "\ufffd" in done.stdout, args

    def test_text_with_half_a_pair_in_every_json_shape(self, home: dict[str, str]) -> None:
        """search, read, memory search and recall all answer --json about text holding half a pair."""
        (hit,) = json.loads(run("search", "half", "--json", env=home).stdout)["matches"]
        assert "\ud83d" in hit["snippet"]
        page = json.loads(run("read", hit["id"], "--json", env=home).stdout)
        assert "half \ud83d here" in page["text"]
        (memory,) = json.loads(run("memory", "search", "half", "--json", env=home).stdout)["hits"]
        recalled = json.loads(run("recall", memory["handle"], "--json", env=home).stdout)
        assert "half \ud83d here" == recalled["text"]

    def test_a_query_holding_half_a_character(self, home: dict[str, str]) -> None:
        """A query that is half a character (undecodable bytes on the command line) finds exactly that."""
        assert "1 of 1" in invoke("search", "\ud83d", env=home).stdout
        assert "no matches" in invoke("search", "\udcff", env=home).stdout
        assert 0 == invoke("memory", "search", "\ud83d", env=home).returncode


class TestMcp:
    def test_tools_answer_about_text_with_half_a_pair(self, home: dict[str, str], tmp_path: Path) -> None:
        """history_search, history_read and search_memory answer over MCP, U+FFFD standing in."""
        sessions = Path(home["PI_CODING_AGENT_DIR"]) / "sessions"
        world = World(tmp_path, sessions, tmp_path / "unused-archive", home, tmp_path / "mcp.log")
        with connect(world, args=["--sessions", str(sessions)]) as client:
            found, _text = client.ok("history_search", {"query": "help"})
            assert found["matches"][0]["name"].endswith("\ufffd")
            found, _text = client.ok("history_search", {"query": "half"})
            read, _text = client.ok("history_read", {"id": found["matches"][0]["id"]})
            assert "half \ufffd here" in read["text"]
            memory, _text = client.ok("search_memory", {"query": "half"})
            assert 1 == memory["total"]


class TestLoneSurrogateCheck:
    @settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(
        st.text(
            alphabet=st.sampled_from(["a", "é", "中", "😀", "\ud800", "\udbff", "\udc00", "\udfff"]),
            max_size=12,
        ),
        st.integers(min_value=1, max_value=4),
    )
    def test_is_the_regex_search(self, monkeypatch: pytest.MonkeyPatch, text: str, step: int) -> None:
        """A text holds a lone surrogate for the encoding check exactly when the regex finds one,
        wherever the pieces it is encoded in are cut."""
        monkeypatch.setattr(untrusted, "_SURROGATE_STEP", step)
        assert (untrusted.LONE_SURROGATE.search(text) is not None) == untrusted.has_lone_surrogate(text)
