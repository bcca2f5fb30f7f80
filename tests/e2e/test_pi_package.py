"""pbot-watch's Pi package inside the real Pi 1.6: native tools, ``/history``, failure isolation.

``pbot-watch pi install`` puts the package into a temporary ``PI_CODING_AGENT_DIR``; Pi loads
the TypeScript extension itself, which starts one ``pbot-watch pi serve`` child and keeps it.
The scripted model on 127.0.0.1 calls the native tools (``[[tool: NAME {...}]]``), and the test
answers ``/history``'s dialogs through Pi's RPC extension-UI protocol.

``TestInsidePi`` runs one scripted session (class-scoped: Pi's start is the slow part) and each
test reads one behaviour off what it left: the session file Pi wrote, the requests the model
server received, and the RPC records.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pbot_watch.pi_bridge.install import CONFIG_NAME
from tests.e2e import scripted_model
from tests.e2e.pi_harness import (
    PiWorld,
    RpcPi,
    child_processes,
    install_package,
    newest_session,
)
from tests.e2e.pi_install import PiInstall
from tests.support.cli import pbot_watch_executable
from tests.support.openai_server import OpenAIServer
from tests.support.pi_sessions import PiSession
from tests.support.service import ServiceProcess, one_shot, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

REMEMBERED = "quokka"
FAILURE = "3 failed: budget over limit"
OTHER_NOTES = "Other notes: the rollback needs a dry run."
FILLER = "Good. " + "Let us take stock of where the work stands before going on. " * 8
EDIT = {"path": "notes.txt", "edits": [{"oldText": "Step two", "newText": "Step 2"}]}
NATIVE_TOOLS = {"history_search", "history_read", "search_memory", "recall_memory"}


def session_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def tool_results(path: Path, tool_name: str) -> list[dict[str, Any]]:
    return [
        entry["message"]
        for entry in session_lines(path)
        if entry.get("type") == "message"
        and entry["message"].get("role") == "toolResult"
        and entry["message"].get("toolName") == tool_name
    ]


def result_text(message: dict[str, Any]) -> str:
    return "\n".join(b.get("text", "") for b in message.get("content") or [] if b.get("type") == "text")


def serve_children(pi: RpcPi) -> set[int]:
    """The extension's ``pbot-watch pi serve`` children of this Pi process."""
    return {
        pid
        for pid, argv in child_processes(pi.proc.pid).items()
        if any(argv[i : i + 2] == ["pi", "serve"] for i in range(len(argv)))
    }


