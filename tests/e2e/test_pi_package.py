"""pbot-watch's Pi package inside the real Pi: native tools, ``/history``, and failure isolation.

``pbot-watch pi install`` puts the package into a temporary ``PI_CODING_AGENT_DIR``; Pi 1.6
loads the TypeScript extension itself, which starts one ``pbot-watch pi serve`` child and keeps
it. The scripted model on 127.0.0.1 calls the native tools (``[[tool: NAME {...}]]``) and the
test answers ``/history``'s dialogs through Pi's RPC extension-UI protocol.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import scripted_model
from tests.e2e.pi_harness import PiWorld, RpcPi, child_processes, install_package, newest_session
from tests.e2e.pi_install import PiInstall
from tests.e2e.watcher import one_shot_index, wait_until
from tests.support.openai_server import OpenAIServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

REMEMBERED = "quokka"
OTHER_WORD = "marmalade"
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


def serve_children(pi: RpcPi) -> dict[int, list[str]]:
    """The extension's ``pbot-watch pi serve`` children of this Pi process."""
    return {
        pid: argv
        for pid, argv in child_processes(pi.proc.pid).items()
        if argv[-2:] != [] and "serve" in argv and "pi" in argv
    }


class Scene:
    """A project with notes, the scripted model, an isolated Pi with the package installed."""

    def __init__(self, pi_install: PiInstall, tmp_path: Path, model: OpenAIServer) -> None:
        self.project = tmp_path / "project"
        self.project.mkdir()
        (self.project / "notes.txt").write_text(
            f"Notes on the {REMEMBERED} migration.\nStep two: rename the tables.\n"
        )
        self.archive = tmp_path / "archive"
        self.world = PiWorld.create(pi_install, tmp_path / "pi", model.base_url, dict(os.environ))
        self.world.sessions.mkdir(parents=True)
        install_package(
            self.world,
            "--sessions",
            str(self.world.sessions),
            "--archive",
            str(self.archive),
            cwd=self.project,
        )

    def index(self) -> None:
        """The archive the history tools read (the service would keep it current)."""
        one_shot_index(self.world.sessions, self.archive)


@pytest.fixture
def model() -> OpenAIServer:
    with OpenAIServer(handler=scripted_model.handler) as server:
        yield server  # type: ignore[misc]


class TestNativeTools:
    def test_tools_history_and_a_killed_child(
        self, pi_install: PiInstall, tmp_path: Path, model: OpenAIServer
    ) -> None:
        """Native tools answer from the archive and the branch, /history walks to a node, and Pi survives a killed child."""
        scene = Scene(pi_install, tmp_path, model)
        world = scene.world
        settings = json.loads((world.agent_dir / "settings.json").read_text())
        assert 1 == len(settings["packages"])

        world.print_turn(
            f"Remember this: the {REMEMBERED} migration starts on Monday.", cwd=scene.project, cont=False
        )
        session = newest_session(world.sessions)
        scene.index()
        header = session_lines(session)[0]
        first_answer = next(
            e["id"]
            for e in session_lines(session)
            if e.get("type") == "message" and e["message"]["role"] == "assistant"
        )

        with world.rpc(scene.project, "-c") as pi:
            # --- the native tools are declared to the model -----------------------------------
            pi.prompt(f'Find it. [[tool: history_search {{"query": "{REMEMBERED}"}}]]')
            declared = set(scripted_model.declared_tools(model.chat_requests[-1].body))
            assert NATIVE_TOOLS <= declared, declared

            # --- /history <word> through the RPC extension-UI protocol --------------------------
            mark = len(pi.seen)
            pi.send({"type": "prompt", "message": f"/history {REMEMBERED}"})
            hits = pi.ui_request("select", since=mark)
            assert f"History: {REMEMBERED}" in hits["title"]
            hit = next(o for o in hits["options"] if " exchange " in o and REMEMBERED in o)
            mark = len(pi.seen)
            pi.answer(hits, hit)
            node = pi.ui_request("select", since=mark)
            assert node["title"].endswith(f":0:{first_answer}")  # the exchange node of turn one
            mark = len(pi.seen)
            pi.answer(node, "Show text")
            text = pi.ui_request("editor", since=mark)
            assert f"the {REMEMBERED} migration starts on Monday" in text["prefill"]
            mark = len(pi.seen)
            pi.answer(text)
            again = pi.ui_request("select", since=mark)
            pi.answer(again)  # closing the dialog ends the command

            # --- memory search sees this branch --------------------------------------------------
            pi.prompt(f'Search memory. [[tool: search_memory {{"query": "{REMEMBERED}"}}]]')

            # --- the child is killed: Pi keeps answering, the next call restarts it ---------------
            (child,) = serve_children(pi)
            os.kill(child, signal.SIGKILL)
            wait_until(lambda: child not in serve_children(pi), "the killed child to be gone", 10, lambda: "")
            answered = pi.prompt(f'Again. [[tool: search_memory {{"query": "{REMEMBERED}"}}]]')
            assert answered.get("disposition") == "started"
            # The extension starts a new child once its back-off (1 s) is over.
            wait_until(
                lambda: (
                    pi.prompt(f'Once more. [[tool: search_memory {{"query": "{REMEMBERED}"}}]]') is not None
                    and not tool_results(session, "search_memory")[-1].get("isError")
                ),
                "a search_memory call answered by a restarted child",
                30,
                lambda: result_text(tool_results(session, "search_memory")[-1]),
                poll=0.25,
            )
            restarted = set(serve_children(pi))
            assert pi.close() == 0, pi.stderr.decode(errors="replace")

        # --- what the tools answered, from the session file -----------------------------------
        (search,) = tool_results(session, "history_search")
        assert not search.get("isError"), result_text(search)
        assert f"{header['id']}" in result_text(search) or REMEMBERED in result_text(search)
        assert "Monday" in result_text(search)
        assert f":0:{first_answer}" in result_text(search)

        memory = tool_results(session, "search_memory")
        assert not memory[0].get("isError"), result_text(memory[0])
        assert REMEMBERED in result_text(memory[0])
        after_kill = memory[1]
        assert not after_kill.get("isError") or "temporarily unavailable" in result_text(after_kill), (
            result_text(after_kill)
        )
        assert not memory[-1].get("isError"), result_text(memory[-1])
        assert restarted and child not in restarted


