"""The real Pi coding agent writes sessions while ``pbot-watch run`` follows them, and calls
pbot-watch back over MCP.

One scripted conversation covers what the watcher must follow in real life: ``pi -p`` turns,
``-c`` continuing the same file, tool calls (bash, read), an in-file branch with a branch summary
(``/tree``, done through a small extension because RPC has no command for it), a manual
compaction, and an MCP tool call into pbot-watch's own archive. At the end the live archive must
equal a one-shot ``pbot-watch index`` of the same folder, byte for byte, and its exchanges must be
the ones Pi itself reports through RPC ``get_entries``.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import expected, scripted_model
from tests.e2e.pi_harness import PiWorld, newest_session
from tests.e2e.pi_install import PiInstall
from tests.support.archive import archive_files
from tests.support.cli import pbot_watch_executable, run
from tests.support.openai_server import OpenAIServer
from tests.support.service import ServiceProcess, one_shot, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

# REMEMBERED is said in turn one (with "Monday") and is in the notes file; nothing else in the
# conversation uses it. OTHER_WORKSPACE_WORD only appears in the second workspace's session.
REMEMBERED = "quokka"
OTHER_WORKSPACE_WORD = "marmalade"
MISSING_NODE = "no-such-record:0:no-such-entry"
# Re-read a file soon after Pi's last append; never go idle during the test, so no summary is
# written and the archive must equal a one-shot index byte for byte; every change must come
# from a watch event, not a rescan.
FOLLOW = ("--debounce-seconds", "0.05", "--idle-seconds", "3600", "--reconcile-seconds", "3600")


def session_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def tool_results(path: Path, tool_name: str) -> list[dict[str, Any]]:
    out = []
    for entry in session_lines(path):
        message = entry.get("message") or {}
        if (
            entry.get("type") == "message"
            and message.get("role") == "toolResult"
            and message.get("toolName") == tool_name
        ):
            out.append(message)
    return out


def header_id(path: Path) -> str:
    return str(session_lines(path)[0]["id"])


def result_text(message: dict[str, Any]) -> str:
    return "\n".join(b.get("text", "") for b in message.get("content") or [] if b.get("type") == "text")


def caught_up(service: ServiceProcess, reference: Path, timeout: float = 20) -> dict[str, bytes]:
    """Wait until the service's archive equals a one-shot index of the same sessions; return it.

    The one-shot index is made once, after Pi has finished writing, so it is the target the live
    archive must reach; the service's debounce means it gets there a little later.
    """
    assert service.archive is not None
    shutil.rmtree(reference, ignore_errors=True)
    one_shot(service.sessions, reference)
    expected = archive_files(reference)
    assert expected, f"the one-shot index wrote no record for {service.sessions}"

    def equal() -> bool:
        service.assert_alive()
        return archive_files(service.archive) == expected

    def explain() -> str:
        live = archive_files(service.archive)
        differing = sorted(
            set(live) ^ set(expected) | {k for k in live.keys() & expected.keys() if live[k] != expected[k]}
        )
        return f"records that differ: {differing}\n{service.log_tail()}"

    wait_for(equal, timeout, "the live archive to equal a one-shot index", explain)
    return expected


def status_when(service: ServiceProcess, condition: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The first ``pbot-watch status --json`` (the service's own account) that satisfies ``condition``."""
    seen: list[dict[str, Any]] = []

    def check() -> dict[str, Any] | None:
        done = run("status", "--json", "--state-dir", str(service.state_dir), timeout=30)
        assert done.stdout.strip(), f"pbot-watch status printed nothing ({done.returncode}): {done.stderr}"
        seen.append(json.loads(done.stdout))
        return seen[-1] if condition(seen[-1]) else None

    return wait_for(check, 10, "a pbot-watch status that matches", lambda: json.dumps(seen[-1:], indent=1))


def records_by_session(files: dict[str, bytes]) -> dict[str, dict[str, Any]]:
    records = [json.loads(data) for data in files.values()]
    return {record["sessionId"]: record for record in records}