def isolated_environ(root: Path) -> dict[str, str]:
    """This process's environment with every per-user location under ``root`` (class-scoped
    fixtures run before the per-test isolation of tests/conftest.py)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PBOT_WATCH_")}
    for var in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"):
        (root / var).mkdir(parents=True, exist_ok=True)
        env[var] = str(root / var)
    return env


class Scene:
    """A project with notes, an isolated Pi whose package is installed with pbot-watch pi install."""

    def __init__(self, pi_install: PiInstall, root: Path, model: OpenAIServer) -> None:
        self.project = root / "project"
        self.project.mkdir(parents=True)
        (self.project / "notes.txt").write_text(
            f"Notes on the {REMEMBERED} migration.\nStep two: rename the tables.\n"
        )
        (self.project / "other.txt").write_text(f"{OTHER_NOTES}\nNothing else.\n")
        (self.project / "plan.txt").write_text("The plan: ship on Friday.\n")
        self.archive = root / "archive"
        self.world = PiWorld.create(pi_install, root / "pi", model.base_url, isolated_environ(root))
        self.world.sessions.mkdir(parents=True)
        self.installed = install_package(
            self.world,
            "--sessions",
            str(self.world.sessions),
            "--archive",
            str(self.archive),
            cwd=self.project,
        )

    @property
    def package(self) -> Path:
        return Path(self.world.env["XDG_DATA_HOME"]) / "pbot-watch" / "pi-package"

    def index(self) -> None:
        """The archive the history tools read (the service keeps it current; here, once)."""
        one_shot([self.world.sessions], self.archive, env=self.world.env)

    def rewrite_config(self, **changes: Any) -> None:
        """Change the installed pbot-watch.json, as a moved virtualenv or a stuck process would."""
        path = self.package / CONFIG_NAME
        config = json.loads(path.read_text())
        for key, value in changes.items():
            config[key] = {**config[key], **value} if isinstance(value, dict) else value
        path.write_text(json.dumps(config))


@pytest.fixture(scope="class")
def model() -> Iterator[OpenAIServer]:
    with OpenAIServer(handler=scripted_model.handler) as server:
        yield server


@dataclass
class Transcript:
    """What one scripted session left behind."""

    scene: Scene
    session: Path
    first_answer: str
    requests: list[dict[str, Any]]
    after_compactions: list[dict[str, Any]] = field(default_factory=list)
    """The first request the model server received after each compaction."""
    ui: dict[str, dict[str, Any]] = field(default_factory=dict)
    killed_child: int = 0
    children_after: set[int] = field(default_factory=set)
    pi_exit: int = 0
    pi_stderr: str = ""


@pytest.fixture(scope="class")
def transcript(
    pi_install: PiInstall, tmp_path_factory: pytest.TempPathFactory, model: OpenAIServer
) -> Transcript:
    scene = Scene(pi_install, tmp_path_factory.mktemp("inside-pi"), model)
    world = scene.world
    world.print_turn(
        f"Remember this: the {REMEMBERED} migration starts on Monday.", cwd=scene.project, cont=False
    )
    session = newest_session(world.sessions)
    first_answer = next(
        e["id"]
        for e in session_lines(session)
        if e.get("type") == "message" and e["message"]["role"] == "assistant"
    )
    scene.index()
    ui: dict[str, dict[str, Any]] = {}
    with world.rpc(scene.project, "-c") as pi:
        pi.prompt(f'Find it. [[tool: history_search {{"query": "{REMEMBERED}"}}]]')

        # /history <word>, its dialogs answered as an RPC client does (docs/rpc-extension-ui.md)
        mark = len(pi.seen)
        pi.send({"type": "prompt", "message": f"/history {REMEMBERED}"})
        ui["hits"] = pi.ui_request("select", since=mark)
        # turn one's exchange (the child indexed the turn just above too: it names the word as well)
        hit = next(o for o in ui["hits"]["options"] if " exchange " in o and "Remember this" in o)
        mark = len(pi.seen)
        pi.answer(ui["hits"], hit)
        ui["node"] = pi.ui_request("select", since=mark)
        mark = len(pi.seen)
        pi.answer(ui["node"], "Show text")
        ui["text"] = pi.ui_request("editor", since=mark)
        mark = len(pi.seen)
        pi.answer(ui["text"])
        node_again = pi.ui_request("select", since=mark)
        mark = len(pi.seen)
        pi.answer(node_again)  # Escape on the node: back to the hits
        ui["back"] = pi.ui_request("select", since=mark)
        pi.answer(ui["back"])  # Escape on the hits ends the command

        pi.prompt(f'Search memory. [[tool: search_memory {{"query": "{REMEMBERED}"}}]]')

        # Tool work, a failing command, a file read then edited, two more reads; a compaction.
        pi.prompt("Read the notes [[read: notes.txt]]")
        pi.prompt("Read the other notes [[read: other.txt]]")
        # Models call tools with absolute paths and `cd <cwd> &&`: the cues show them relative.
        pi.prompt(f"Read the plan [[read: {scene.project}/plan.txt]]")
        pi.prompt(f"List the files [[bash: cd {scene.project} && ls]]")
        pi.prompt(f"Run the checks [[bash: echo '{FAILURE}' && exit 1]]")
        pi.prompt(f"Fix the notes [[tool: edit {json.dumps(EDIT)}]]")
        pi.prompt(FILLER)  # long enough that Pi's compaction (keepRecentTokens 60) keeps only this turn
        assert pi.command({"type": "compact"})["firstKeptEntryId"]
        cue_requests = [len(model.chat_requests)]  # the next request the model server receives
        pi.prompt("After the compaction: carry on.")
        # The model recalls one line of the cue block by its handle, then works on.
        pi.prompt("What did the other notes say? [[recall-cue: read(other.txt)]]")
        pi.prompt("One more command [[bash: echo second round]]")
        pi.prompt(FILLER)
        assert pi.command({"type": "compact"})["firstKeptEntryId"]
        cue_requests.append(len(model.chat_requests))
        pi.prompt("After the second compaction: carry on.")

        # The child is killed: the next call answers at once, a later one from a new child.
        (killed,) = serve_children(pi)
        os.kill(killed, signal.SIGKILL)
        wait_for(lambda: killed not in serve_children(pi), 10, "the killed child to be gone")
        pi.prompt(f'Again. [[tool: search_memory {{"query": "{REMEMBERED}"}}]]')
        wait_for(
            lambda: (
                pi.prompt(f'Once more. [[tool: search_memory {{"query": "{REMEMBERED}"}}]]') is not None
                and not tool_results(session, "search_memory")[-1].get("isError")
            ),
            30,
            "a search_memory call answered by a restarted child",
            lambda: result_text(tool_results(session, "search_memory")[-1]),
            poll=0.25,
        )
        children_after = serve_children(pi)
        ui["status"] = pi.ui_request("setStatus", since=0)
        code = pi.close()
        stderr = pi.stderr.decode(errors="replace")
    return Transcript(
        scene=scene,
        session=session,
        first_answer=first_answer,
        requests=[r.body for r in model.chat_requests],
        after_compactions=[model.chat_requests[i].body for i in cue_requests],
        ui=ui,
        killed_child=killed,
        children_after=children_after,
        pi_exit=code,
        pi_stderr=stderr,
    )


class TestInsidePi:
    def test_install_registers_the_package(self, transcript: Transcript) -> None:
        """pbot-watch pi install names the package folder in Pi's user settings."""
        scene = transcript.scene
        settings = json.loads((scene.world.agent_dir / "settings.json").read_text())
        assert [scene.package] == [(scene.world.agent_dir / p).resolve() for p in settings["packages"]]

    def test_native_tools_are_declared(self, transcript: Transcript) -> None:
        """Every request after the install declares the four tools under their own names."""
        assert NATIVE_TOOLS <= set(scripted_model.declared_tools(transcript.requests[-1]))

    def test_native_history_search_finds_turn_one(self, transcript: Transcript) -> None:
        """history_search returns the exchange node of turn one, with its words."""
        (search,) = tool_results(transcript.session, "history_search")
        text = result_text(search)
        assert not search.get("isError"), text
        assert f":0:{transcript.first_answer}" in text
        assert "Monday" in text

    def test_history_command_lists_hits(self, transcript: Transcript) -> None:
        """/history <word> opens a select of hits titled with the query."""
        assert f"History: {REMEMBERED} (" in transcript.ui["hits"]["title"]

    def test_history_command_opens_the_node(self, transcript: Transcript) -> None:
        """Choosing the hit opens that exchange node, and Show text shows its words."""
        assert transcript.ui["node"]["title"].endswith(f":0:{transcript.first_answer}")
        assert "Show text" in transcript.ui["node"]["options"]
        assert f"the {REMEMBERED} migration starts on Monday" in transcript.ui["text"]["prefill"]

    def test_escape_on_a_node_goes_back_to_the_hits(self, transcript: Transcript) -> None:
        assert transcript.ui["back"]["title"] == transcript.ui["hits"]["title"]

    def test_footer_says_the_service_is_not_running(self, transcript: Transcript) -> None:
        """Without a pbot-watch service, the footer status says so."""
        status = transcript.ui["status"]
        assert ("pbot-watch", "pbot-watch: not running") == (status["statusKey"], status["statusText"])

    def test_memory_search_sees_the_branch(self, transcript: Transcript) -> None:
        """search_memory finds turn one's words on this session's branch."""
        first = tool_results(transcript.session, "search_memory")[0]
        assert not first.get("isError"), result_text(first)
        assert REMEMBERED in result_text(first)

    def test_killed_child_is_no_match_never(self, transcript: Transcript) -> None:
        """Right after the child is killed, a call succeeds or says "temporarily unavailable"."""
        after_kill = tool_results(transcript.session, "search_memory")[1]
        text = result_text(after_kill)
        assert not after_kill.get("isError") or "temporarily unavailable" in text, text
        assert not after_kill.get("isError") or 'This is not "no match"' in text, text

    def test_killed_child_is_replaced(self, transcript: Transcript) -> None:
        """A later call is answered by a new child, and Pi exits cleanly at the end."""
        last = tool_results(transcript.session, "search_memory")[-1]
        assert not last.get("isError"), result_text(last)
        assert transcript.children_after
        assert transcript.killed_child not in transcript.children_after
        assert 0 == transcript.pi_exit, transcript.pi_stderr


