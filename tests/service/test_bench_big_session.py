"""``bench/big_session.py`` runs end to end on a tiny session and reports every figure (no timing asserted)."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import bench

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def test_big_session_bench_smoke() -> None:
    """Each phase of the service part reports its appends; none is missing from the record."""
    result = bench(
        "big_session.py", "--size-mb", "1", "--appends", "2", "--parts", "service", "--json", timeout=170
    )
    assert result.returncode == 0, result.stdout + result.stderr
    figures = json.loads(result.stdout)
    one = figures["1 MB"]
    assert one["session"]["tool calls"] > 0
    service = one["service"]
    for phase in ("alone", "with a second active session", "first append after a restart"):
        assert service[phase]["missing"] == 0, phase
        assert service[phase]["p95 s"] is not None, phase
        assert service[phase]["parsed bytes per append p50"] > 0, phase
        assert service[phase]["service CPU s per append"] is not None, phase
    # The first append after a restart resumes the session from its log: its own bytes only.
    restart = service["first append after a restart"]
    assert restart["parsed bytes per append p50"] == restart["appended bytes per append"]
    assert service["peak RSS MB"] > 0
