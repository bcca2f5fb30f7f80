"""Answers and servers that misbehave, through the real ``pbot-watch summarize`` and a real server.

A model answer is untrusted input: a lone surrogate, a 3,000,000-character answer or one longer
than its input is a counted failure of that node (backed off, other nodes go on), never a crash
and never a summary. Every request the server receives counts against the caps, whatever became
of it, and usage figures are clamped, so the caps hold against any server.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from pbot_watch.config_paths import default_state_dir
from pbot_watch.summarize.base import MAX_TOKENS_PER_CALL
from tests.support.archive import records
from tests.support.cli import run
from tests.support.openai_server import OpenAIServer, Reply, Request
from tests.support.pi_sessions import PiSession
from tests.support.summaries import MODEL, summaries

pytestmark = pytest.mark.timeout(120)

SURROGATE_ANSWER = json.loads('"a summary with a lone surrogate \\ud800 in it"')
GIANT = 3_000_000
CAPS = {"max_calls_per_idle": "3", "max_calls_per_day": "3", "request_timeout": "1"}


def summarize(history: Path, server: OpenAIServer, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "OPENAI_API_KEY": "sk-test-not-a-real-key",
        "PBOT_WATCH_SUMMARY_RETRY_SECONDS": "600",
        **{f"PBOT_WATCH_{k.upper()}": v for k, v in settings.items()},
    }
    where = ("--sessions", str(history / "sessions"), "--archive", str(history / "archive"))
    return run("summarize", *where, "--model", MODEL, "--api-base", server.base_url, env=env, timeout=110)


def store_rows(query: str) -> list[tuple[object, ...]]:
    db = sqlite3.connect(default_state_dir() / "summaries.db")
    try:
        return db.execute(query).fetchall()
    finally:
        db.close()


def usage() -> tuple[int, int]:
    """Calls and tokens recorded in the store (all days: a test runs within one)."""
    calls, tokens = store_rows(
        "SELECT coalesce(sum(calls), 0), coalesce(sum(input_tokens + output_tokens), 0) FROM usage"
    )[0]
    assert isinstance(calls, int) and isinstance(tokens, int)
    return calls, tokens


def ready_texts(history: Path) -> list[str]:
    return [n["text"] for n in summaries(records(history / "archive")["s-main"]).values() if n["ready"]]


@pytest.fixture
def first_bad(server: OpenAIServer) -> list[Reply]:
    """The first request gets the reply put in the list; every other one a good summary."""
    bad: list[Reply] = []

    def handler(request: Request) -> Reply:
        return bad[0] if request.index == 0 and bad else Reply.answer("a good short summary")

    server.handler = handler
    return bad


class TestBadAnswers:
    @pytest.mark.parametrize(
        ("reply", "error"),
        [
            (Reply.answer(SURROGATE_ANSWER), "lone surrogate U+D800"),
            pytest.param(
                Reply.answer("x" * GIANT),
                f"{GIANT} UTF-16 units, more than a summary's",
                marks=pytest.mark.slow,
            ),
            pytest.param(
                Reply.answer("far too long " * 400), "is not shorter than its input", marks=pytest.mark.slow
            ),
        ],
        ids=["lone-surrogate", "giant", "longer-than-input"],
    )
    def test_is_a_counted_failure_and_the_other_node_goes_on(
        self, history: Path, server: OpenAIServer, first_bad: list[Reply], reply: Reply, error: str
    ) -> None:
        """rc 0, the other level-1 node is summarized, the bad one stays pending with its failure."""
        first_bad.append(reply)
        result = summarize(history, server)
        assert result.returncode == 0, result.stderr[-2000:]
        assert "1 summaries written" in result.stdout, result.stdout[-2000:]
        assert "1 failed" in result.stdout
        assert error in result.stdout
        assert len(result.stdout) < 2000, "the error text is bounded"
        assert ready_texts(history) == ["a good short summary"]
        assert sum(f.stat().st_size for f in (history / "archive").glob("*.json")) < 20_000
        [(errors, last_error)] = store_rows("SELECT errors, last_error FROM failures")
        assert errors == 1
        assert isinstance(last_error, str) and error in last_error and len(last_error) <= 300
        assert store_rows("SELECT count(*) FROM cache") == [(1,)], "a bad answer is never cached"
        assert usage()[0] == 2, "the bad answer was paid for: it counts"

    @pytest.mark.slow
    def test_a_failed_node_backs_off_instead_of_paying_again(
        self, history: Path, server: OpenAIServer, first_bad: list[Reply]
    ) -> None:
        """The next run does not ask again for the node whose answer was bad (its back-off runs)."""
        first_bad.append(Reply.answer(SURROGATE_ANSWER))
        assert summarize(history, server).returncode == 0
        asked = len(server.chat_requests)
        again = summarize(history, server)
        assert again.returncode == 0, again.stderr[-2000:]
        assert len(server.chat_requests) == asked
        assert "1 failed" in again.stdout or "0 summaries written" in again.stdout


class TestCapsCountEveryAttempt:
    """``max_calls_per_idle = 3``: the server never sees more requests than the store recorded."""

    @pytest.mark.parametrize(
        "reply",
        [
            Reply.not_json(),
            pytest.param(Reply.server_error(), marks=pytest.mark.slow),
            pytest.param(Reply.rate_limited(), marks=pytest.mark.slow),
            pytest.param(Reply.hanging(), marks=pytest.mark.slow),
        ],
        ids=["not-json", "500", "429", "never-answers"],
    )
    def test_failed_attempts_count(self, history: Path, server: OpenAIServer, reply: Reply) -> None:
        server.default = reply
        result = summarize(history, server, **CAPS)
        assert result.returncode == 0, result.stderr[-2000:]
        calls, tokens = usage()
        assert len(server.chat_requests) == calls == 3, result.stdout
        assert "call limit reached" in result.stdout
        if reply.hang:
            assert tokens > 0, "a request that timed out may be billed: its prompt is counted"
        again = summarize(history, server, **CAPS)
        assert again.returncode == 0
        assert len(server.chat_requests) == 3, "the day's cap holds across runs"

    @pytest.mark.slow
    def test_negative_usage_cannot_lower_the_day(self, history: Path, server: OpenAIServer) -> None:
        server.default = Reply.answer("a good short summary", usage=(10, -1_000_000))
        result = summarize(history, server)
        assert result.returncode == 0, result.stderr[-2000:]
        calls, tokens = usage()
        assert calls == len(server.chat_requests) >= 2
        assert tokens == 10 * calls

    @pytest.mark.slow
    def test_huge_usage_is_clamped_and_trips_the_token_cap(self, history: Path, server: OpenAIServer) -> None:
        """10**20 prompt tokens: no OverflowError, the paid summary is kept, the day's token cap holds."""
        server.default = Reply.answer("a good short summary", usage=(10**20, 5))
        result = summarize(history, server)
        assert result.returncode == 0, result.stderr[-2000:]
        assert "1 summaries written" in result.stdout, result.stdout
        assert "daily token limit reached" in result.stdout
        assert usage() == (1, MAX_TOKENS_PER_CALL + 5)
        assert len(server.chat_requests) == 1


