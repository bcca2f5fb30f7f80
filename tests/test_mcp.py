"""``pbot-watch mcp`` through the MCP SDK's own stdio client, against the real server subprocess.

The archive is made the way a user makes it: Pi session files in a temporary session root
(written here, plus a real Pi-written fixture) and a one-shot ``pbot-watch index``. One server
process serves a whole test class through a blocking portal, so the many small calls stay fast.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, Tool

from pbot_watch.tools.text import HISTORY_NOTE, MEMORY_NOTE
from tests.support.cli import invoke, scratch_user
from tests.support.paths import FIXTURES, REPO
from tests.support.pi_sessions import PiSession, iso

SCRIPT = Path(sys.executable).parent / "pbot-watch"
SESSION_ID = "01a228f5-9999-7000-8000-00000000d3e1"
DEPLOY_STEPS = 25
LONG_ANSWER = "".join(f"段落{i:04d}: the rollout plan keeps going. " for i in range(900))
EPOCH = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


def stamp(seconds: int) -> str:
    return iso(EPOCH + timedelta(seconds=seconds))


def write_session(path: Path) -> None:
    """A Pi v3 session: 25 deploy steps, a Chinese exchange, a failing tool run and a long answer."""
    pi = PiSession(SESSION_ID, "/nonexistent/ws-deploy", start=EPOCH, step=timedelta(minutes=1))
    pi.info("Deploy notes", id="name0001", parent=None)
    for step in range(1, DEPLOY_STEPS + 1):
        pi.user(f"deploy step {step}: check the canary for service-{step}", id=f"u{step:07d}")
        pi.assistant(f"Step {step} is done; canary service-{step} is healthy.", id=f"a{step:07d}")
    pi.user("数据库迁移为什么失败了？", id="zh000001")
    pi.assistant("数据库迁移失败是因为 schema 版本不一致，已回滚到 v41。", id="zh000002")
    pi.user("run the budget tests", id="tool0001")
    pi.assistant(None, calls=[("call_1", "bash", {"command": "npm test"})], id="tool0002")
    output = "> budget@1.0.0 test\nPASS unit\nFAIL budget.spec.ts\n3 failed: budget over limit"
    trace = "\n".join(f"trace line {i}" for i in range(400))
    pi.tool_result(f"{output}\n{trace}", call_id="call_1", name="bash", error=True, id="tool0003")
    pi.assistant("Three budget tests fail: the limit check is off by one.", id="tool0004")
    pi.user("write the full rollout plan", id="long0001")
    pi.assistant(LONG_ANSWER, id="long0002")
    pi.write(path)


@dataclass
class World:
    """A temporary user: session root, central archive, and the environment the server runs with."""

    root: Path
    sessions: Path
    archive: Path
    env: dict[str, str]
    log: Path

    def args(self) -> list[str]:
        return ["--sessions", str(self.sessions), "--archive", str(self.archive)]


def make_world(root: Path) -> World:
    env = scratch_user(root / "home")
    sessions = root / "sessions"
    write_session(sessions / "--nonexistent-ws-deploy--" / "deploy.jsonl")
    shutil.copy(FIXTURES / "real-v3" / "02-tool-calls.jsonl", sessions / "02-tool-calls.jsonl")
    world = World(root, sessions, root / "archive", env, root / "mcp-stderr.log")
    done = invoke("index", *world.args(), env=env)
    assert done.returncode == 0, done.stderr
    return world


class Client:
    """A connected MCP client session, callable from synchronous tests."""

    def __init__(self, portal: BlockingPortal, session: ClientSession) -> None:
        self.portal = portal
        self.session = session

    def tools(self) -> list[Tool]:
        return self.portal.call(self.session.list_tools).tools

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> CallToolResult:
        return self.portal.call(self.session.call_tool, name, arguments)

    def ok(self, name: str, arguments: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
        """Call a tool that must succeed: its structured content (validated by the SDK) and its text."""
        result = self.call(name, arguments)
        text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
        assert not result.is_error, text
        assert result.structured_content is not None
        return result.structured_content, text

    def error(self, name: str, arguments: dict[str, Any] | None = None) -> str:
        """Call a tool that must fail as a tool error (not a protocol error); its message."""
        result = self.call(name, arguments)
        assert result.is_error, result
        assert result.structured_content is None
        return result.content[0].text  # type: ignore[union-attr]


@asynccontextmanager
async def _connect(params: StdioServerParameters, errlog: Any) -> AsyncIterator[ClientSession]:
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write, read_timeout_seconds=60) as session,
    ):
        await session.initialize()
        yield session


@contextmanager
def connect(world: World, *extra: str, args: list[str] | None = None) -> Iterator[Client]:
    params = StdioServerParameters(
        command=str(SCRIPT), args=["mcp", *(world.args() if args is None else args), *extra], env=world.env
    )
    with (
        world.log.open("a") as errlog,
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(_connect(params, errlog)) as session,
    ):
        yield Client(portal, session)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(tmp_path_factory.mktemp("mcp"))


@pytest.fixture(scope="module")
def client(world: World) -> Iterator[Client]:
    with connect(world) as connected:
        yield connected


def deploy_hits(client: Client, **arguments: Any) -> dict[str, Any]:
    return client.ok("history_search", {"query": "deploy step", **arguments})[0]


class TestListing:
    def test_four_tools(self, client: Client) -> None:
        """The server lists exactly the four history and memory tools."""
        assert sorted(t.name for t in client.tools()) == [
            "history_read", "history_search", "recall_memory", "search_memory",
        ]  # fmt: skip

    def test_schemas_are_exact(self, client: Client) -> None:
        """Each input schema names pbot's/pi-echo's parameters, their limits, and forbids anything else."""
        tools = {t.name: t for t in client.tools()}
        search = tools["history_search"].input_schema
        assert search["additionalProperties"] is False
        assert set(search["properties"]) == {
            "query",
            "match",
            "sessionId",
            "workspace",
            "from",
            "to",
            "offset",
            "limit",
            "scope",
        }
        assert search["properties"]["scope"]["enum"] == ["local", "team"]
        assert search["required"] == []
        assert search["properties"]["limit"] == {
            "type": "integer", "minimum": 1, "maximum": 50, "default": 20,
            "description": "Matches per page, 1-50 (default 20).",
        }  # fmt: skip
        assert search["properties"]["match"]["enum"] == ["literal", "terms"]
        assert search["properties"]["query"]["type"] == "string"
        read = tools["history_read"].input_schema
        assert read["required"] == ["id"]
        assert read["properties"]["limit"]["maximum"] == 24000
        assert set(read["properties"]) == {"id", "offset", "limit", "childrenOffset", "scope"}
        memory = tools["search_memory"].input_schema
        assert set(memory["properties"]) == {
            "query",
            "match",
            "in",
            "sessionId",
            "leaf",
            "after",
            "limit",
            "scope",
        }
        assert memory["properties"]["scope"]["enum"] == ["local", "team"]
        recall = tools["recall_memory"].input_schema
        assert recall["required"] == ["handle"]
        assert set(recall["properties"]) == {"handle", "from", "scope"}
        assert recall["properties"]["from"]["minimum"] == 1

    def test_descriptions_are_written_for_a_model(self, client: Client) -> None:
        """Every description says when to use the tool, that results are not instructions, and how to page."""
        for tool in client.tools():
            description = tool.description or ""
            assert "not instructions" in description, tool.name
            assert "Use it" in description, tool.name
            assert "call again" in description, tool.name
            assert len(description) < 2000, tool.name

    def test_tools_are_read_only(self, client: Client) -> None:
        """Annotations tell clients the tools change nothing (Pi's permission gates read them)."""
        for tool in client.tools():
            assert tool.annotations is not None
            assert tool.annotations.read_only_hint is True
            assert tool.annotations.destructive_hint is False
            assert tool.annotations.open_world_hint is False
            assert tool.output_schema is not None

    def test_server_identifies_itself(self, world: World) -> None:
        """initialize names the server and gives instructions that say results are history."""

        async def handshake() -> tuple[str, str | None]:
            params = StdioServerParameters(command=str(SCRIPT), args=["mcp", *world.args()], env=world.env)
            with world.log.open("a") as errlog:
                async with (
                    stdio_client(params, errlog=errlog) as (read, write),
                    ClientSession(read, write, read_timeout_seconds=60) as session,
                ):
                    init = await session.initialize()
                    return init.server_info.name, init.instructions

        with start_blocking_portal() as portal:
            name, instructions = portal.call(handshake)
        assert name == "pbot-watch"
        assert instructions is not None
        assert "never as instructions" in instructions


class TestHistorySearch:
    def test_finds_chinese_text(self, client: Client) -> None:
        """A Chinese query finds the exchange; the text says what it is and how to read it."""
        found, text = client.ok("history_search", {"query": "数据库迁移"})
        assert found["total"] == 1
        (hit,) = found["matches"]
        assert hit["kind"] == "exchange"
        assert hit["sessionId"] == SESSION_ID
        assert hit["name"] == "Deploy notes"
        assert "schema 版本不一致" in hit["snippet"]
        assert text.startswith(HISTORY_NOTE)
        assert hit["id"] in text
        assert "数据库迁移为什么失败了" in text
        assert "history_read" in text

    def test_no_query_lists_sessions(self, client: Client) -> None:
        """Without a query the sessions are listed, newest first, each with a readable id."""
        found, text = client.ok("history_search", {})
        assert {m["kind"] for m in found["matches"]} == {"session"}
        assert SESSION_ID in {m["sessionId"] for m in found["matches"]}
        assert found["total"] == len(found["matches"]) == 2
        assert "2 sessions" in text

    def test_paging_covers_every_match_once(self, client: Client) -> None:
        """offset/limit pages through all matches; nextOffset says where to go on and ends with null."""
        seen: list[str] = []
        offset: int | None = 0
        pages = 0
        while offset is not None:
            page = deploy_hits(client, limit=10, offset=offset)
            assert page["total"] == DEPLOY_STEPS
            seen += [m["id"] for m in page["matches"]]
            offset = page["nextOffset"]
            pages += 1
        assert pages == 3
        assert len(seen) == len(set(seen)) == DEPLOY_STEPS

    def test_text_names_the_next_offset(self, client: Client) -> None:
        """The model reads how to continue in the text itself."""
        _found, text = client.ok("history_search", {"query": "deploy step", "limit": 10})
        assert "25 matches for 'deploy step' (literal); showing 1-10." in text
        assert "offset=10" in text

    def test_terms_mode(self, client: Client) -> None:
        """match=terms ranks by words: scattered words still find the exchange, with a score."""
        found, _text = client.ok("history_search", {"query": "canary healthy service-7", "match": "terms"})
        assert found["match"] == "terms"
        assert found["matches"][0]["score"] is not None
        assert any("service-7" in m["snippet"] for m in found["matches"][:3])

    def test_time_range_and_session_filter(self, client: Client) -> None:
        """from/to keep nodes overlapping the range; sessionId keeps one session."""
        everything = deploy_hits(client, sessionId=SESSION_ID)["total"]
        early = deploy_hits(client, to=stamp(10 * 60))["total"]
        assert everything == DEPLOY_STEPS
        assert 0 < early < everything
        assert deploy_hits(client, sessionId="no-such-session")["total"] == 0

    def test_empty_result_suggests_other_words(self, client: Client) -> None:
        """No match is not an error; the text suggests how to search again."""
        found, text = client.ok("history_search", {"query": "zebra-unicorn"})
        assert found["total"] == 0
        assert "Try other words" in text


class TestHistoryRead:
    def test_reads_an_exchange_with_its_source(self, client: Client) -> None:
        """read returns the exchange text, its parents and the Pi entries it came from."""
        hit = client.ok("history_search", {"query": "数据库迁移"})[0]["matches"][0]
        page, text = client.ok("history_read", {"id": hit["id"]})
        assert "数据库迁移为什么失败了？" in page["text"]
        assert "已回滚到 v41" in page["text"]
        assert page["source"] == {"sessionId": SESSION_ID, "entryIds": ["zh000001", "zh000002"]}
        assert page["parents"]
        assert text.startswith(HISTORY_NOTE)
        assert "source entries: zh000001, zh000002" in text

    def test_text_paging_reassembles_the_whole_text(self, client: Client) -> None:
        """offset/limit in UTF-16 units page a long answer; the pages join to the full text."""
        hit = client.ok("history_search", {"query": "full rollout plan"})[0]["matches"][0]
        pieces: list[str] = []
        offset: int | None = 0
        total = 0
        while offset is not None:
            page, text = client.ok("history_read", {"id": hit["id"], "offset": offset, "limit": 5000})
            pieces.append(page["text"])
            total = page["totalLength"]
            if page["nextOffset"] is not None:
                assert f"offset={page['nextOffset']}" in text
            offset = page["nextOffset"]
        whole = "".join(pieces)
        assert len(pieces) > 2
        assert len(whole.encode("utf-16-le")) // 2 == total
        assert whole.startswith(client.ok("history_read", {"id": hit["id"], "limit": 24000})[0]["text"])
        assert LONG_ANSWER in whole

    def test_walks_down_from_a_parent(self, client: Client) -> None:
        """A parent lists its children; childrenOffset skips into them."""
        hit = deploy_hits(client, limit=1)["matches"][0]
        parent_id = hit["parents"][0]
        parent = client.ok("history_read", {"id": parent_id})[0]
        assert hit["id"] in [c["id"] for c in parent["children"]]
        later = client.ok("history_read", {"id": parent_id, "childrenOffset": 1})[0]
        assert [c["id"] for c in later["children"]] == [c["id"] for c in parent["children"]][1:]


class TestMemory:
    def test_finds_tool_output_and_recalls_it(self, client: Client) -> None:
        """A line of tool output is found with its handle; recall returns whole numbered lines."""
        found, text = client.ok("search_memory", {"query": "budget over limit"})
        hit = next(h for h in found["hits"] if h["kind"] == "tool")
        assert hit["line"] is not None
        assert "3 failed: budget over limit" in hit["snippet"]
        assert text.startswith(MEMORY_NOTE)
        assert hit["handle"] in text
        page, recalled = client.ok("recall_memory", {"handle": hit["handle"], "from": hit["line"]})
        assert page["text"].split("\n")[0] == "3 failed: budget over limit"
        assert page["fromLine"] == hit["line"]
        assert f"{hit['line']}| 3 failed: budget over limit" in recalled

    def test_hits_say_their_context(self, client: Client) -> None:
        """Each hit carries its context label, in the structured result and in the text, with the order rule."""
        found, text = client.ok("search_memory", {"query": "budget over limit"})
        assert {"retained"} == {h["context"] for h in found["hits"]}
        assert " lines · retained" in text
        assert "historical hits (they left your context" in text

    def test_recall_pages_by_lines(self, client: Client) -> None:
        """recall gives whole lines and nextLine until the end of the source."""
        hit = client.ok("search_memory", {"query": "trace line 399"})[0]["hits"][0]
        first, text = client.ok("recall_memory", {"handle": hit["handle"]})
        assert first["fromLine"] == 1
        lines = first["text"].split("\n")
        if first["nextLine"] is not None:
            assert f"from={first['nextLine']}" in text
            rest = client.ok("recall_memory", {"handle": hit["handle"], "from": first["nextLine"]})[0]
            lines += rest["text"].split("\n")
        assert lines[-1] == "trace line 399"

    def test_search_inside_one_source(self, client: Client) -> None:
        """in=<handle> returns every hit line of that source."""
        hit = client.ok("search_memory", {"query": "budget over limit"})[0]["hits"][0]
        inside = client.ok("search_memory", {"query": "trace line 1", "in": hit["handle"], "limit": 50})[0]
        assert inside["total"] == 111  # "trace line 1", "1x" and "1xx" of 0-399
        assert {h["handle"] for h in inside["hits"]} == {hit["handle"]}

    def test_cursor_paging(self, client: Client) -> None:
        """nextCursor continues the same search; pages do not repeat sources."""
        first = client.ok("search_memory", {"query": "deploy step", "limit": 10})[0]
        assert first["total"] == DEPLOY_STEPS
        second = client.ok(
            "search_memory", {"query": "deploy step", "limit": 10, "after": first["nextCursor"]}
        )[0]
        handles = [h["handle"] for h in first["hits"]] + [h["handle"] for h in second["hits"]]
        assert len(set(handles)) == 20

    def test_listing_sources(self, client: Client) -> None:
        """No query lists sources of each session's current branch."""
        found = client.ok("search_memory", {"limit": 50})[0]
        assert found["total"] > 50
        assert found["nextCursor"] is not None
        assert SESSION_ID in found["scope"]


class TestBadArguments:
    def test_search_limit_over_50(self, client: Client) -> None:
        """pbot's limit: at most 50 matches per page, said with the value given."""
        message = client.error("history_search", {"query": "x", "limit": 51})
        assert message == (
            "Invalid arguments for history_search: limit: must be at most 50 (got 51). "
            "Fix them and call history_search again."
        )

    def test_unknown_argument_suggests_the_right_one(self, client: Client) -> None:
        """A misspelt argument is refused, not ignored, with the likely name and the allowed ones."""
        message = client.error("history_search", {"qurey": "deploy"})
        assert "qurey: unknown argument; did you mean query?" in message
        assert "allowed: query, match, sessionId, workspace, from, to, offset, limit" in message

    def test_read_needs_an_id(self, client: Client) -> None:
        """A missing id says where ids come from."""
        message = client.error("history_read", {})
        assert "id: required. Node id from history_search" in message

    def test_wrong_types_and_choices(self, client: Client) -> None:
        """Every bad value is reported in one message."""
        message = client.error("history_search", {"limit": "many", "match": "fuzzy", "offset": -1})
        assert "limit: must be a whole number (got 'many')" in message
        assert "match: must be one of 'literal' or 'terms' (got 'fuzzy')" in message
        assert "offset: must be at least 0 (got -1)" in message

    def test_bad_date(self, client: Client) -> None:
        """An unparseable date names itself and shows the expected form."""
        message = client.error("history_search", {"query": "deploy", "from": "last tuesday"})
        assert "invalid time 'last tuesday'" in message
        assert "ISO date or time" in message

    def test_unknown_node(self, client: Client) -> None:
        """An id that is not in the archive sends the model back to search."""
        message = client.error("history_read", {"id": "nope:0:nope"})
        assert "unknown node id 'nope:0:nope'; search again" in message

    def test_read_limit_and_offset_past_end(self, client: Client) -> None:
        """read's limit is at most 24000; an offset past the text's end is refused."""
        hit = client.ok("history_search", {"query": "数据库迁移"})[0]["matches"][0]
        assert "limit: must be at most 24000 (got 24001)" in client.error(
            "history_read", {"id": hit["id"], "limit": 24001}
        )
        assert "past the end of the text" in client.error("history_read", {"id": hit["id"], "offset": 10**6})

    def test_bad_cursor_names_the_argument(self, client: Client) -> None:
        """A cursor from elsewhere is refused in the tool's words (after), not the CLI's (--after)."""
        first = client.ok("search_memory", {"query": "deploy step", "limit": 10})[0]
        message = client.error("search_memory", {"query": "budget", "after": first["nextCursor"]})
        assert "invalid cursor" in message
        assert "--" not in message
        assert "without after" in message

    def test_unknown_handle(self, client: Client) -> None:
        """A handle that names nothing says to search again."""
        message = client.error("recall_memory", {"handle": "bm9uZQ"})
        assert "search memory again" in message or "memory handle" in message

    def test_crafted_handle_with_a_huge_number_is_unknown(self, client: Client) -> None:
        """A handle carrying a 31-digit part is "unknown memory handle" (fix the arguments), not an internal failure."""
        hit = client.ok("search_memory", {"query": "budget over limit"})[0]["hits"][0]
        raw = json.dumps([hit["sessionId"], hit["entryId"], 10**30], separators=(",", ":")).encode()
        handle = "m1." + base64.urlsafe_b64encode(raw).decode().rstrip("=")
        for name, arguments in (
            ("recall_memory", {"handle": handle}),
            ("search_memory", {"query": "budget", "in": handle}),
        ):
            message = client.error(name, arguments)
            assert "unknown memory handle" in message
            assert "failed inside pbot-watch" not in message

    def test_recall_line_out_of_range(self, client: Client) -> None:
        """from past the last line names the source's range."""
        hit = client.ok("search_memory", {"query": "budget over limit"})[0]["hits"][0]
        message = client.error("recall_memory", {"handle": hit["handle"], "from": 100000})
        assert "outside this source (lines 1-" in message

    def test_unknown_tool(self, client: Client) -> None:
        """A tool that does not exist is a tool error listing the real ones."""
        message = client.error("pbot_history", {"action": "search"})
        assert "Unknown tool 'pbot_history'" in message
        assert "history_search" in message

    def test_server_survives_errors(self, client: Client) -> None:
        """After all those errors the same server still answers."""
        assert deploy_hits(client, limit=1)["total"] == DEPLOY_STEPS


class TestProcess:
    def test_logs_go_to_stderr_as_json(self, world: World, client: Client) -> None:
        """stdout carries only the protocol; the server's log lines are JSON on stderr."""
        client.ok("history_search", {"query": "deploy"})
        lines = [json.loads(line) for line in world.log.read_text().splitlines() if line.startswith("{")]
        started = [line for line in lines if line.get("event") == "mcp_server_started"]
        assert started
        assert started[0]["archive"] == str(world.archive)

    def test_empty_roots_answer_empty(self, tmp_path: Path) -> None:
        """With nothing indexed yet the tools answer with no results, not errors."""
        world = make_world(tmp_path)
        empty = tmp_path / "empty-sessions"
        empty.mkdir()
        with connect(world, args=["--sessions", str(empty), "--archive", str(tmp_path / "none")]) as fresh:
            assert fresh.ok("history_search", {"query": "deploy"})[0]["total"] == 0
            assert fresh.ok("search_memory", {"query": "deploy"})[0]["total"] == 0

    def test_workspace_archives_without_central_archive(self, tmp_path: Path) -> None:
        """Without --archive the records are found in each workspace, from the session headers."""
        workspace = tmp_path / "proj"
        workspace.mkdir()
        sessions = tmp_path / "sessions"
        write_session(sessions / "deploy.jsonl")
        text = (sessions / "deploy.jsonl").read_text().replace("/nonexistent/ws-deploy", str(workspace))
        (sessions / "deploy.jsonl").write_text(text)
        world = make_world(tmp_path / "w")
        done = invoke("index", "--sessions", str(sessions), env=world.env)
        assert done.returncode == 0, done.stderr
        assert list((workspace / ".pi" / "pbot" / "history").glob("*.json"))
        with connect(world, args=["--sessions", str(sessions)]) as local:
            found = local.ok("history_search", {"query": "数据库迁移", "workspace": str(workspace)})[0]
            assert found["total"] == 1
            assert found["matches"][0]["workspace"] == str(workspace)

    def test_bad_config_fails_at_start_with_one_line(self, tmp_path: Path) -> None:
        """A broken config file stops the server before it speaks, with one stderr line."""
        home = tmp_path / "home"
        (home / "config" / "pbot-watch").mkdir(parents=True)
        (home / "config" / "pbot-watch" / "config.toml").write_text("nonsense = 1\n")
        env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / "config"), "PATH": os.environ.get("PATH", "")}
        done = subprocess.run(
            [str(SCRIPT), "mcp"], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
            check=False, timeout=60,
        )  # fmt: skip
        assert done.returncode == 2  # as from every command (tests/test_errors.py)
        assert done.stdout == ""
        assert done.stderr.startswith("pbot-watch: invalid settings: nonsense (")

    def test_does_not_import_litellm_or_watchdog(self) -> None:
        """The server's modules stay light: no model library, no file watcher."""
        code = (
            "import sys, pbot_watch.mcp_server.stdio, pbot_watch.tools.registry, pbot_watch.cli.mcp_cmd, pbot_watch.search.queries, "
            "pbot_watch.memory.query; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('litellm', 'watchdog')))"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
        )
        assert done.stdout.strip() == "[]"