def cue_lines(request: dict[str, Any]) -> list[str]:
    block = scripted_model.cue_block(request["messages"])
    assert block is not None, [m.get("role") for m in request["messages"]]
    return block.splitlines()


def line_for(lines: list[str], call: str) -> str:
    """The one cue line of this call (``read(notes.txt)``)."""
    (line,) = [line for line in lines if f" {call} " in line]
    return line


class TestCues:
    def test_next_request_after_compaction_has_the_block(self, transcript: Transcript) -> None:
        """The first request after /compact carries the cue block, right after the compaction summary."""
        messages = transcript.after_compactions[0]["messages"]
        texts = [scripted_model.message_text(m.get("content")) for m in messages]
        at = next(i for i, text in enumerate(texts) if text.startswith(scripted_model.CUE_HEADER))
        assert "Scripted summary" in texts[at - 1]
        assert texts[at].startswith("Memory cues (batch 1)")

    def test_every_tool_event_is_a_line(self, transcript: Transcript) -> None:
        """Batch 1 holds the reads, the commands and the edit, each with a handle; no user text."""
        lines = cue_lines(transcript.after_compactions[0])
        for call in ("read(notes.txt)", "read(other.txt)", "read(plan.txt)", "bash(ls)", "edit(notes.txt)"):
            assert re.search(r" #[0-9a-f]{8}$", line_for(lines, call)), lines
        assert not [line for line in lines if "Good." in line or "Read the notes" in line]

    def test_new_lines_enter_in_full(self, transcript: Transcript) -> None:
        """At the first compaction every line is in full: the call, its outcome and its size."""
        lines = cue_lines(transcript.after_compactions[0])
        assert "→ Notes on the quokka migration. [2 lines]" in line_for(lines, "read(notes.txt)")
        assert "→ The plan: ship on Friday. #" in line_for(lines, "read(plan.txt)")

    def test_failing_command_shows_its_failure(self, transcript: Transcript) -> None:
        """The failing command's line says it failed and why."""
        lines = cue_lines(transcript.after_compactions[0])
        (line,) = [line for line in lines if "bash(echo" in line and "exit 1" in line]
        assert f"✗ exit 1: {FAILURE}" in line

    def test_recall_by_a_cue_handle_returns_the_original(self, transcript: Transcript) -> None:
        """recall_memory with the short handle from the read(other.txt) cue returns the file's text as read."""
        (recall,) = tool_results(transcript.session, "recall_memory")
        text = result_text(recall)
        assert not recall.get("isError"), text
        assert OTHER_NOTES in text
        (call,) = [
            block["arguments"]
            for entry in session_lines(transcript.session)
            if entry.get("type") == "message" and entry["message"].get("role") == "assistant"
            for block in entry["message"].get("content") or []
            if block.get("type") == "toolCall" and block.get("name") == "recall_memory"
        ]
        assert re.fullmatch(r"#[0-9a-f]{8}", call["handle"]), call

    def test_lines_have_short_handles_and_relative_paths(self, transcript: Transcript) -> None:
        """No line spells the session id or the project's absolute path; `cd <project> &&` is gone."""
        for request in transcript.after_compactions:
            lines = cue_lines(request)[1:]
            assert all(re.search(r" #[0-9a-f]{8}$", line) for line in lines), lines
            assert not [line for line in lines if str(transcript.scene.project) in line or "m1." in line]
        lines = cue_lines(transcript.after_compactions[0])
        assert "read(plan.txt)" in line_for(lines, "read(plan.txt)")
        assert "bash(ls) →" in line_for(lines, "bash(ls)")

    def test_reads_fade_first(self, transcript: Transcript) -> None:
        """One batch later, the read of an unchanged file is down to its call and size."""
        line = line_for(cue_lines(transcript.after_compactions[1]), "read(plan.txt)")
        assert "read(plan.txt) [1 line] #" in line

    def test_reinforced_line_is_in_full(self, transcript: Transcript) -> None:
        """The recalled read(other.txt), which would have faded like the plan's, is in full again."""
        line = line_for(cue_lines(transcript.after_compactions[1]), "read(other.txt)")
        assert f"read(other.txt) → {OTHER_NOTES} [2 lines]" in line

    def test_an_edited_file_read_fades_as_state(self, transcript: Transcript) -> None:
        """The read of notes.txt, edited after, fades as state: still in full one batch later."""
        line = line_for(cue_lines(transcript.after_compactions[1]), "read(notes.txt)")
        assert "→ Notes on the quokka migration." in line

    def test_failures_stay_in_full(self, transcript: Transcript) -> None:
        """The failing command is still in full at the second compaction."""
        lines = cue_lines(transcript.after_compactions[1])
        assert [line for line in lines if f"✗ exit 1: {FAILURE}" in line]

    def test_second_batch_adds_the_new_work(self, transcript: Transcript) -> None:
        """The work since the first compaction enters the second batch in full."""
        lines = cue_lines(transcript.after_compactions[1])
        assert lines[0].startswith("Memory cues (batch 2)")
        assert "→ second round" in line_for(lines, "bash(echo second round)")

    def test_block_is_what_pbot_watch_cues_computes(self, transcript: Transcript) -> None:
        """The delivered block equals `pbot-watch cues` for the compaction's branch (same window)."""
        import subprocess

        entries = session_lines(transcript.session)
        compactions = [e for e in entries if e.get("type") == "compaction"]
        printed = subprocess.run(
            [pbot_watch_executable(), "cues", "--session-file", str(transcript.session), "--leaf", compactions[-1]["id"],
             "--context-window", "32000"],
            capture_output=True, text=True, check=True, timeout=60, env=transcript.scene.world.env,
        ).stdout  # fmt: skip
        assert printed.rstrip("\n").splitlines() == cue_lines(transcript.after_compactions[1])


