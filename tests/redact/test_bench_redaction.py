"""``bench/redaction.py`` runs end to end on a tiny corpus and prints every figure (no timing asserted)."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import bench
from tests.support.paths import SHARED

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def test_tiny_run_reports_the_cost_with_and_without_redaction():
    extra = ["--shared", str(SHARED)] if SHARED.is_dir() else []
    result = bench(
        "redaction.py",
        *("--sessions", "4", "--size-mb", "0.5", "--workspaces", "2", "--repeat", "1", "--json", *extra),
        timeout=230,
    )
    assert 0 == result.returncode, result.stdout + result.stderr
    figures = json.loads(result.stdout)
    assert 4 == figures["corpus"]["sessions"]
    for name in ("index", "raw memory"):
        assert figures[name]["ratio on/off"] > 0
    assert figures["redact alone"]["MB/s"] > 0
    assert figures["redact alone"]["scrub MB/s"] > 0
    assert {} == figures["redact alone"]["redactions"]  # the generated corpus holds no secret
    if extra:
        assert {} == figures["shared"]["fixtures"]["redactions"]
        assert {} == figures["shared"]["locomo"]["redactions"]
