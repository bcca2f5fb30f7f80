"""``bench/cli_latency.py`` runs end to end on a tiny history and times every command (no timing asserted)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.cli import bench

pytestmark = [pytest.mark.slow, pytest.mark.timeout(500)]


class TestCliLatencyBench:
    def test_tiny_run_reports_every_command(self) -> None:
        """Six sessions, two runs each, of this install and of a wheel: every command, the floors and
        each query's start-up share.
        """
        result = bench(
            "cli_latency.py",
            *("--sessions", "6", "--size-mb", "1", "--repeat", "2", "--bytecode", "bytecode"),
            *("--install", "both", "--json"),
            timeout=480,
        )
        assert 0 == result.returncode, result.stdout + result.stderr
        both = json.loads(result.stdout)
        for install in ("editable", "wheel"):
            self.check(both[f"{install}, bytecode"])

    @staticmethod
    def check(figures: dict[str, Any]) -> None:
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
