"""The model summarizer through litellm's real HTTP path, against a server on 127.0.0.1."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pbot_watch.summarize.base import Cancelled, EmptySummary, LimitReached, ModelRefused, SummaryFailed
from pbot_watch.summarize.litellm_model import LitellmSummarizer
from pbot_watch.summarize.prompts import load_prompt
from pbot_watch.summarize.store import Limits, Meter, SummaryStore
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.summaries import MODEL


@pytest.fixture
def summarizer(server: OpenAIServer) -> Iterator[LitellmSummarizer]:
    model = LitellmSummarizer(MODEL, api_base=server.base_url, request_timeout=5, retry_wait=0.01)
    yield model
    model.close()


class TestCall:
    def test_normal_summary(self, server: OpenAIServer, summarizer: LitellmSummarizer) -> None:
        """The prompt goes as the system message, the node input as the user message, no retries hidden."""
        server.script(Reply.answer("  A short summary.  ", usage=(120, 7)))
        summary = summarizer.summarize("[a — b]\n用户：\nhello", threading.Event())
        assert (summary.text, summary.input_tokens, summary.output_tokens, summary.calls) == (
            "A short summary.",
            120,
            7,
            1,
        )
        (request,) = server.chat_requests
        assert request.body["messages"] == [
            {"role": "system", "content": load_prompt().text},
            {"role": "user", "content": "[a — b]\n用户：\nhello"},
        ]
        assert request.body["model"] == "fake-summarizer"
        assert request.headers["authorization"] == "Bearer sk-test-not-a-real-key"

    def test_rate_limit_then_success(self, server: OpenAIServer, summarizer: LitellmSummarizer) -> None:
        """A 429 is retried (by us, once per attempt) and the next answer is used."""
        server.script(Reply.rate_limited(), Reply.server_error(), Reply.answer("after retries"))
        assert summarizer.summarize("x", threading.Event()).text == "after retries"
        assert len(server.chat_requests) == 3

    def test_auth_error_is_not_retried(self, server: OpenAIServer, summarizer: LitellmSummarizer) -> None:
        """A 401 fails at once: one request, an error naming authentication."""
        server.script(Reply.unauthorized())
        with pytest.raises(ModelRefused, match=r"^AuthenticationError: .*Incorrect API key"):
            summarizer.summarize("x", threading.Event())
        assert len(server.chat_requests) == 1

    def test_missing_key_fails_fast(self, server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without the provider's key nothing is sent (litellm would call it a server error and retry)."""
        monkeypatch.delenv("OPENAI_API_KEY")
        model = LitellmSummarizer(MODEL, api_base=server.base_url, retry_wait=0.01)
        with pytest.raises(ModelRefused, match="missing credentials: OPENAI_API_KEY"):
            model.summarize("x", threading.Event())
        assert server.requests == []

    def test_bad_request_is_not_retried(self, server: OpenAIServer, summarizer: LitellmSummarizer) -> None:
        """A 400 is the request's fault; sending it again cannot help."""
        server.script(Reply.bad_request("context too long"))
        with pytest.raises(Exception, match="context too long"):
            summarizer.summarize("x", threading.Event())
        assert len(server.chat_requests) == 1

    def test_timeout_is_retried_then_fails(self, server: OpenAIServer) -> None:
        """A model that never answers times out on every attempt; each attempt is one request."""
        server.default = Reply.hanging()
        model = LitellmSummarizer(
            MODEL, api_base=server.base_url, request_timeout=0.3, retry_wait=0.01, attempts=2
        )
        try:
            with pytest.raises(Exception, match=r"(?i)timed? ?out") as raised:
                model.summarize("x", threading.Event())
            assert type(raised.value).__name__ == "Timeout"
        finally:
            model.close()
        server.wait_for(lambda s: len(s.chat_requests) == 2 and len(s.disconnects) == 2, timeout=5)

    def test_empty_answer_is_rejected(self, server: OpenAIServer, summarizer: LitellmSummarizer) -> None:
        """No text (or only whitespace) is an error, never an empty summary."""
        server.script(Reply.empty())
        with pytest.raises(EmptySummary):
            summarizer.summarize("x", threading.Event())
        server.script(Reply.answer(" \n "))
        with pytest.raises(EmptySummary):
            summarizer.summarize("x", threading.Event())

    def test_cut_answer_is_rejected(self, server: OpenAIServer, summarizer: LitellmSummarizer) -> None:
        """A summary cut by the output limit is not a summary."""
        server.script(Reply.answer("half a sum", finish_reason="length"))
        with pytest.raises(SummaryFailed, match="cut"):
            summarizer.summarize("x", threading.Event())


