"""``bench/first_run.py`` runs end to end on two tiny corpora and prints every figure (no timing asserted)."""

from __future__ import annotations

import json
import os

import pytest

from tests.e2e.pi_install import PiInstall
from tests.support.cli import bench

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


class TestFirstRunBench:
    def test_tiny_run_reports_figures(self, pi_install: PiInstall) -> None:
        """Two corpora of 2 and 4 sessions: every phase reports, and growth is computed between them."""
        result = bench(
            "first_run.py",
            *("--sizes", "1,2", "--total-mb", "2", "--sessions", "4", "--exchanges", "6"),
            *("--repeat", "1", "--json"),
            timeout=280,
            # pbot's phase finds the cached Pi install of the real environment.
            env={**os.environ, "PBOT_WATCH_E2E_CACHE": str(pi_install.prefix.parent)},
        )
        assert 0 == result.returncode, result.stdout + result.stderr
        figures = json.loads(result.stdout)
        small, large = figures["1 MB"], figures["2 MB"]
        assert (2, 4) == (small["corpus"]["sessions"], large["corpus"]["sessions"])
        assert "4 records written" in large["index cold"]["summary"]
        assert large["search build"]["index MB"] > 0
        run = large["run from empty state"]
        assert None not in (run["newest searchable s"], run["all searchable s"], run["caught up s"])
        assert run["raw memory all held s"] is not None
        assert None not in (run["first append searchable s"], run["first append bytes parsed"])
        assert run["first append bytes"] > 0
        assert run["steady append searchable p50 s"] is not None
        assert 4 == large["pbot cold load"]["records"]
        assert figures["growth (large / small)"]["bytes"] > 1

    def test_profile_says_where_the_build_goes(self) -> None:
        """``--profile`` runs the service in process until caught up and names its parts' shares."""
        result = bench(
            "first_run.py",
            *("--sizes", "1", "--total-mb", "1", "--sessions", "2", "--exchanges", "6"),
            *("--skip", "decode,pbot,index,search,run", "--profile", "--json"),
            timeout=280,
        )
        assert 0 == result.returncode, result.stdout + result.stderr
        profiled = json.loads(result.stdout)["1 MB"]["run profiled in process"]
        assert profiled["caught up s"] > 0
        # What the reading thread does for raw memory depends on timing: it stores what it reads
        # itself, or takes the build workers' whole files (they store them).
        stored = {
            "raw memory: all of it, stored as read",
            "raw memory: the workers' builds taken, appends read on",
        }
        assert stored & set(profiled["reading thread"]), profiled["reading thread"]
        assert "history index (listener thread)" in profiled["listener thread"]
