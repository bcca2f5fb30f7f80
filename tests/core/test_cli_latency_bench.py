"""``bench/cli_latency.py`` runs end to end on a tiny history and times every command (no timing asserted)."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import bench

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


class TestCliLatencyBench:
    def test_tiny_run_reports_every_command(self) -> None:
        """Six sessions, two runs each: every command is timed beside the interpreter's floor."""
        result = bench(
            "cli_latency.py", "--sessions", "6", "--size-mb", "1", "--repeat", "2", "--json", timeout=280
        )
        assert 0 == result.returncode, result.stdout + result.stderr
        figures = json.loads(result.stdout)
        for name in (
            "python -c pass",
            "--help",
            "status",
            "search cursor",
            "read NODE",
            "memory search cursor",
        ):
            assert figures[name]["wall ms"] > 0, name