class TestForeignRecords:
    """A record with no session file on this machine is not summarized on the user's budget."""

    @pytest.fixture
    def foreign(self, history: Path) -> Path:
        """``history``'s archive also holds the record of a session whose file is elsewhere."""
        elsewhere = history / "elsewhere"
        pi = PiSession("s-foreign", "/w")
        pi.exchanges(8)
        pi.write(elsewhere / "sessions" / "--w--" / "foreign.jsonl")
        done = run("index", "--sessions", str(elsewhere / "sessions"), "--archive", str(history / "archive"))
        assert done.returncode == 0, done.stderr
        shutil.rmtree(elsewhere)
        return history

    @pytest.mark.slow
    def test_left_alone_unless_asked(self, foreign: Path, server: OpenAIServer) -> None:
        server.default = Reply.answer("a good short summary")
        result = summarize(foreign, server)
        assert result.returncode == 0, result.stderr[-2000:]
        assert "2 summaries written" in result.stdout, result.stdout
        assert "1 foreign records left alone (--foreign summarizes them)" in result.stdout
        assert len(server.chat_requests) == 2
        assert all(server.chat_requests[i].user_text.count("s-foreign") == 0 for i in range(2))
        archive = records(foreign / "archive")
        assert not any(n["ready"] for n in summaries(archive["s-foreign"]).values())
        found = run(
            "search", "(#3)", "--archive", str(foreign / "archive"), "--session", "s-foreign", "--json"
        )
        assert found.returncode == 0, found.stderr
        assert json.loads(found.stdout)["matches"], "a foreign record stays searchable"

        asked = summarize(foreign, server, summarize_foreign="true")
        assert asked.returncode == 0, asked.stderr[-2000:]
        assert "2 summaries written" in asked.stdout, asked.stdout
        assert all(n["ready"] for n in summaries(records(foreign / "archive")["s-foreign"]).values())