class TestFailureIsolation:
    def test_missing_pbot_watch(self, pi_install: PiInstall, tmp_path: Path, model: OpenAIServer) -> None:
        """When the child cannot be started, the tool says "temporarily unavailable" and Pi answers."""
        scene = Scene(pi_install, tmp_path, model)
        scene.rewrite_config(command=[str(tmp_path / "gone" / "pbot-watch"), "pi", "serve"])
        answer = scene.world.print_turn(
            f'Search. [[tool: search_memory {{"query": "{REMEMBERED}"}}]]', cwd=scene.project, cont=False
        )
        assert "Final answer" in answer
        (result,) = tool_results(newest_session(scene.world.sessions), "search_memory")
        assert result["isError"]
        assert "search_memory is temporarily unavailable: cannot start" in result_text(result)
        assert 'This is not "no match"' in result_text(result)

    def test_silent_child_meets_the_deadline(
        self, pi_install: PiInstall, tmp_path: Path, model: OpenAIServer
    ) -> None:
        """A child that never answers costs one deadline, then the tool says so and Pi answers."""
        scene = Scene(pi_install, tmp_path, model)
        never_answers = [sys.executable, "-c", "import sys\nfor _ in sys.stdin: pass"]
        scene.rewrite_config(command=never_answers, timeouts={"toolMs": 1500})
        started = time.monotonic()
        answer = scene.world.print_turn(
            f'Search. [[tool: search_memory {{"query": "{REMEMBERED}"}}]]', cwd=scene.project, cont=False
        )
        assert "Final answer" in answer
        assert time.monotonic() - started < 30
        (result,) = tool_results(newest_session(scene.world.sessions), "search_memory")
        assert result["isError"]
        assert "did not answer within 1.5 s" in result_text(result)

    def test_history_outside_the_tui_prints_json(
        self, pi_install: PiInstall, tmp_path: Path, model: OpenAIServer
    ) -> None:
        """In print mode /history prints the search result as JSON (on stderr: Pi keeps stdout)."""
        scene = Scene(pi_install, tmp_path, model)
        scene.world.print_turn(f"The {REMEMBERED} plan.", cwd=scene.project, cont=False)
        scene.index()
        done = scene.world.pi_cli("-p", f"/history {REMEMBERED}", cwd=scene.project)
        result = json.loads(done.stderr[done.stderr.index("{") :])
        assert REMEMBERED == result["query"]
        assert 1 == result["total"]
        assert f"The {REMEMBERED} plan." in result["matches"][0]["snippet"]


