"""Summaries inside the real service (``pbot-watch run`` in a subprocess) against a real model server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pbot_watch.summarize.base import node_input
from tests.support.archive import records
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.pi_sessions import PiSession
from tests.support.service import ServiceProcess, wait_for
from tests.support.summaries import MODEL, summaries

# litellm's import in the service is CPU-bound: 15 s at a load of 6, well over 20 s at 13; the
# tests wait for the service to report it (``loaded``), then hold the model to their own deadlines.
LITELLM_IMPORT_DEADLINE = 150.0
pytestmark = [pytest.mark.slow, pytest.mark.timeout(90 + LITELLM_IMPORT_DEADLINE)]


@pytest.fixture
def model_env(server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> OpenAIServer:
    monkeypatch.setenv("PBOT_WATCH_MODEL", MODEL)
    monkeypatch.setenv("PBOT_WATCH_API_BASE", server.base_url)
    monkeypatch.setenv("PBOT_WATCH_REQUEST_TIMEOUT", "20")
    return server


def loaded(service: ServiceProcess) -> None:
    """Wait until the service has imported litellm: from then on a request is late only for our reasons."""
    service.wait_log("litellm_loaded", "litellm's import in the service", timeout=LITELLM_IMPORT_DEADLINE)


def nodes_of(archive: Path, session_id: str = "s-main") -> dict[str, dict[str, Any]]:
    found = records(archive).get(session_id)
    return summaries(found) if found else {}


class TestIdle:
    def test_append_cancels_the_call_and_the_next_idle_period_completes_it(
        self, model_env: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A line appended mid-call aborts it (the server sees the disconnect); later the node is done."""
        monkeypatch.setenv("PBOT_WATCH_IDLE_SECONDS", "0.5")
        server = model_env
        pi = PiSession("s-main", "/w")
        pi.exchanges(4)
        path = pi.write(tmp_path / "sessions" / "--w--" / "main.jsonl")
        server.script(Reply.hanging())
        archive = tmp_path / "archive"
        with ServiceProcess([tmp_path / "sessions"], archive).start() as service:
            loaded(service)
            server.wait_for_requests(1, timeout=20)
            assert [n["ready"] for n in nodes_of(archive).values()] == [False]
            pi.user("one more question while the summary is being written")
            pi.append_to(path, len(pi.entries) - 1)
            server.wait_for_disconnects(1, timeout=10)
            # The next idle period asks again and this time gets an answer.
            server.wait_for_requests(2, timeout=20)
            wait_for(
                lambda: [n["ready"] for n in nodes_of(archive).values()] == [True],
                what="the summary",
                timeout=40,
            )
            (node,) = nodes_of(archive).values()
            assert (node["text"], node["summarizer"]) == ("scripted summary", f"litellm/{MODEL}")
            # The abandoned request counts too: the provider may have billed it.
            status = service.wait_status(lambda s: s.summaries.get("calls_today") == 2, "usage in status")
            assert status.summaries["model"] == MODEL
            assert status.idle_worker["cancelled"] >= 1
            assert service.stop() == 0
        assert server.chat_requests[0].user_text == server.chat_requests[1].user_text

    def test_reuse_rule_after_appends(
        self, model_env: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """After appends, unchanged groups keep their summaries; only changed and new ones cost calls."""
        monkeypatch.setenv("PBOT_WATCH_IDLE_SECONDS", "0.3")
        server = model_env
        server.handler = lambda r: Reply.answer(f"summary #{len(server.requests)}")
        pi = PiSession("s-main", "/w")
        pi.exchanges(15)
        pi.user("the sixteenth question, not answered yet")
        path = pi.write(tmp_path / "sessions" / "--w--" / "main.jsonl")
        archive = tmp_path / "archive"
        with ServiceProcess([tmp_path / "sessions"], archive).start() as service:
            loaded(service)
            wait_for(
                lambda: len(nodes_of(archive)) == 5 and all(n["ready"] for n in nodes_of(archive).values()),
                what="the first summaries",
                timeout=40,
            )
            before = nodes_of(archive)
            assert len(server.chat_requests) == 5
            count = len(pi.entries)
            pi.assistant("the sixteenth answer")
            pi.exchanges(4, start=100)
            pi.append_to(path, count)
            wait_for(
                lambda: len(nodes_of(archive)) == 6 and all(n["ready"] for n in nodes_of(archive).values()),
                what="the summaries after the appends",
                timeout=40,
            )
            after = nodes_of(archive)
            status = service.wait_status(lambda s: s.summaries.get("calls_today") == 8, "usage in status")
            assert status.summaries["pending"] == 0
            assert service.stop() == 0
        kept = {k for k in before if k in after and after[k]["text"] == before[k]["text"]}
        redone = set(after) - kept
        # Groups 1-3 kept; group 4 (its last exchange got its answer), level 2 above it, and the new group 5 redone.
        assert len(kept) == 3
        assert all(after[k]["level"] == 1 for k in kept)
        assert sorted(after[k]["level"] for k in redone) == [1, 1, 2]
        record = records(archive)["s-main"]
        by_id = {n["id"]: n for n in record["nodes"]}
        asked_after = [r.user_text for r in server.chat_requests[5:]]
        assert sorted(asked_after) == sorted(
            node_input([by_id[c] for c in by_id[k]["children"]]) for k in redone
        )


class TestOfflineService:
    def test_offline_by_default(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """With no model configured the service fills summaries offline and reports it."""
        monkeypatch.setenv("PBOT_WATCH_IDLE_SECONDS", "0.2")
        pi = PiSession("s-main", "/w")
        pi.exchanges(4, chinese=True)
        pi.write(tmp_path / "sessions" / "--w--" / "main.jsonl")
        archive = tmp_path / "archive"
        with ServiceProcess([tmp_path / "sessions"], archive).start() as service:
            wait_for(
                lambda: [n["ready"] for n in nodes_of(archive).values()] == [True], what="the offline summary"
            )
            (node,) = nodes_of(archive).values()
            assert node["summarizer"] == "offline/1"
            assert str(node["text"]).startswith("提问：")
            status = service.wait_status(lambda s: s.summaries.get("pending") == 0, "the summary status")
            assert (status.summaries["model"], status.summaries["calls_today"]) == ("offline", 0)
            assert service.stop() == 0


class TestBadAnswerInTheService:
    def test_a_bad_answer_fails_its_node_once_and_the_others_go_on(
        self, model_env: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A 2 MB answer with a lone surrogate: one counted failure, backed off; status stays small."""
        monkeypatch.setenv("PBOT_WATCH_IDLE_SECONDS", "0.5")
        server = model_env
        bad = json.loads('"' + "x" * 2_000_000 + '\\ud800"')
        server.handler = lambda r: Reply.answer(bad) if r.index == 0 else Reply.answer("a good short summary")
        pi = PiSession("s-main", "/w")
        pi.exchanges(8)
        path = pi.write(tmp_path / "sessions" / "--w--" / "main.jsonl")
        archive = tmp_path / "archive"
        with ServiceProcess([tmp_path / "sessions"], archive).start() as service:
            loaded(service)
            status = service.wait_status(
                lambda s: s.summaries.get("failed") == 1 and s.idle_worker.get("runs", 0) >= 1,
                "the bad answer to be a counted failure",
                timeout=40,
            )
            wait_for(
                lambda: sorted(n["ready"] for n in nodes_of(archive).values()) == [False, True],
                what="the other node",
            )
            asked = len(server.chat_requests)
            for more in range(2):  # two more idle periods: the failed node waits out its back-off
                pi.exchanges(1, start=8 + more)
                pi.append_to(path, len(pi.entries) - 2)
                service.wait_status(
                    lambda s, n=more: s.idle_worker.get("runs", 0) >= 2 + n, "another idle period"
                )
            failed_input = server.chat_requests[0].user_text
            assert all(r.user_text != failed_input for r in server.chat_requests[1:]), (
                "it was not asked again"
            )
            assert len(server.chat_requests) >= asked
            status = service.wait_status(lambda s: s.summaries.get("failed") == 1, "the failure in status")
            assert "BadAnswer" in (status.summaries.get("last_error") or "")
            assert (service.state_dir / "status.json").stat().st_size < 100_000
            assert service.stop() == 0