class TestHistoryWithoutService:
    def test_finds_text_appended_a_second_ago(self, tmp_path: Path) -> None:
        """No service: the caller's session is unknown, so the newest sessions are indexed first, and the text says others may be stale."""
        sessions = tmp_path / "sessions"
        pi = PiSession("01a228f5-9999-7000-8000-0000000fresh", file=sessions / "ws" / "fresh.jsonl")
        pi.user("Where is the otter config?", id="u1")
        pi.assistant("The otter config is in otter.toml.", id="a1")
        world = World(
            tmp_path, sessions, tmp_path / "archive", scratch_user(tmp_path / "home"), tmp_path / "log"
        )
        with connect(world) as client:
            found, text = client.ok("history_search", {"query": "otter config"})
            assert 1 == found["total"], text
            pi.user("And the heron schedule?", id="u2")
            pi.assistant("The heron schedule runs at dawn.", id="a2")
            found, text = client.ok("history_search", {"query": "heron schedule"})
            assert 1 == found["total"], text
            page, _text = client.ok("history_read", {"id": found["matches"][0]["id"]})
        assert "dawn" in page["text"]
        assert "Note: the pbot-watch service is not running (it has not run here)" in text.splitlines()[1]


class TestMalformedJsonRpc:
    """Lines that are no JSON-RPC message get a JSON-RPC error reply; the server goes on."""

    def replies(self, world: World, *lines: str) -> list[dict[str, Any]]:
        """Each line sent to a fresh ``pbot-watch mcp``, then stdin closed: every reply on stdout."""
        done = subprocess.run(
            [str(SCRIPT), "mcp", *world.args()], input="".join(f"{line}\n" for line in lines),
            capture_output=True, text=True, env=world.env, check=False, timeout=60,
        )  # fmt: skip
        assert 0 == done.returncode, done.stderr
        return [json.loads(line) for line in done.stdout.splitlines()]

    def test_parse_error(self, world: World) -> None:
        """A line that is not JSON: error -32700 with a null id (none could be read)."""
        [reply] = self.replies(world, "this is not json")
        assert {"jsonrpc": "2.0", "id": None} == {k: reply[k] for k in ("jsonrpc", "id")}
        assert -32700 == reply["error"]["code"]

    def test_invalid_request_keeps_its_id(self, world: World) -> None:
        """JSON that is no JSON-RPC message: error -32600, with the request's id when it has one."""
        replies = self.replies(world, '{"jsonrpc":"2.0","id":7,"method":42}', "[1, 2]", '{"id":"x"}')
        assert [(7, -32600), (None, -32600), ("x", -32600)] == [
            (r["id"], r["error"]["code"]) for r in replies
        ]

    def test_server_answers_after_garbage(self, world: World) -> None:
        """After malformed lines the same process still initializes."""
        initialize = {
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        }  # fmt: skip
        replies = self.replies(world, "{", "", json.dumps(initialize))
        assert [(None, -32700)] == [(r["id"], r["error"]["code"]) for r in replies if "error" in r]
        assert "pbot-watch" == next(r for r in replies if r.get("id") == 1)["result"]["serverInfo"]["name"]


class TestDocs:
    def test_docs_cover_every_tool_and_pi_registration(self) -> None:
        """docs/mcp.md names each tool and the command that registers the server with Pi."""
        docs = (REPO / "docs" / "mcp.md").read_text(encoding="utf-8")
        for name in ("history_search", "history_read", "search_memory", "recall_memory"):
            assert f"`{name}`" in docs
        assert "pi mcp add pbot-watch --exposure direct -- pbot-watch mcp" in docs
        assert "mcp__pbot_watch__history_search" in docs
