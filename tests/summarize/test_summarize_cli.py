"""``pbot-watch summarize`` as a person runs it: a real subprocess, a real model server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.archive import records
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.pi_sessions import PiSession
from tests.support.summaries import MODEL, summaries

# A run with a model imports litellm first: CPU-bound, 15 s at a load of 6 and over 20 s at 9;
# a test here may start two such runs. The deadlines leave room for that, not for a slow model.
RUN_SECONDS = 100
pytestmark = pytest.mark.timeout(2 * RUN_SECONDS + 20)


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pbot_watch", *args],
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        env={**os.environ, **(env or {})},
        check=False,
    )


def roots(folder: Path) -> tuple[str, ...]:
    """``--sessions`` and ``--archive`` of a folder as the ``history`` fixture lays it out."""
    return ("--sessions", str(folder / "sessions"), "--archive", str(folder / "archive"))


def model_flags(server: OpenAIServer) -> tuple[str, ...]:
    return ("--model", MODEL, "--api-base", server.base_url)


class TestSummarizeCommand:
    def test_offline_without_a_model(self, history: Path) -> None:
        """Indexes, then fills every summary offline; says what it did."""
        result = cli("summarize", *roots(history))
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("2 summaries written (0 from cache, 0 model calls")
        assert "1 session, 1 record written" in result.stderr
        nodes = summaries(records(history / "archive")["s-main"])
        assert {n["summarizer"] for n in nodes.values()} == {"offline/1"}
        assert "litellm" not in result.stderr

    def test_limit_counts_summaries_written(self, tmp_path: Path) -> None:
        """--limit N stops once N summaries are written, and the line's pending count is what is left."""
        pi = PiSession("s-main", "/w")
        pi.exchanges(12)  # three summaries, none above them
        pi.write(tmp_path / "sessions" / "--w--" / "main.jsonl")
        where = roots(tmp_path)
        nothing = cli("summarize", *where, "--limit", "0")
        assert nothing.returncode == 0, nothing.stderr
        assert nothing.stdout.startswith("0 summaries written"), nothing.stdout
        assert "3 pending; --limit reached" in nothing.stdout
        one = cli("summarize", *where, "--limit", "1")
        assert one.stdout.startswith("1 summaries written"), one.stdout
        assert "2 pending; --limit reached" in one.stdout
        assert sorted(n["ready"] for n in summaries(records(tmp_path / "archive")["s-main"]).values()) == [
            False,
            False,
            True,
        ]
        rest = cli("summarize", *where, "--limit", "5")
        assert rest.stdout.startswith("2 summaries written"), rest.stdout
        assert "0 pending; nothing left to do" in rest.stdout

    @pytest.mark.slow
    def test_model_from_flags_and_environment(self, history: Path, server: OpenAIServer) -> None:
        """--model/--api-base pick the model and --limit stops after N summaries; PBOT_WATCH_MODEL works too."""
        where = roots(history)
        result = cli("summarize", *where, *model_flags(server), "--limit", "1")
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("1 summaries written (0 from cache, 1 model calls")
        assert "--limit reached" in result.stdout
        env = {"PBOT_WATCH_MODEL": MODEL, "PBOT_WATCH_API_BASE": server.base_url}
        rest = cli("summarize", *where, env=env)
        assert rest.returncode == 0, rest.stderr
        assert rest.stdout.startswith("1 summaries written (0 from cache, 1 model calls"), rest.stdout
        assert "0 pending; nothing left to do" in rest.stdout
        assert len(server.chat_requests) == 2

    @pytest.mark.slow
    def test_auth_error_is_reported(self, history: Path, server: OpenAIServer) -> None:
        """A refused key fails the nodes (not retried) and the error is shown."""
        server.default = Reply.unauthorized()
        result = cli("summarize", *roots(history), *model_flags(server))
        assert result.returncode == 0, result.stderr
        assert "1 failed" in result.stdout
        assert "refuses requests" in result.stdout
        assert "AuthenticationError: OpenAIException - Incorrect API key provided" in result.stdout
        assert len(server.chat_requests) == 1

    @pytest.mark.slow
    def test_ctrl_c_cancels_the_call_and_stops(self, history: Path, server: OpenAIServer) -> None:
        """SIGINT aborts the request in flight (the server sees it) and exits 130, nothing written."""
        server.default = Reply.hanging()
        proc = subprocess.Popen(
            [sys.executable, "-m", "pbot_watch", "summarize", *roots(history), *model_flags(server)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            server.wait_for_requests(1, timeout=RUN_SECONDS)  # after litellm's import
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 130, err
        assert "interrupted" in out
        server.wait_for_disconnects(1)
        nodes = summaries(records(history / "archive")["s-main"])
        assert not any(n["ready"] for n in nodes.values())


class TestStatusImportsNoLitellm:
    def test_status_json_has_summaries_without_litellm(self, history: Path) -> None:
        """The summary status is read from SQLite; computing it never imports litellm."""
        cli("summarize", *roots(history))
        code = (
            "import json, sys\n"
            "from pbot_watch.config import load_settings\n"
            "from pbot_watch.summarize.worker import summary_status\n"
            "print(json.dumps(summary_status(load_settings())))\n"
            "assert 'litellm' not in sys.modules\n"
        )
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr
        status = json.loads(result.stdout)
        assert (status["pending"], status["model"]) == (0, "offline")
