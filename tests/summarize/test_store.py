"""summaries.db: migrations, cache, usage per day, failures with backoff, and the limits."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pbot_watch.summarize.base import LimitReached
from pbot_watch.summarize.store import MIGRATIONS, Limits, Meter, SummaryStore, backoff_seconds, today


class TestMigrations:
    def test_applied_once_and_recorded(self, tmp_path: Path) -> None:
        """Opening twice applies nothing the second time; every migration is recorded by name."""
        SummaryStore(tmp_path).close()
        store = SummaryStore(tmp_path)
        store.close()
        names = [
            row[0]
            for row in sqlite3.connect(tmp_path / "summaries.db").execute("SELECT name FROM _migrations")
        ]
        assert names == [name for name, _ in MIGRATIONS]


class TestCache:
    def test_round_trip_and_no_empty_text(self, tmp_path: Path) -> None:
        """A summary is found by its key; an empty one is refused."""
        store = SummaryStore(tmp_path)
        store.remember("sha256:1", "litellm/m", "m", "the gist", 10, 2)
        cached = store.cached("sha256:1")
        assert cached is not None
        assert (cached.text, cached.summarizer) == ("the gist", "litellm/m")
        assert store.cached("sha256:2") is None
        with pytest.raises(ValueError, match="empty"):
            store.remember("sha256:3", "litellm/m", "m", "  ")


class TestUsage:
    def test_adds_up_per_day(self, tmp_path: Path) -> None:
        """Calls and tokens are summed per local day, across models."""
        store = SummaryStore(tmp_path)
        day_one = 1_800_000_000.0
        store.add_usage("a", 100, 10, 0.01, day_one)
        store.add_usage("b", 50, 5, 0.0, day_one)
        store.add_usage("a", 7, 1, 0.0, day_one + 86_400)
        used = store.usage(today(day_one))
        assert (used.calls, used.input_tokens, used.output_tokens) == (2, 150, 15)
        assert used.cost_usd == pytest.approx(0.01)
        assert store.usage(today(day_one + 86_400)).calls == 1


class TestFailures:
    def test_counted_with_doubling_backoff(self, tmp_path: Path) -> None:
        """Each failure on the same input doubles the wait; another input starts again at one."""
        store = SummaryStore(tmp_path)
        first = store.record_failure("n", "k1", "boom", now=1000.0, base=10)
        second = store.record_failure("n", "k1", "boom", now=1000.0, base=10)
        assert (first.errors, first.retry_at) == (1, 1010.0)
        assert (second.errors, second.retry_at) == (2, 1020.0)
        assert store.record_failure("n", "k2", "other", now=1000.0, base=10).errors == 1
        store.clear_failure("n")
        assert store.failure("n") is None
        assert backoff_seconds(50) == 6 * 3600

    def test_survive_a_restart(self, tmp_path: Path) -> None:
        """Failure counts are persisted, not kept in memory."""
        SummaryStore(tmp_path).record_failure("n", "k", "boom")
        failure = SummaryStore(tmp_path).failure("n")
        assert failure is not None
        assert failure.errors == 1


class TestMeter:
    def test_daily_call_limit(self, tmp_path: Path) -> None:
        """After the day's calls are used, no call is allowed and the reason names the limit."""
        meter = Meter(
            SummaryStore(tmp_path), Limits(calls_per_day=2, tokens_per_day=10**6, calls_per_idle=10)
        )
        for _ in range(2):
            meter.before_call()
            meter.after_call("m", 10, 1, 0.0)
        with pytest.raises(LimitReached, match=r"daily call limit reached \(2/2"):
            meter.before_call()

    def test_daily_token_and_idle_limits(self, tmp_path: Path) -> None:
        """Tokens per day and calls per idle period are limits too; zero calls disables the model."""
        store = SummaryStore(tmp_path)
        tokens = Meter(store, Limits(calls_per_day=100, tokens_per_day=50, calls_per_idle=100))
        tokens.after_call("m", 45, 5, 0.0)
        assert (tokens.reason() or "").startswith("daily token limit reached")
        idle = Meter(
            SummaryStore(tmp_path / "other"),
            Limits(calls_per_day=100, tokens_per_day=10**6, calls_per_idle=1),
        )
        idle.after_call("m", 1, 1, 0.0)
        assert (idle.reason() or "").startswith("idle-period call limit reached")
        assert "disabled" in (Meter(store, Limits(calls_per_day=0)).reason() or "")
