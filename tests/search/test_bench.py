"""The benchmarks run end to end on a tiny size (figures are printed, never asserted)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.cli import bench
from tests.support.paths import SHARED

pytestmark = pytest.mark.slow


class TestBenchmarks:
    def test_search_latency_smoke(self, tmp_path: Path) -> None:
        """search_latency builds an archive, checks the index against the scan and prints a table."""
        result = bench(
            "search_latency.py",
            "--exchanges",
            "400",
            "--repeat",
            "2",
            "--scan-repeat",
            "1",
            "--keep",
            str(tmp_path),
        )
        assert 0 == result.returncode, result.stderr
        assert "literal  en common" in result.stdout
        assert "speed-up over the scan" in result.stdout.splitlines()[-1]

    def test_index_build_smoke(self, tmp_path: Path) -> None:
        """index_build generates a corpus, writes its records and times both index builds."""
        result = bench(
            "index_build.py",
            "--sessions",
            "6",
            "--size-mb",
            "1",
            "--workspaces",
            "2",
            "--out",
            str(tmp_path / "corpus"),
            "--json",
        )
        assert 0 == result.returncode, result.stderr
        figures = json.loads(result.stdout)
        assert 6 == figures["corpus"]["session files"]
        assert figures["history index build (first search)"]["index MB"] > 0
        assert "index MB added" in figures["memory index build (first memory search)"]

    def test_locomo_recall_smoke(self, tmp_path: Path) -> None:
        """locomo_recall converts, indexes with pbot-watch, scores, and ends with the recall line."""
        data = json.loads((SHARED / "data" / "locomo" / "locomo-dev.json").read_text(encoding="utf-8"))[:1]
        conv = data[0]["conversation"]
        for key in [
            k for k in conv if re.fullmatch(r"session_\d+(_date_time)?", k) and int(k.split("_")[1]) > 2
        ]:
            del conv[key]
        data[0]["qa"] = [
            qa for qa in data[0]["qa"] if all(e.startswith(("D1:", "D2:")) for e in qa.get("evidence", []))
        ][:8]
        small = tmp_path / "small.json"
        small.write_text(json.dumps(data), encoding="utf-8")
        result = bench(
            "locomo_recall.py", "--data", str(small), "--keep", str(tmp_path / "work"), "--baseline"
        )
        assert 0 == result.returncode, result.stderr
        assert "baseline: plain BM25 over single turns recall@10" in result.stdout
        assert re.search(r"^exchange recall@10 [01]\.\d{3}$", result.stdout, re.MULTILINE)
        assert re.fullmatch(
            r"recall@5 [01]\.\d{3} recall@10 [01]\.\d{3}", result.stdout.strip().splitlines()[-1]
        )
