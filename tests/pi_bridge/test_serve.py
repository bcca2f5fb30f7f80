"""``pbot-watch pi serve``: the JSON-lines child of the Pi extension, as a real subprocess."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pbot_watch import __version__
from pbot_watch.config import load_settings
from pbot_watch.memory.cue_follow import FollowedCues, ledger_head, ledger_store
from tests.memory.work import Work, budget_session
from tests.pi_bridge.child import ServeChild
from tests.pi_bridge.test_ahead import WORDS, long_session
from tests.support.cli import invoke
from tests.support.pi_sessions import PiSession
from tests.support.service import age_today, fake_status, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]  # a real child process per test


@pytest.fixture
def child(isolated_home: Path) -> Iterator[ServeChild]:
    with ServeChild() as running:
        yield running


class TestQuickMethods:
    def test_hello(self, child: ServeChild, isolated_home: Path) -> None:
        """hello names the version, the pid and the service's status file."""
        result = child.ask("hello")["result"]
        assert __version__ == result["version"]
        assert child.proc.pid == result["pid"]
        assert str(isolated_home / "state" / "pbot-watch" / "status.json") == result["statusFile"]

    def test_footer_without_service(self, child: ServeChild) -> None:
        """With no service status file, the footer says the service is not running."""
        assert {"text": "pbot-watch: not running"} == child.ask("footer", {"installed": __version__})[
            "result"
        ]

    def test_footer_names_an_outdated_package(self, child: ServeChild) -> None:
        """An extension installed by another version hears that it should be reinstalled."""
        assert "run pbot-watch pi install" in child.ask("footer", {"installed": "0.0.1"})["result"]["text"]


class TestBadInput:
    def test_not_json(self, child: ServeChild) -> None:
        """A line that is not JSON gets a protocol error without an id, and the child goes on."""
        child.send_raw(b"{not json\n")
        reply = child.reply()
        assert reply["id"] is None
        assert "protocol" == reply["error"]["kind"]
        assert "not a JSON line" in reply["error"]["message"]
        assert "result" in child.ask("footer")

    def test_not_an_object(self, child: ServeChild) -> None:
        """A JSON value that is not a request object is a protocol error."""
        child.send_raw(b"[1, 2]\n")
        reply = child.reply()
        assert (None, "protocol") == (reply["id"], reply["error"]["kind"])

    def test_missing_method_keeps_the_id(self, child: ServeChild) -> None:
        """A request without a method is refused under its own id."""
        child.send_raw(b'{"id": 41, "params": {}}\n')
        reply = child.reply()
        assert 41 == reply["id"]
        assert "protocol" == reply["error"]["kind"]
        assert "method" in reply["error"]["message"]

    def test_unknown_method(self, child: ServeChild) -> None:
        """An unknown method is named, with the methods the child knows."""
        reply = child.ask("summon", {})
        assert "protocol" == reply["error"]["kind"]
        assert "unknown method 'summon'" in reply["error"]["message"]
        assert "footer" in reply["error"]["message"]

    def test_bad_params(self, child: ServeChild) -> None:
        """Params a method does not take are refused (unknown keys are errors)."""
        reply = child.ask("footer", {"verbose": True})
        assert "protocol" == reply["error"]["kind"]
        assert "verbose" in reply["error"]["message"]

    def test_string_ids_are_echoed(self, child: ServeChild) -> None:
        """An id may be a string; the reply carries it back."""
        child.send_raw(b'{"id": "a-7", "method": "footer"}\n')
        assert "a-7" == child.reply()["id"]

    def test_replies_are_ascii_lines(self, child: ServeChild) -> None:
        """Every non-ASCII character is escaped, so a reader may split on newline alone."""
        child.send_raw('{"id": 1, "method": "überprüfen\u2028"}\n'.encode())
        line = child.reply_line()
        assert line.endswith(b"\n")
        assert line.isascii()
        assert 1 == line.count(b"\n")

    def test_blank_lines_are_ignored(self, child: ServeChild) -> None:
        """Empty lines get no reply."""
        child.send_raw(b"\n  \n")
        assert "result" in child.ask("footer")


