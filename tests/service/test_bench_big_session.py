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
        assert service[phase]["p95 s searchable"] is not None, phase
        assert service[phase]["parsed bytes per append p50"] > 0, phase
        assert service[phase]["service CPU s per append"] is not None, phase
    # The first append after a restart resumes the session from its log: its own bytes only.
    restart = service["first append after a restart"]
    assert restart["parsed bytes per append p50"] == restart["appended bytes per append"]
    assert service["peak RSS MB"] > 0


def test_big_session_bench_child_smoke() -> None:
    """The child part answers cues and pinned searches in a first child, a restarted one, and one after the service."""
    result = bench("big_session.py", "--size-mb", "1", "--parts", "child", "--json", timeout=170)
    assert result.returncode == 0, result.stdout + result.stderr
    child = json.loads(result.stdout)["1 MB"]["child"]
    assert child["raw memory built by"] == "the child"
    for figure in (
        "cues s, no saved ledger",
        "first pinned search s",
        "warm pinned search s",
        "cues s, new child with the saved ledger",
        "cues s after a turn and a compaction",
        "pinned search s after the append",
    ):
        assert child[figure] > 0, figure
    assert child["peak RSS MB"] > 0
    prepared = child["where the service read it"]  # a service run on the session, then stopped
    for figure in ("cues s", "first pinned search s", "warm pinned search s"):
        assert prepared[figure] > 0, figure
    assert prepared["first search: sessions not searched"] == 0  # the service built raw memory
    assert prepared["ledger MB on disk"] == 0  # a 1 MB session is left to the child
