"""``bench/pi_long_session.py`` has the real Pi write a session that ``bench/cues.py`` can measure."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from tests.e2e.pi_install import PiInstall
from tests.support.paths import REPO

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def test_two_tasks_and_a_compaction(pi_install: PiInstall, tmp_path: Path) -> None:
    """Two modules' tasks and a compaction: tool calls Pi ran, and a block whose failures are named.

    Two tasks, as Pi cuts a compaction at a turn: of one turn alone it may keep everything.
    """
    generator = runpy.run_path(str(REPO / "bench" / "pi_long_session.py"))
    out = tmp_path / "long.jsonl"
    shape = generator["drive"](out, 2, 2, pi_install, keep_recent=500)
    assert (1, True) == (shape["compactions"], shape["tool results"] > 40)
    bench = runpy.run_path(str(REPO / "bench" / "cues.py"))
    (row,) = bench["pi_session_report"](out, [200_000], None)["after"]
    named, total = row["newest failures"].split("/")
    assert (True, named) == (int(total) > 0, total)
    assert row["tokens"] > row["handle tokens"] > 0