def rewrite_config(scene: Scene, **changes: Any) -> None:
    """Change the installed pbot-watch.json, as a moved virtualenv or a stuck process would."""
    from pbot_watch.pi_bridge.install import CONFIG_NAME

    path = Path(os.environ["XDG_DATA_HOME"]) / "pbot-watch" / "pi-package" / CONFIG_NAME
    config = json.loads(path.read_text())
    for key, value in changes.items():
        if isinstance(value, dict):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    path.write_text(json.dumps(config))


class TestFailureIsolation:
    def test_missing_pbot_watch(self, pi_install: PiInstall, tmp_path: Path, model: OpenAIServer) -> None:
        """When the child cannot be started, the tool says "temporarily unavailable" and Pi answers."""
        scene = Scene(pi_install, tmp_path, model)
        rewrite_config(scene, command=[str(tmp_path / "gone" / "pbot-watch"), "pi", "serve"])
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
        import sys

        scene = Scene(pi_install, tmp_path, model)
        never_answers = [sys.executable, "-c", "import sys\nfor _ in sys.stdin: pass"]
        rewrite_config(scene, command=never_answers, timeouts={"toolMs": 1500})
        started = time.monotonic()
        answer = scene.world.print_turn(
            f'Search. [[tool: search_memory {{"query": "{REMEMBERED}"}}]]', cwd=scene.project, cont=False
        )
        assert "Final answer" in answer
        assert time.monotonic() - started < 30
        (result,) = tool_results(newest_session(scene.world.sessions), "search_memory")
        assert result["isError"]
        assert "did not answer within 1.5 s" in result_text(result)


class TestMcpSplit:
    def test_mcp_copies_are_hidden(self, pi_install: PiInstall, tmp_path: Path, model: OpenAIServer) -> None:
        """With pbot-watch also registered over MCP, the model is offered the native tools only."""
        from tests.e2e.pi_harness import pbot_watch_executable

        scene = Scene(pi_install, tmp_path, model)
        scene.world.pi_cli(
            "mcp", "add", "pbot-watch", "--exposure", "direct", "--", pbot_watch_executable(), "mcp",
            cwd=scene.project,
        )  # fmt: skip
        scene.world.print_turn("Which tools do you have?", cwd=scene.project, cont=False)
        declared = set(scripted_model.declared_tools(model.chat_requests[-1].body))
        assert NATIVE_TOOLS <= declared
        assert not {name for name in declared if name.startswith("mcp__")}, declared
