"""Hostile input beside a good session: no file, record or line stops the commands for the others.

Each test replays an adversarial user's repro. The user is a scratch one (``HOME``, ``XDG_*`` and
``PI_CODING_AGENT_DIR`` in a temporary folder: the ``isolated_home`` fixture) whose Pi folder
holds one good session that says ``findme``, beside the bad thing: an id or a ``cwd`` holding a
lone surrogate, a file name that is not UTF-8, a record file nested past any decoder, a protocol
line nested as deep, a timestamp at the edge of Python's years. The commands run for real:
``index``, ``search`` and ``memory search`` through the CLI, ``run`` as a subprocess, ``pi serve``
and ``pbot-watch mcp`` as the children their clients start. Each row of "What pbot-watch does
with odd files" in ``docs/service.md`` names the test here that plays it.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pbot_watch.history.nodes import RECORD_NAMESPACE
from tests.memory.work import budget_session
from tests.pi_bridge.child import ServeChild
from tests.support.cli import invoke, pbot_watch_executable
from tests.support.pi_sessions import PiSession
from tests.support.service import ServiceProcess, wait_for

GOOD = "01a228f5-0000-7000-8000-00000000f001"
BAD = "01a228f5-0000-7000-8000-00000000f002"
LONE = "\udfff"
DEEP = 100_000
# Ends of Python's datetime that a timestamp with an offset crosses when converted.
EDGE_TIMES = ("9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00")


def escaped(pi: PiSession) -> bytes:
    """The session's lines as ``JSON.stringify`` writes a lone surrogate: escaped, ``"\\udfff"``."""
    return b"".join(json.dumps(entry).encode("ascii") + b"\n" for entry in pi.lines())  # type: ignore[arg-type]


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@dataclass
class Neighbours:
    """The scratch user's Pi session root, its one project folder, and the good session's workspace."""

    root: Path
    folder: Path
    workspace: Path
    good: PiSession

    @property
    def history(self) -> Path:
        return self.workspace / ".pi" / "pbot" / "history"

    def bad(self, pi: PiSession, name: str = "bad.jsonl") -> Path:
        path = self.folder / name
        path.write_bytes(escaped(pi))
        return path


@pytest.fixture
def neighbours(isolated_home: Path, tmp_path: Path) -> Neighbours:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    root = isolated_home / ".pi" / "agent" / "sessions"
    good = PiSession(GOOD, str(workspace))
    good.turn("findme question", "findme answer")
    good.write(root / "--ws--" / "good.jsonl")
    return Neighbours(root, root / "--ws--", workspace, good)


def bad_session(workspace: Path, session_id: str = BAD, cwd: str | None = None) -> PiSession:
    pi = PiSession(session_id, cwd if cwd is not None else str(workspace))
    pi.turn("findme too, from the bad one", "an answer")
    return pi


def served(*, also: tuple[str, ...] = ()) -> dict[str, subprocess.CompletedProcess[str]]:
    """``index``, then ``search findme``, ``memory search findme`` and both listings without a query.

    Each must exit 0 and show the good session; ``also`` are other texts every search must show.
    """
    done = {"index": invoke("index")}
    assert 0 == done["index"].returncode, done["index"].stderr
    for args in (("search", "findme"), ("search",), ("memory", "search", "findme"), ("memory", "search")):
        result = invoke(*args)
        assert 0 == result.returncode, (args, result.stderr)
        assert "findme question" in result.stdout, (args, result.stdout)
        for text in also:
            assert text in result.stdout, (args, text, result.stdout)
        done[" ".join(args)] = result
    return done


def records(folder: Path, skip: str) -> dict[str, dict[str, Any]]:
    """The records in ``folder`` by session id, the planted file ``skip`` left out."""
    found = (json.loads(p.read_bytes()) for p in folder.glob("*.json") if p.name != skip)
    return {record["sessionId"]: record for record in found}


def said(done: subprocess.CompletedProcess[str]) -> str:
    """Everything a command printed, its lines joined: rich wraps a long warning, even inside a word."""
    return "".join((done.stdout + done.stderr).splitlines())