class TestMcpSplit:
    def test_mcp_copies_are_hidden(self, pi_install: PiInstall, tmp_path: Path, model: OpenAIServer) -> None:
        """With pbot-watch also registered over MCP, the model is offered the native tools only."""
        scene = Scene(pi_install, tmp_path, model)
        scene.world.pi_cli(
            "mcp", "add", "pbot-watch", "--exposure", "direct", "--", pbot_watch_executable(), "mcp",
            cwd=scene.project,
        )  # fmt: skip
        scene.world.print_turn("Which tools do you have?", cwd=scene.project, cont=False)
        declared = set(scripted_model.declared_tools(model.chat_requests[-1].body))
        assert NATIVE_TOOLS <= declared
        assert not {name for name in declared if name.startswith("mcp__")}, declared


class TestScope:
    def test_memory_tools_see_only_the_calling_session(
        self, pi_install: PiInstall, tmp_path: Path, model: OpenAIServer
    ) -> None:
        """A session in another project finds nothing of the first, even when it names it."""
        scene = Scene(pi_install, tmp_path, model)
        scene.world.print_turn(f"The {REMEMBERED} plan.", cwd=scene.project, cont=False)
        first = session_lines(newest_session(scene.world.sessions))[0]["id"]
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        scene.world.print_turn(
            f'Search. [[tool: search_memory {{"query": "{REMEMBERED}"}}]]', cwd=elsewhere, cont=False
        )
        scene.world.print_turn(
            f'Widen it. [[tool: search_memory {{"query": "{REMEMBERED}", "sessionId": "{first}"}}]]',
            cwd=elsewhere,
            cont=True,
        )
        second = newest_session(scene.world.sessions)
        own, widened = tool_results(second, "search_memory")
        assert not own.get("isError"), result_text(own)
        assert f"Sessions searched: {session_lines(second)[0]['id']}." in result_text(own)
        assert first not in result_text(own)
        assert widened.get("isError")
        assert first in result_text(widened)