class TestCancel:
    @pytest.mark.usefixtures("litellm_imported")
    def test_cancel_closes_the_connection_at_once(
        self, server: OpenAIServer, summarizer: LitellmSummarizer
    ) -> None:
        """Setting the event aborts the request in flight; the server sees the client go away."""
        server.script(Reply.hanging())
        cancel = threading.Event()
        outcome: list[BaseException] = []

        def call() -> None:
            try:
                summarizer.summarize("x", cancel)
            except BaseException as error:  # noqa: BLE001 - collected for the assertion
                outcome.append(error)

        thread = threading.Thread(target=call)
        thread.start()
        server.wait_for_requests(1)
        cancel.set()
        thread.join(2)
        assert not thread.is_alive()
        assert [type(e) for e in outcome] == [Cancelled]
        server.wait_for_disconnects(1, timeout=2)

    def test_set_before_the_call(self, server: OpenAIServer, summarizer: LitellmSummarizer) -> None:
        """A cancelled period makes no request at all."""
        cancel = threading.Event()
        cancel.set()
        with pytest.raises(Cancelled):
            summarizer.summarize("x", cancel)
        assert server.requests == []


class TestLongInput:
    def test_summarized_in_parts_within_the_budget(self, server: OpenAIServer) -> None:
        """An input over the budget (half the context) is cut into parts, each a call, then merged."""
        server.handler = lambda request: Reply.answer(f"part of {len(request.user_text)}")
        model = LitellmSummarizer(MODEL, api_base=server.base_url, context_tokens=4000, retry_wait=0.01)
        try:
            summary = model.summarize("字" * 4500, threading.Event())
        finally:
            model.close()
        sizes = [len(r.user_text) for r in server.chat_requests]
        assert sizes[:3] == [2000, 2000, 500]
        assert len(sizes) == 4
        assert summary.calls == 4
        assert summary.text == f"part of {sizes[-1]}"


class TestMeter:
    def test_limit_stops_before_the_request(self, server: OpenAIServer, tmp_path: Path) -> None:
        """With the day's calls used up, no request leaves and LimitReached says why."""
        meter = Meter(SummaryStore(tmp_path), Limits(calls_per_day=1))
        model = LitellmSummarizer(MODEL, api_base=server.base_url, meter=meter, retry_wait=0.01)
        try:
            model.summarize("x", threading.Event())
            with pytest.raises(LimitReached, match="daily call limit"):
                model.summarize("y", threading.Event())
        finally:
            model.close()
        assert len(server.chat_requests) == 1

    def test_a_run_at_its_cap_does_not_import_litellm(self, tmp_path: Path) -> None:
        """The cap is checked before litellm is imported (seconds of CPU): a ``summarize`` that
        finds the day used up costs nothing. In a process of its own, where nothing imported it.
        """
        script = f"""
import sys, threading
from pathlib import Path
from pbot_watch.summarize.base import LimitReached
from pbot_watch.summarize.litellm_model import LitellmSummarizer
from pbot_watch.summarize.store import Limits, Meter, SummaryStore
store = SummaryStore(Path({str(tmp_path)!r}))
store.add_usage({MODEL!r}, 10, 5, 0.0)  # today's one call, made earlier
meter = Meter(store, Limits(calls_per_day=1))
try:
    LitellmSummarizer({MODEL!r}, api_base="http://127.0.0.1:9", meter=meter).summarize("x", threading.Event())
except LimitReached as error:
    print("limit:", error, "litellm" in sys.modules)
"""
        done = subprocess.run(
            [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("limit: daily call limit"), done.stdout
        assert done.stdout.strip().endswith("False"), done.stdout

    def test_usage_and_estimated_cost_are_recorded(self, server: OpenAIServer, tmp_path: Path) -> None:
        """Tokens go to today's usage, priced from litellm's local cost map when it knows the model."""
        store = SummaryStore(tmp_path)
        model = LitellmSummarizer(
            "openai/gpt-4o-mini", api_base=server.base_url, meter=Meter(store, Limits()), retry_wait=0.01
        )
        server.script(Reply.answer("priced", usage=(1_000_000, 0)))
        summary = model.summarize("x", threading.Event())
        used = store.usage()
        assert (used.calls, used.input_tokens) == (1, 1_000_000)
        assert used.cost_usd == pytest.approx(summary.cost_usd)
        assert 0 < used.cost_usd < 10