def service_serves(neighbours: Neighbours, tmp_path: Path) -> None:
    """``run`` starts, catches up, takes an append to the good session into its record, stops on SIGTERM."""
    with ServiceProcess([neighbours.root], None, log=tmp_path / "service.log").start() as service:
        since = len(neighbours.good.entries)
        neighbours.good.turn("findme later", "later answer")
        neighbours.good.append_to(neighbours.folder / "good.jsonl", since)

        def has_later() -> bool:
            record = records(neighbours.history, skip="evil.json").get(GOOD)
            return record is not None and any("findme later" in n.get("text", "") for n in record["nodes"])

        wait_for(has_later, what="the append to reach the good session's record", details=service.log_tail)
        assert 0 == service.stop()


# ---- records a repository ships ----------------------------------------------------------------
class TestHostileRecordFiles:
    """A file in a workspace's ``.pi/pbot/history/`` (a cloned repository can ship one)."""

    @pytest.mark.parametrize(
        "text",
        [
            nested(DEEP),
            '{"id":"evil","sessionId":"evil-s","nodes":[' + nested(DEEP) + "]}",
            '{"id":"evil","sessionId":"evil-s","name":' + nested(DEEP) + ',"nodes":[]}',
        ],
        ids=["deep-array", "record-with-deep-node", "record-with-deep-name"],
    )
    def test_index_and_search_go_on(self, neighbours: Neighbours, text: str) -> None:
        """Nested 100,000 deep: one unreadable record with a warning; every command serves the rest."""
        neighbours.history.mkdir(parents=True)
        (neighbours.history / "evil.json").write_text(text)
        done = served()
        assert "evil.json: not a readable history record; skipped" in said(done["search findme"])

    @pytest.mark.slow
    @pytest.mark.timeout(90)
    def test_service_starts_and_serves(self, neighbours: Neighbours, tmp_path: Path) -> None:
        """The same file at the service's start: it runs and keeps the good session's record current."""
        neighbours.history.mkdir(parents=True)
        (neighbours.history / "evil.json").write_text(nested(DEEP))
        service_serves(neighbours, tmp_path)


class TestDeepHandle:
    """A forged memory handle that decodes to JSON nested 100,000 deep (a model can send one)."""

    def test_recall_says_unknown_handle(self, neighbours: Neighbours) -> None:
        """``recall`` answers "unknown memory handle", exit 4, instead of a ``RecursionError``."""
        body = base64.urlsafe_b64encode(nested(DEEP).encode()).decode().rstrip("=")
        done = invoke("recall", f"m1.{body}")
        assert 4 == done.returncode, done.stderr
        assert done.stderr.startswith("pbot-watch: unknown memory handle")


# ---- protocol lines -------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.timeout(120)
class TestDeepProtocolLines:
    """One line nested 100,000 deep to ``pi serve`` or ``pbot-watch mcp``: an error reply, then the next."""

    def test_pi_serve(self, neighbours: Neighbours) -> None:
        """``pi serve`` answers a protocol error and goes on answering."""
        with ServeChild() as child:
            child.send_raw(nested(DEEP).encode() + b"\n")
            error = child.reply()
            assert {"id": None, "kind": "protocol"} == {"id": error["id"], "kind": error["error"]["kind"]}
            assert "nested deeper than pbot-watch reads" in error["error"]["message"]
            answer = child.ask("tool", {"name": "search_memory", "arguments": {"query": "findme"}})
            assert "findme question" in answer["result"]["text"]
            assert 0 == child.close()

    def test_mcp(self, neighbours: Neighbours) -> None:
        """``pbot-watch mcp`` answers -32700 with a null id and goes on to the next message."""
        replies = mcp_replies(nested(DEEP), *INITIALIZE, tool_call(2, "search_memory", {"query": "findme"}))
        assert [(None, -32700)] == [(r["id"], r["error"]["code"]) for r in replies if "error" in r]
        assert "findme question" in by_id(replies, 2)["result"]["content"][0]["text"]


