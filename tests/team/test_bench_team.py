"""bench/team_scale.py runs end to end on a tiny size (figures are printed, never asserted)."""

from __future__ import annotations

import shutil

import pytest

from tests.support.cli import bench

pytestmark = pytest.mark.slow


def test_team_scale_smoke() -> None:
    if shutil.which("initdb") is None:
        pytest.skip("PostgreSQL is not installed here (initdb is not on PATH)")
    result = bench(
        "team_scale.py",
        *("--machines", "3", "--exchanges", "150", "--parallel", "2"),
        *("--kills", "3", "--restarts", "1", "--samples", "2", "--repeat", "2"),
        *("--memory-machines", "2", "--memory-sessions", "2", "--memory-turns", "5"),
    )
    assert 0 == result.returncode, result.stderr
    assert "exchanges/s" in result.stdout
    assert "searchable after written" in result.stdout
    assert "literal  zh 1 char" in result.stdout
    assert "literal  en common  workspace" in result.stdout
    assert "raw memory push: 80 sources (2 machines x 2 sessions x 5 turns)" in result.stdout
    assert "raw memory searchable after written" in result.stdout
    assert "(memory search --team)" in result.stdout
    assert "0 records missing, 0 records with wrong or extra nodes" in result.stdout
    assert "tallies kept through the chaos: 0, 0 with a total other" in result.stdout
