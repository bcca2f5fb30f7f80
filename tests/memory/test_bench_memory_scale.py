"""``bench/memory_scale.py`` runs end to end on two tiny corpora and prints every figure (no timing asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import bench

pytestmark = pytest.mark.timeout(300)


def test_tiny_run_reports_every_query_class_the_run_size_and_growth(tmp_path: Path) -> None:
    result = bench(
        "memory_scale.py",
        *("--sizes", "0.3,0.6", "--sessions", "3", "--exchanges", "4", "--runs", "2", "--cli-runs", "1"),
        *("--out", str(tmp_path), "--json"),
        timeout=280,
    )
    assert 0 == result.returncode, result.stdout + result.stderr
    figures = json.loads(result.stdout)
    large = figures["0.6 MB"]
    classes = {"common word", "rare word", "phrase with punctuation", "CJK", "no match", "terms"}
    assert classes == set(large["in process"]) == set(large["cli"]) == set(large["cli without a server"])
    assert large["in process"]["no match"]["hits"] == 0
    assert large["in process"]["common word"]["hits"] > 0
    assert {"first ms", "p50 ms", "tallied"} <= set(large["in process"]["common word"])
    assert large["search.db"]["MB"] > 0 and "mem_literal" in large["search.db"]["by component MB"]
    assert large["search.db"]["pages"]["page size"] == 16 << 10
    assert large["cli"]["common word"]["peak RSS MB"] > 0
    assert large["cli without a server"]["common word"]["peak RSS MB"] > 0
    ran = large["run from empty state"]
    assert ran["raw memory all held s"] > 0 and ran["caught up s"] > 0
    # The run's search.db holds the history index beside raw memory.
    assert {"mem_literal", "nodes_literal"} <= set(ran["search.db"]["by component MB"])
    assert ran["search.db"]["MB"] > 0
    assert figures["growth (large / small)"]["bytes"] > 1