class TestHistoryWithoutService:
    def test_history_search_finds_the_latest_exchange_with_the_service_stopped(
        self, pi_install: PiInstall, tmp_path: Path, model: OpenAIServer
    ) -> None:
        """The service indexed turn one and stopped; turn two is found, and the result says why others may lag."""
        scene = Scene(pi_install, tmp_path / "scene", model)
        world = scene.world
        state_dir = Path(world.env["XDG_STATE_HOME"]) / "pbot-watch"
        service = ServiceProcess([world.sessions], scene.archive, env=world.env, state_dir=state_dir)
        with service.start():
            world.print_turn("The heron schedule runs at dawn.", cwd=scene.project, cont=False)
            session = newest_session(world.sessions)
            service.wait_status(lambda s: s.records_written > 0, "the first turn's record")
            assert 0 == service.stop()
        world.print_turn("Remember: the otter config lives in otter.toml.", cwd=scene.project, cont=True)
        world.print_turn(
            'Find it. [[tool: history_search {"query": "otter config"}]]', cwd=scene.project, cont=True
        )
        (search,) = tool_results(session, "history_search")
        text = result_text(search)
        assert not search.get("isError"), text
        assert "otter.toml" in text  # turn two's exchange, which only the child indexed
        assert "Note: the pbot-watch service is not running: other sessions are as of " in text