class TestRealPi:
    def test_watcher_follows_pi_and_pi_searches_it(self, pi_install: PiInstall, tmp_path: Path) -> None:
        """Live archive == one-shot index, exchanges == Pi's get_entries, and Pi finds an earlier turn over MCP."""
        project = tmp_path / "project"
        project.mkdir()
        (project / "notes.txt").write_text(
            f"Notes on the {REMEMBERED} migration.\nStep two: rename the tables.\n"
        )
        other_project = tmp_path / "other-project"
        other_project.mkdir()
        archive = tmp_path / "archive"

        with OpenAIServer(handler=scripted_model.handler) as model:
            world = PiWorld.create(pi_install, tmp_path / "pi", model.base_url, dict(os.environ))
            world.sessions.mkdir(parents=True)
            # Started before Pi writes, so Pi's first appends are seen as watch events, not by the start scan.
            watcher = ServiceProcess(
                [world.sessions],
                archive,
                *FOLLOW,
                "--log-level",
                "info",
                state_dir=tmp_path / "state",
                log=tmp_path / "logs" / "service.log",
            ).start()
            try:
                # --- print mode: a new session, then -c continues the same file ----------------
                answer = world.print_turn(
                    f"Remember this: the {REMEMBERED} migration starts on Monday.", cwd=project, cont=False
                )
                assert REMEMBERED in answer
                answer = world.print_turn("List the project files [[bash: ls]]", cwd=project, cont=True)
                assert "notes.txt" in answer  # the bash tool really ran in the project folder
                session = newest_session(world.sessions)
                caught_up(watcher, tmp_path / "reference")

                # --- a second workspace, a second session file -------------------------------
                world.print_turn(
                    f"A different project about {OTHER_WORKSPACE_WORD}.", cwd=other_project, cont=False
                )
                other_session = newest_session(world.sessions)

                # --- pbot-watch's MCP server, registered the documented way -------------------
                world.pi_cli(
                    "mcp",
                    "add",
                    scripted_model.MCP_SERVER,
                    "--exposure",
                    "direct",
                    "--",
                    pbot_watch_executable(),
                    "mcp",
                    "--sessions",
                    str(world.sessions),
                    "--archive",
                    str(archive),
                    cwd=project,
                )
                registered = json.loads((world.agent_dir / "mcp.json").read_text())["mcpServers"]
                assert registered[scripted_model.MCP_SERVER]["command"] == pbot_watch_executable()
                assert registered[scripted_model.MCP_SERVER]["exposure"] == "direct"

                # --- RPC: continue the session, read tool, branch, compaction, MCP call -------
                with world.rpc(project, "-c") as pi:
                    assert pi.command({"type": "get_state"})["sessionFile"] == str(session)
                    pi.prompt("Read the notes [[read: notes.txt]]")
                    entries = pi.entries()["entries"]
                    first_answer = expected.branch_exchanges(entries)[0][0][-1]  # the answer to turn one
                    pi.navigate(first_answer, summarize=True)
                    pi.prompt("Take another direction: plan the rollback instead.")
                    compacted = pi.command({"type": "compact"})
                    assert compacted["firstKeptEntryId"]
                    pi.prompt("After the compaction: what is next?")
                    # The MCP server reads this archive: it must hold the turns to find.
                    now = records_by_session(caught_up(watcher, tmp_path / "reference"))
                    first_node = f"{now[header_id(session)]['id']}:0:{first_answer}"
                    pi.prompt(f"What did I say about it earlier? [[history: {REMEMBERED}]]")
                    pi.prompt(f'Show me that turn. [[mcp: history_read {{"id": "{first_node}"}}]]')
                    pi.prompt(f'And this one? [[mcp: history_read {{"id": "{MISSING_NODE}"}}]]')
                    reported = pi.entries()
                    assert pi.close() == 0, pi.stderr.decode(errors="replace")
                with world.rpc(other_project, "--session", str(other_session)) as pi:
                    reported_other = pi.entries()

                final = caught_up(watcher, tmp_path / "reference")
                written = sum(p.stat().st_size for p in world.sessions.rglob("*.jsonl"))
                # The status file follows the records within the same tick of the service.
                status = status_when(watcher, lambda s: s["bytes_parsed_total"] >= written)
            finally:
                code = watcher.stop()
            assert code == 0, f"pbot-watch run did not stop cleanly on SIGTERM\n{watcher.log_tail()}"

            requests = [scripted_model.why(r) for r in model.chat_requests]

        # --- the service's own account: no errors, and every byte Pi wrote parsed exactly once ---
        assert status["errors"] == [] and status["warnings"] == [], status
        assert status["sessions_tracked"] == 2, status
        assert status["bytes_parsed_total"] == written, (
            "the watcher re-read bytes while following Pi's appends"
        )

        # --- the session Pi wrote has everything the scenario was for ------------------------
        kinds = [e["type"] for e in reported["entries"]]
        assert "branch_summary" in kinds and "compaction" in kinds, kinds
        assert {"bash", "read", "history", "mcp", "after-tool", "summary"} <= set(requests), " | ".join(
            requests
        )
        assert not [r for r in requests if r.startswith("error")], " | ".join(requests)

        # --- exchanges in the archive == exchanges Pi reports ---------------------------------
        expected.assert_simple(reported["entries"])
        branches = expected.branch_exchanges(reported["entries"])
        assert len(branches) == 2, branches  # before the branch point, and the branch taken after it
        records = records_by_session(final)
        record = records[header_id(session)]
        assert expected.record_exchanges(record) == {x for branch in branches for x in branch}
        assert len(records) == 2  # the other workspace's session too
        other = expected.branch_exchanges(reported_other["entries"])
        assert expected.record_exchanges(records[header_id(other_session)]) == {
            x for branch in other for x in branch
        }
        assert {json.loads(data)["workspace"] for data in final.values()} == {
            str(project),
            str(other_project),
        }

        # --- the MCP tool call: Pi ran pbot-watch's search and got the earlier turn back ------
        (search,) = tool_results(session, scripted_model.MCP_TOOL_PREFIX + "history_search")
        assert not search.get("isError"), result_text(search)
        text = result_text(search)
        first_node = f"{record['id']}:0:{branches[0][0][-1]}"
        assert REMEMBERED in text
        assert "Monday" in text  # the stored turn's own words, not an echo of the query
        assert first_node in text  # the hit is that turn's exchange node
        assert OTHER_WORKSPACE_WORD not in text
        read, refused = tool_results(session, scripted_model.MCP_TOOL_PREFIX + "history_read")
        assert not read.get("isError"), result_text(read)
        assert "the quokka migration starts on Monday" in result_text(read)
        # A node that does not exist comes back from pbot-watch as a tool error naming it.
        assert refused.get("isError"), result_text(refused)
        assert MISSING_NODE in result_text(refused)
        assert archive_files(archive) == final