INITIALIZE = (
    json.dumps({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }),
    json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
)  # fmt: skip


def tool_call(request_id: int, name: str, arguments: dict[str, Any]) -> str:
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call"}
    return json.dumps({**message, "params": {"name": name, "arguments": arguments}})


def by_id(replies: list[dict[str, Any]], request_id: int) -> dict[str, Any]:
    return next(r for r in replies if r.get("id") == request_id)


def mcp_replies(*lines: str) -> list[dict[str, Any]]:
    """Lines sent to ``pbot-watch mcp``, stdin held open until the last request is answered."""
    wanted = max(json.loads(line)["id"] for line in lines if line.startswith("{") and '"id"' in line)
    replies: list[dict[str, Any]] = []
    with subprocess.Popen(
        [pbot_watch_executable(), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write("".join(f"{line}\n" for line in lines).encode())
        proc.stdin.flush()
        while not any(r.get("id") == wanted for r in replies):
            line = proc.stdout.readline()
            assert line, "pbot-watch mcp closed its stdout before answering"
            replies.append(json.loads(line))
        proc.stdin.close()
        assert 0 == proc.wait(timeout=60)
    return replies


class TestMcpLoneSurrogateArgument:
    """A tool argument with a lone surrogate (valid JSON) is answered as ``pi serve`` answers it."""

    @pytest.mark.slow
    @pytest.mark.timeout(120)
    def test_is_answered(self, neighbours: Neighbours) -> None:
        """Not -32600 "not a JSON-RPC 2.0 message": the tool runs, with U+FFFD in the surrogate's place."""
        assert 0 == invoke("index").returncode
        call = tool_call(2, "history_search", {"query": f"findme{LONE}"})
        replies = mcp_replies(*INITIALIZE, call)
        result = by_id(replies, 2)["result"]
        assert "findme\ufffd" in result["content"][0]["text"]


# ---- timestamps ---------------------------------------------------------------------------------
def edge_times(path: Path, moment: str) -> None:
    """Every entry's timestamp rewritten to ``moment``."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for entry in lines[1:]:
        entry["timestamp"] = moment
    path.write_text("".join(json.dumps(entry) + "\n" for entry in lines))


# Each edge, and the day and time its cue lines show (its own clock).
EDGE_CLOCKS = {EDGE_TIMES[0]: "12-31 23:59 ", EDGE_TIMES[1]: "01-01 00:00 "}


class TestTimestampsAtTheEdge:
    """``9999-12-31T23:59:59-14:00`` and ``0001-01-01T00:00:00+14:00``: shown on their own clock."""

    def test_search_and_memory_search(self, neighbours: Neighbours) -> None:
        """Listings and searches show the good session and the edge one, the edge times as written."""
        pi = bad_session(neighbours.workspace)
        pi.user("findme at the edge", timestamp=EDGE_TIMES[0])
        pi.assistant("edge answer", timestamp=EDGE_TIMES[1])
        neighbours.bad(pi)
        done = served()
        assert "9999-12-31 23:59" in done["search"].stdout
        assert "0001-01-01 00:00" in done["memory search"].stdout

    @pytest.mark.parametrize("moment", EDGE_TIMES)
    def test_cues(self, tmp_path: Path, moment: str) -> None:
        """``cues`` prints the block, times on their own clock, instead of an ``OverflowError``."""
        work = budget_session(tmp_path / "s.jsonl")
        edge_times(work.path, moment)
        done = invoke("cues", "--session-file", str(work.path))
        assert 0 == done.returncode, done.stderr
        assert done.stdout.startswith("Memory cues (batch 3)")
        assert EDGE_CLOCKS[moment] in done.stdout

    @pytest.mark.slow
    @pytest.mark.timeout(120)
    @pytest.mark.parametrize("moment", EDGE_TIMES)
    def test_pi_serve_cues(self, tmp_path: Path, moment: str) -> None:
        """``pi serve`` answers the cues, not "unavailable"."""
        work = budget_session(tmp_path / "s.jsonl")
        edge_times(work.path, moment)
        with ServeChild() as child:
            reply = child.ask("cues", {"sessionFile": str(work.path)})
            assert "result" in reply, reply
            assert 3 == reply["result"]["batch"]
            assert EDGE_CLOCKS[moment] in reply["result"]["block"]


# ---- ids and cwds --------------------------------------------------------------------------------
def surrogate_in(place: str, neighbours: Neighbours) -> PiSession:
    """The bad session of the repro: a lone surrogate in its header id, an entry's ids, or its cwd."""
    if place == "header-id":
        return bad_session(neighbours.workspace, session_id=f"{BAD}{LONE}")
    if place == "cwd":
        return bad_session(neighbours.workspace, cwd=f"{neighbours.workspace}{LONE}")
    pi = PiSession(BAD, str(neighbours.workspace))
    pi.user("findme too, from the bad one", id=f"u{LONE}")
    pi.assistant("an answer", id=f"a{LONE}", parent=f"u{LONE}")
    return pi


PLACES = ["header-id", "entry-ids", "cwd"]


class TestLoneSurrogateIds:
    """A lone surrogate (valid JSON, kept by Pi's and Python's parsers) where a key is expected."""

    @pytest.mark.parametrize("place", PLACES)
    def test_every_command_serves(self, neighbours: Neighbours, place: str) -> None:
        """``index``, ``search`` and ``memory search`` exit 0 and find the good session."""
        neighbours.bad(surrogate_in(place, neighbours))
        served()

    def test_header_id_names_a_well_formed_record(self, neighbours: Neighbours) -> None:
        """Its record is ``uuid5`` of the id with U+FFFD, its ``sessionId`` that id; search finds it."""
        neighbours.bad(surrogate_in("header-id", neighbours))
        done = served(also=("findme too, from the bad one",))
        record = records(neighbours.history, skip="").get(f"{BAD}\ufffd")
        assert record is not None
        assert str(uuid.uuid5(RECORD_NAMESPACE, f"{BAD}\ufffd")) == record["id"]
        assert "findme too" in done["search findme"].stdout

    def test_entry_ids_make_well_formed_node_ids(self, neighbours: Neighbours) -> None:
        """Node ids embed the well-formed entry id; ``memory search`` finds the bad session's text too."""
        neighbours.bad(surrogate_in("entry-ids", neighbours))
        done = served(also=("findme too, from the bad one",))
        record = records(neighbours.history, skip="")[BAD]
        assert [f"{record['id']}:0:a\ufffd"] == [n["id"] for n in record["nodes"] if n["kind"] == "exchange"]
        assert "findme too" in done["memory search findme"].stdout

    def test_cwd_is_a_workspace_that_does_not_exist(self, neighbours: Neighbours) -> None:
        """The cwd names no folder (Pi's own would be U+FFFD-decoded): skipped with a warning."""
        neighbours.bad(surrogate_in("cwd", neighbours))
        done = served()
        assert f"warning: workspace {neighbours.workspace}\ufffd no longer exists" in done["index"].stderr

    def test_mcp_search_memory(self, neighbours: Neighbours) -> None:
        """The MCP ``search_memory`` tool answers with both sessions' hits."""
        neighbours.bad(surrogate_in("entry-ids", neighbours))
        answer = mcp_tool_text("search_memory", {"query": "findme"})
        assert "findme question" in answer
        assert "findme too" in answer

    @pytest.mark.slow
    @pytest.mark.timeout(90)
    @pytest.mark.parametrize("place", PLACES)
    def test_service_starts_and_serves(self, neighbours: Neighbours, tmp_path: Path, place: str) -> None:
        """``run`` starts (it exited at every start), and its state is saved at the stop."""
        neighbours.bad(surrogate_in(place, neighbours))
        service_serves(neighbours, tmp_path)
        service_serves(neighbours, tmp_path)  # the saved state (paths, session ids) reads back


def mcp_tool_text(name: str, arguments: dict[str, Any]) -> str:
    replies = mcp_replies(*INITIALIZE, tool_call(2, name, arguments))
    result = by_id(replies, 2)["result"]
    assert not result.get("isError"), result
    return str(result["content"][0]["text"])


# ---- file names ----------------------------------------------------------------------------------
NOT_UTF8 = b"caf\xe9"


class TestNamesThatAreNotUtf8:
    """``b'caf\\xe9.jsonl'``, or a session folder so named: skipped with a warning naming it."""

    def plant(self, neighbours: Neighbours, *, folder: bool) -> bytes:
        pi = bad_session(neighbours.workspace)
        parent = (
            os.fsencode(neighbours.root) + b"/--" + NOT_UTF8 + b"--"
            if folder
            else os.fsencode(neighbours.folder)
        )
        os.makedirs(parent, exist_ok=True)
        path = parent + (b"/s.jsonl" if folder else b"/" + NOT_UTF8 + b".jsonl")
        with open(path, "wb") as out:
            out.write(escaped(pi))
        return parent if folder else path

    @pytest.mark.parametrize("folder", [False, True], ids=["file", "folder"])
    def test_every_command_serves(self, neighbours: Neighbours, folder: bool) -> None:
        """Every command exits 0 for the good session, and says which name it skipped."""
        planted = self.plant(neighbours, folder=folder).decode("utf-8", "backslashreplace")
        done = served()
        kind = "a folder" if folder else "a session file"
        warning = f"{planted}: {kind} whose name is not UTF-8 is skipped (rename it to index it)"
        assert warning in said(done["index"])
        assert warning in said(done["search findme"])
        assert warning in said(done["memory search findme"])

    def test_record_file_so_named(self, neighbours: Neighbours) -> None:
        """A record file so named in a workspace's history folder (a repository can ship one): skipped."""
        assert 0 == invoke("index").returncode
        good = next(neighbours.history.glob("*.json"))
        evil = os.fsencode(neighbours.history) + b"/" + NOT_UTF8 + b".json"
        with open(evil, "wb") as out:
            out.write(good.read_bytes().replace(GOOD.encode(), BAD.encode()))
        done = served()
        shown = evil.decode("utf-8", "backslashreplace")
        assert f"{shown}: a record file whose name is not UTF-8 is skipped" in said(done["search findme"])

    @pytest.mark.slow
    @pytest.mark.timeout(90)
    @pytest.mark.parametrize("folder", [False, True], ids=["file", "folder"])
    def test_service_at_start_and_while_running(
        self, neighbours: Neighbours, tmp_path: Path, folder: bool
    ) -> None:
        """At start the log names it; made while the service runs, it is ignored; the service goes on."""
        self.plant(neighbours, folder=folder)
        log = tmp_path / "service.log"
        with ServiceProcess([neighbours.root], None, log=log).start() as service:
            assert "whose name is not UTF-8 is skipped" in log.read_text()
            pi = bad_session(neighbours.workspace)
            with open(os.fsencode(neighbours.folder) + b"/" + NOT_UTF8 + b"-2.jsonl", "wb") as out:
                out.write(escaped(pi))
            since = len(neighbours.good.entries)
            neighbours.good.turn("findme later", "later answer")
            neighbours.good.append_to(neighbours.folder / "good.jsonl", since)
            wait_for(
                lambda: "findme later" in json.dumps(records(neighbours.history, skip="").get(GOOD)),
                what="the good session's append in its record",
                details=service.log_tail,
            )
            assert 0 == service.stop()


def test_docs_rows_name_tests_that_exist() -> None:
    """Each row of docs/service.md that names a test here names one that exists."""
    import re
    import sys

    docs = (Path(__file__).parent.parent / "docs" / "service.md").read_text(encoding="utf-8")
    rows = [line for line in docs.splitlines() if "tests/test_hostile_input.py" in line]
    assert len(rows) >= 9
    module = sys.modules[__name__]
    for row in rows:
        for name in re.findall(r"`(Test\w+)(?:::(test_\w+))?", row.split("tests/test_hostile_input.py")[1]):
            cls = getattr(module, name[0])
            assert not name[1] or hasattr(cls, name[1]), (name, row)
