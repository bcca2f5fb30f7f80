"""``bench/watch_latency.py --smoke`` runs end to end and reports every figure (no timing asserted)."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import bench

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def test_watch_latency_smoke() -> None:
    """Every phase reports its figures; every answer written reached its record."""
    result = bench("watch_latency.py", "--smoke", "--json", timeout=110)
    assert result.returncode == 0, result.stdout + result.stderr
    figures = json.loads(result.stdout)
    assert set(figures) == {"latency", "overload", "big session", "idle", "memory"}
    assert figures["latency"]["missing"] == 0
    assert figures["latency"]["answers seen in records"] > 0
    # One appended pair parses the pair's bytes, not the session's.
    assert figures["big session"]["bytes parsed for the append"] == figures["big session"]["appended bytes"]
    assert figures["memory"]["records written"] == figures["memory"]["sessions"]
    assert figures["overload"]["missing"] == 0
    assert figures["overload"]["final archive equals a one-shot index"] is True
    assert len(figures["overload"]["p95 ms per window"]) == 2