class TestLifetime:
    def test_end_of_input_stops_the_child(self, isolated_home: Path) -> None:
        """Closing stdin (Pi quit or died) makes the child exit 0."""
        with ServeChild() as child:
            child.ask("hello")
            assert 0 == child.close()

    def test_logs_go_to_stderr_only(self, isolated_home: Path) -> None:
        """stdout holds replies only; the start and stop are logged on stderr."""
        env = {**os.environ, "PBOT_WATCH_LOG_LEVEL": "info"}
        with ServeChild(env=env) as child:
            child.ask("hello")
            child.close()
            assert b"pi_child_started" in child.stderr
            assert b"pi_child_stopped" in child.stderr


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    """Two sessions: A says "quokka" and ran a failing test; B, another session, says "marmalade"."""
    root = tmp_path / "sessions"
    a = PiSession("session-a", file=root / "ws" / "a.jsonl")
    a.user("Plan the quokka migration.", id="a1")
    a.assistant(None, calls=[("c1", "bash", {"command": "npm test"})], id="a2")
    a.tool_result("3 failed: budget over limit", call_id="c1", name="bash", error=True, id="a3")
    a.assistant("The quokka tests fail.", id="a4")
    b = PiSession("session-b", file=root / "ws" / "b.jsonl")
    b.user("Marmalade for breakfast.", id="b1")
    b.assistant("Marmalade it is.", id="b2")
    return root


@pytest.fixture
def served(isolated_home: Path, sessions: Path, tmp_path: Path) -> Iterator[ServeChild]:
    archive = tmp_path / "archive"
    with ServeChild("--sessions", str(sessions), "--archive", str(archive)) as running:
        yield running


def tool(
    child: ServeChild, name: str, arguments: dict[str, Any], scope: dict[str, Any] | None = None
) -> dict[str, Any]:
    reply = child.ask("tool", {"name": name, "arguments": arguments, **({"scope": scope} if scope else {})})
    assert "result" in reply, reply
    return dict(reply["result"])


class TestToolCalls:
    def test_answer_has_text_and_structured_result(self, served: ServeChild) -> None:
        """A tool call returns the text the model reads and the CLI's JSON."""
        answer = tool(served, "search_memory", {"query": "quokka"})
        assert answer["failure"] is None
        assert "quokka" in answer["text"]
        assert {"session-a"} == {hit["sessionId"] for hit in answer["structured"]["hits"]}

    def test_no_match_is_a_result(self, served: ServeChild) -> None:
        """Nothing found is an answer without failure, saying so."""
        answer = tool(served, "search_memory", {"query": "zanthoxylum"})
        assert (None, 0) == (answer["failure"], answer["structured"]["total"])
        assert "No sources matching" in answer["text"]

    def test_bad_arguments_say_fix_the_arguments(self, served: ServeChild) -> None:
        """Arguments out of range come back as an "arguments" failure naming the fix."""
        answer = tool(served, "search_memory", {"query": "quokka", "limit": 99})
        assert "arguments" == answer["failure"]
        assert "limit: must be at most 50" in answer["text"]
        assert answer["structured"] is None

    def test_unknown_tool(self, served: ServeChild) -> None:
        """An unknown tool name is the caller's to fix."""
        answer = tool(served, "forget_everything", {})
        assert "arguments" == answer["failure"]
        assert "Unknown tool 'forget_everything'" in answer["text"]

    def test_tool_params_must_name_a_tool(self, served: ServeChild) -> None:
        """A tool request without a name is a protocol error, not a tool failure."""
        reply = served.ask("tool", {"arguments": {}})
        assert "protocol" == reply["error"]["kind"]

    def test_footer_answers_while_a_query_runs(self, served: ServeChild) -> None:
        """footer is answered on the reader thread: a query in progress does not hold it up."""
        first = served.send("tool", {"name": "search_memory", "arguments": {"query": "quokka"}})
        second = served.send("footer")
        ids = [served.reply()["id"], served.reply()["id"]]
        assert {first, second} == set(ids)