SUMMARY_WORD = "zeppelin"


class TestHistoryBrowser:
    def test_summary_hit_shows_its_match_and_escape_goes_back(
        self, pi_install: PiInstall, tmp_path: Path, model: OpenAIServer
    ) -> None:
        """A summary hit's line shows the match (deep in the summary); Escape walks back one level at a time."""
        scene = Scene(pi_install, tmp_path, model)
        pi_session = PiSession(
            session_id="01a228f5-0000-7000-8000-00000000be57",
            cwd=str(scene.project),
            file=scene.world.sessions / "--project--" / "2026-12-01T09-00-00-000Z_chores.jsonl",
        )
        for n in range(4):
            word = f" and the {SUMMARY_WORD} hangar" if n == 3 else ""
            pi_session.turn(
                f"Question {n}: walk me through the long list of weekly chores again{word}", "Done."
            )
        scene.index()
        summarized = subprocess.run(
            [pbot_watch_executable(), "summarize", "--sessions", str(scene.world.sessions),
             "--archive", str(scene.archive)],
            env=scene.world.env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert 0 == summarized.returncode, summarized.stderr
        with scene.world.rpc(scene.project) as pi:
            mark = len(pi.seen)
            pi.send({"type": "prompt", "message": f"/history {SUMMARY_WORD}"})
            hits = pi.ui_request("select", since=mark)
            summary = next(o for o in hits["options"] if " summary L1 " in o)
            # The menu line holds the match, though pbot's snippet starts 80 units before it.
            assert SUMMARY_WORD in summary and len(summary) < 120, summary
            mark = len(pi.seen)
            pi.answer(hits, summary)
            node = pi.ui_request("select", since=mark)
            child = next(o for o in node["options"] if "↓ child" in o)
            mark = len(pi.seen)
            pi.answer(node, child)
            opened = pi.ui_request("select", since=mark)
            assert ":0:" in opened["title"]
            mark = len(pi.seen)
            pi.answer(opened)  # Escape: back to the summary it was opened from
            back = pi.ui_request("select", since=mark)
            assert back["title"] == node["title"]
            mark = len(pi.seen)
            pi.answer(back)  # Escape: back to the hits
            again = pi.ui_request("select", since=mark)
            assert again["title"] == hits["title"]
            pi.answer(again)  # Escape on the hits closes /history
            pi.prompt(f'And the tool. [[tool: history_search {{"query": "{SUMMARY_WORD}"}}]]')
        (result,) = tool_results(newest_session(scene.world.sessions), "history_search")
        # What Pi's TUI renders the call and result from: the structured result, labels for the reader.
        assert result["details"]["total"] >= 1
        assert any(SUMMARY_WORD in m["shown"] for m in result["details"]["matches"])

    def test_child_that_cannot_start_names_the_fix(
        self, pi_install: PiInstall, tmp_path: Path, model: OpenAIServer
    ) -> None:
        """/history without a working pbot-watch tells the person to run `pbot-watch pi install`; the footer says unavailable."""
        scene = Scene(pi_install, tmp_path, model)
        scene.rewrite_config(command=[str(tmp_path / "gone" / "pbot-watch"), "pi", "serve"])
        with scene.world.rpc(scene.project) as pi:
            mark = len(pi.seen)
            pi.send({"type": "prompt", "message": f"/history {REMEMBERED}"})
            shown = pi.wait_for(
                lambda r: (
                    r.get("type") == "extension_ui_request"
                    and r.get("method") == "notify"
                    and "pi install" in str(r.get("message"))
                ),
                "the /history notice",
                since=mark,
            )
            # The footer waits for a second failed ask before it says so (one may be a slow start).
            pi.wait_for(
                lambda r: (
                    r.get("type") == "extension_ui_request"
                    and r.get("method") == "setStatus"
                    and r.get("statusText") == "pbot-watch: unavailable"
                ),
                "the footer to say pbot-watch is unavailable",
                30,
                since=0,
            )
        assert "run `pbot-watch pi install` again" in shown["message"]
        assert "This is not" not in shown["message"]
