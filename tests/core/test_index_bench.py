"""``bench/index_throughput.py`` runs end to end on a tiny corpus and prints every figure (no timing asserted)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

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


def test_the_generated_sessions_answer_each_tool_call_as_pi_does(tmp_path: Path) -> None:
    """Every tool result names the call just before it (its ``toolCallId``), as Pi writes them.

    The generator once named the next entry's number instead: no call of the benchmark corpora
    had its result, so raw memory held each call and each result as a source of its own.
    """
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from index_throughput import generate

    root, _ = generate(tmp_path / "corpus", sessions=3, size_mb=0.3, workspaces=1, seed=1)
    results = 0
    for path in root.rglob("*.jsonl"):
        calls: set[str] = set()
        for line in path.read_text(encoding="utf-8").splitlines():
            message = json.loads(line).get("message") or {}
            for block in message.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "toolCall":
                    calls.add(block["id"])
            if message.get("role") == "toolResult":
                results += 1
                assert message["toolCallId"] in calls, path
    assert results > 0