class TestScope:
    def test_memory_is_pinned_to_the_calling_session(self, served: ServeChild, sessions: Path) -> None:
        """With a scope, search_memory sees only that session's branch."""
        scope = {"sessionFile": str(sessions / "ws" / "a.jsonl"), "sessionId": "session-a", "leaf": "a4"}
        assert 0 == tool(served, "search_memory", {"query": "marmalade"}, scope)["structured"]["total"]
        assert tool(served, "search_memory", {"query": "quokka"}, scope)["structured"]["total"] > 0

    def test_arguments_cannot_widen_the_scope(self, served: ServeChild, sessions: Path) -> None:
        """Naming another session in the arguments is refused inside a scope."""
        scope = {"sessionFile": str(sessions / "ws" / "a.jsonl"), "sessionId": "session-a"}
        answer = tool(served, "search_memory", {"query": "marmalade", "sessionId": "session-b"}, scope)
        assert "arguments" == answer["failure"]

    def test_recall_of_another_session_is_refused(self, served: ServeChild, sessions: Path) -> None:
        """A handle from another session is unknown inside the scope."""
        other = tool(served, "search_memory", {"query": "marmalade"})["structured"]["hits"][0]["handle"]
        scope = {"sessionFile": str(sessions / "ws" / "a.jsonl"), "sessionId": "session-a"}
        assert "arguments" == tool(served, "recall_memory", {"handle": other}, scope)["failure"]
        assert tool(served, "recall_memory", {"handle": other})["failure"] is None


class TestKilled:
    def test_a_killed_child_leaves_a_working_index(
        self, isolated_home: Path, sessions: Path, tmp_path: Path
    ) -> None:
        """kill -9 in the middle of a call; a new child answers the same call in full."""
        args = ("--sessions", str(sessions), "--archive", str(tmp_path / "archive"))
        with ServeChild(*args) as first:
            first.send("tool", {"name": "search_memory", "arguments": {"query": "quokka"}})
            first.proc.send_signal(signal.SIGKILL)
            assert -signal.SIGKILL == first.proc.wait(timeout=30)
        with ServeChild(*args) as second:
            answer = tool(second, "search_memory", {"query": "quokka"})
        assert answer["failure"] is None
        assert answer["structured"]["total"] > 0


