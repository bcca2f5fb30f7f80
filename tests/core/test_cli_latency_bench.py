"""``bench/cli_latency.py`` runs end to end on a tiny history and times every command (no timing asserted)."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import bench

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


class TestCliLatencyBench:
    def test_tiny_run_reports_every_command(self) -> None:
        """Six sessions, two runs each: every command, the floors and each query's start-up share."""
        result = bench(
            "cli_latency.py",
            *("--sessions", "6", "--size-mb", "1", "--repeat", "2", "--bytecode", "bytecode", "--json"),
            timeout=280,
        )
        assert 0 == result.returncode, result.stdout + result.stderr
        figures = json.loads(result.stdout)["bytecode"]
        for name in (
            "python -c pass",
            "import pbot_watch.cli",
            "--help",
            "status",
            "search cursor",
            "read NODE",
            "memory search cursor",
            "memory search no-match",
            "imports of memory search cursor",
        ):
            assert figures[name]["wall ms"] > 0, name
            assert figures[name]["wall p95 ms"] >= figures[name]["wall ms"], name
        assert "of cpu" in figures["memory search cursor"]["start-up share"]
