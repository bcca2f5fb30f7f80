"""``bench/index_throughput.py`` runs end to end on a tiny corpus and prints every figure (no timing asserted)."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import bench

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


class TestIndexThroughputBench:
    def test_tiny_run_reports_figures(self) -> None:
        """A 12-session, 1 MB corpus: every session indexed, every figure printed."""
        result = bench(
            "index_throughput.py",
            "--sessions",
            "12",
            "--size-mb",
            "1",
            "--workspaces",
            "3",
            "--repeat",
            "1",
            "--json",
            timeout=170,
        )
        assert 0 == result.returncode, result.stdout + result.stderr
        figures = json.loads(result.stdout)
        assert 12 == figures["corpus"]["sessions"]
        assert 12 == figures["index_all, empty archive"]["written"]
        assert 12 == figures["index_all, nothing changed"]["unchanged"]
        assert "12 records written" in figures["pbot-watch index (CLI, empty archive)"]["summary"]
        assert figures["index_all, empty archive"]["ratio to baseline"] > 0