class TestCues:
    def test_block_is_what_pbot_watch_cues_prints(self, child: ServeChild, tmp_path: Path) -> None:
        """The cue block of a compacted branch is exactly the text of `pbot-watch cues`."""
        path = tmp_path / "budget.jsonl"
        budget_session(path)
        printed = invoke("cues", "--session-file", str(path), "--context-window", "32000")
        assert 0 == printed.returncode, printed.stderr
        reply = child.ask("cues", {"sessionFile": str(path), "contextWindow": 32000})["result"]
        assert printed.stdout.rstrip("\n") == reply["block"]
        assert 3 == reply["batch"]

    def test_the_cues_table_caps_or_disables_the_block(self, isolated_home: Path, tmp_path: Path) -> None:
        """[cues] max_tokens caps the block (as `pbot-watch cues` shows it); enabled = false gives none."""
        path = tmp_path / "budget.jsonl"
        budget_session(path)
        config = isolated_home / "config" / "pbot-watch" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text("[cues]\nmax_tokens = 120\n")
        printed = invoke("cues", "--session-file", str(path), "--json")
        capped = json.loads(printed.stdout)
        assert (120, True) == (capped["maxTokens"], 0 < capped["tokens"] <= 120)
        with ServeChild() as running:
            reply = running.ask("cues", {"sessionFile": str(path)})["result"]
        assert capped["text"] == reply["block"]
        config.write_text("[cues]\nenabled = false\n")
        with ServeChild() as running:
            assert running.ask("cues", {"sessionFile": str(path)})["result"]["block"] is None
        assert "disables them" in invoke("cues", "--session-file", str(path)).stdout

    def test_no_compaction_no_block(self, child: ServeChild, tmp_path: Path) -> None:
        """A branch that was never compacted has no block (null), batch 0."""
        work = Work(tmp_path / "fresh.jsonl")
        work.run("npm test")
        reply = child.ask("cues", {"sessionFile": str(work.path)})["result"]
        assert {"block": None, "batch": 0, "compactionId": None} == reply

    def test_a_new_compaction_gives_a_new_block(self, child: ServeChild, tmp_path: Path) -> None:
        """Asking again after the file grew by a compaction gives that compaction's batch."""
        work = Work(tmp_path / "grows.jsonl")
        work.run("npm test")
        work.compact()
        first = child.ask("cues", {"sessionFile": str(work.path)})["result"]
        assert first == child.ask("cues", {"sessionFile": str(work.path)})["result"]
        work.run("npm run build")
        work.compact()
        second = child.ask("cues", {"sessionFile": str(work.path)})["result"]
        assert (1, 2) == (first["batch"], second["batch"])
        assert "npm run build" in second["block"]

    def test_unknown_leaf_is_the_callers_to_fix(self, child: ServeChild, tmp_path: Path) -> None:
        """A leaf the file does not hold is an "arguments" error naming it."""
        work = Work(tmp_path / "s.jsonl")
        work.run("npm test")
        reply = child.ask("cues", {"sessionFile": str(work.path), "leaf": "no-such-entry"})
        assert "arguments" == reply["error"]["kind"]
        assert "no-such-entry" in reply["error"]["message"]

    def test_missing_file_is_unavailable(self, child: ServeChild, tmp_path: Path) -> None:
        """A session file that cannot be read makes the cues unavailable, and the child goes on."""
        reply = child.ask("cues", {"sessionFile": str(tmp_path / "gone.jsonl")})
        assert "unavailable" == reply["error"]["kind"]
        assert "result" in child.ask("footer")

    def test_not_a_session(self, child: ServeChild, tmp_path: Path) -> None:
        """A file that is no Pi session is refused."""
        other = tmp_path / "notes.jsonl"
        other.write_text('{"hello": "world"}\n')
        assert "arguments" == child.ask("cues", {"sessionFile": str(other)})["error"]["kind"]


class TestOddSessionFiles:
    """Cues of a path that is no regular file: refused at once, and the child stays responsive."""

    @pytest.mark.parametrize("kind", ["fifo", "device"])
    def test_refused_without_reading(self, isolated_home: Path, tmp_path: Path, kind: str) -> None:
        """A FIFO (no writer: opening it would block) and /dev/zero (it never ends) are no sessions.

        Before the cue reader opened files through the sources guard, the FIFO blocked the
        worker for good (no later call was answered, the child did not exit when stdin closed)
        and /dev/zero grew the child by hundreds of MB a second.
        """
        if kind == "fifo":
            path = tmp_path / "s.jsonl"
            os.mkfifo(path)
        else:
            path = Path("/dev/zero")
        with ServeChild() as child:
            reply = child.ask("cues", {"sessionFile": str(path)})
            assert "arguments" == reply["error"]["kind"]
            assert "not a regular file" in reply["error"]["message"]
            work = Work(tmp_path / "good.jsonl")
            work.run("npm test")
            assert "result" in child.ask("cues", {"sessionFile": str(work.path)})
            rss_kb = int(
                next(
                    line.split()[1]
                    for line in Path(f"/proc/{child.proc.pid}/status").read_text().splitlines()
                    if line.startswith("VmRSS:")
                )
            )
            assert rss_kb < 300_000
            assert 0 == child.close(timeout=10)


