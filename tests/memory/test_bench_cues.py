"""``bench/cues.py`` measures a generated session and reports every figure (no timing asserted)."""

from __future__ import annotations

import runpy

from tests.support.paths import REPO


def test_cues_bench_reports_its_figures() -> None:
    """A small session is generated, parsed and cued; the figures say what was measured."""
    measure = runpy.run_path(str(REPO / "bench" / "cues.py"))["measure"]
    figures = measure(size_mb=0.3, batch_kb=60, repeat=1)
    assert {"session", "parse s", "cues s", "total s", "batch", "lines", "block tokens"} == set(figures)
    assert figures["batch"] == figures["session"]["compactions"] > 0
    assert figures["lines"] > 0
