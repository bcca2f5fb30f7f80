"""``bench/summary_cost.py`` runs on a tiny history and reports both counts and their ratio."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import bench

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def test_tiny_run_reports_the_ratio() -> None:
    """Forks make the no-cache baseline pay more; the figures come out as JSON."""
    result = bench(
        "summary_cost.py", "--exchanges", "8", "--branches", "1", "--forks", "1", "--json", timeout=110
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    cached, plain = figures["with_cache"], figures["without_cache"]
    assert cached["nodes_summarized"] == plain["nodes_summarized"] > 0
    assert 0 < cached["calls"] < plain["calls"]
    assert figures["call_ratio"] == round(cached["calls"] / plain["calls"], 3)