class TestHistoryWithoutService:
    """The history tools search records, which the service writes; without it the child writes them."""

    def test_finds_text_appended_a_second_ago(self, served: ServeChild, sessions: Path) -> None:
        """With no service ever run, history_search finds the calling session's newest exchange."""
        path = sessions / "ws" / "a.jsonl"
        scope = {"sessionFile": str(path), "sessionId": "session-a"}
        first = tool(served, "history_search", {"query": "quokka tests fail"}, scope)
        assert first["structured"]["total"] == 1, first["text"]
        more = PiSession("session-a", leaf="a4")
        more.user("Did the wombat deploy finish?", id="a5")
        more.assistant("The wombat deploy finished at noon.", id="a6")
        more.append_to(path, 0)
        answer = tool(served, "history_search", {"query": "wombat deploy"}, scope)
        assert answer["structured"]["total"] == 1, answer["text"]
        node = answer["structured"]["matches"][0]["id"]
        read = tool(served, "history_read", {"id": node}, scope)
        assert "noon" in read["structured"]["text"]
        note = "Note: the pbot-watch service is not running (it has not run here): other sessions are"
        assert note in answer["text"].splitlines()[1]
        assert note in read["text"]

    def test_other_sessions_are_said_to_be_stale(
        self, isolated_home: Path, sessions: Path, tmp_path: Path
    ) -> None:
        """A stopped service: other sessions are as of its last heartbeat, and the text says when."""
        beat = fake_status(load_settings({}).state_dir, running=False, age=age_today(3600))
        scope = {"sessionFile": str(sessions / "ws" / "a.jsonl"), "sessionId": "session-a"}
        with ServeChild("--sessions", str(sessions), "--archive", str(tmp_path / "archive")) as child:
            answer = tool(child, "history_search", {"query": "marmalade"}, scope)
            mine = tool(child, "history_search", {"query": "quokka"}, scope)
        clock = datetime.fromtimestamp(beat).astimezone().strftime("%H:%M")
        assert (
            f"Note: the pbot-watch service is not running: other sessions are as of {clock}."
            in answer["text"]
        )
        assert 0 == answer["structured"]["total"]  # session B was never indexed: honest, not found
        assert mine["structured"]["total"] > 0


class TestPreparedAhead:
    def test_a_named_session_is_built_before_any_request(self, isolated_home: Path, tmp_path: Path) -> None:
        """Pi names its session at start: the idle child builds its raw memory, and the search finds it all."""
        path = tmp_path / "pi" / "s.jsonl"
        long_session(path)
        state = load_settings({}).state_dir
        with ServeChild("--sessions", str(tmp_path / "roots")) as child:
            reply = child.ask("session", {"sessionFile": str(path), "sessionId": "sess-ahead"})
            assert reply["result"] == {"cues": True, "memory": True}

            def built() -> bool | None:
                if not (state / "search.db").exists():
                    return None
                conn = sqlite3.connect(
                    f"file:{state / 'search.db'}?mode=ro", uri=True
                )  # only read: the child writes
                try:
                    row = conn.execute("SELECT size FROM mem_files WHERE path = ?", (str(path),)).fetchone()
                except sqlite3.OperationalError:  # the tables are not made yet
                    return None
                finally:
                    conn.close()
                return True if row is not None and row[0] == path.stat().st_size else None

            wait_for(built, timeout=60, what="the child to build the named session ahead")
            answer = tool(
                child, "search_memory", {"query": f"wombat{WORDS - 1}"}, scope={"sessionFile": str(path)}
            )
            assert answer["structured"]["sessionsNotSearched"] == 0
            assert answer["structured"]["hits"]
            assert child.ask("session", {})["result"] == {"cues": False, "memory": False}

    def test_the_child_deletes_saved_ledgers_of_files_that_are_gone(
        self, isolated_home: Path, tmp_path: Path
    ) -> None:
        """Once, in its first idle moment: the ledger of a deleted session goes, a live one stays."""
        store = ledger_store(load_settings({}).state_dir)
        kept, gone = tmp_path / "kept.jsonl", tmp_path / "gone.jsonl"
        for path in (kept, gone):
            Work(path).run("make", "done\n")
            followed = FollowedCues(store, saved_from=0)
            followed.ledger(path)
            followed.follow()
        gone.unlink()
        assert len(list(store.glob("*.cues"))) == 2
        with ServeChild() as child:
            assert "result" in child.ask("hello")
            wait_for(
                lambda: len(list(store.glob("*.cues"))) == 1 or None,
                timeout=30,
                what="the gone file's ledger deleted",
            )
        assert [ledger_head(p.read_bytes()).path for p in store.glob("*.cues")] == [os.path.realpath(kept)]
