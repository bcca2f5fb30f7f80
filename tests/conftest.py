"""Shared fixtures: every test runs with its own XDG folders and Pi agent dir."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
FIXTURES = SHARED / "fixtures" / "pi-sessions"

# Subprocess tests run the installed console script; find it beside the running interpreter even
# when the venv is not activated (README and .ci/run call .venv/bin/python -m pytest).
_SCRIPTS = str(Path(sys.executable).parent)
if os.environ.get("PATH", "").split(os.pathsep)[0] != _SCRIPTS:
    os.environ["PATH"] = _SCRIPTS + os.pathsep + os.environ.get("PATH", "")


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point every per-user location at a temporary folder, so no test touches real state."""
    home = tmp_path / "home"
    home.mkdir()
    for var, sub in (
        ("XDG_STATE_HOME", "state"),
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_DATA_HOME", "data"),
    ):
        (home / sub).mkdir()
        monkeypatch.setenv(var, str(home / sub))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(home / ".pi" / "agent"))
    for var in list(os.environ):
        if var.startswith("PBOT_WATCH_"):
            monkeypatch.delenv(var)
    yield home


def fixture_files(*groups: str) -> list[Path]:
    """Real Pi-written session files from shared/."""
    out: list[Path] = []
    for group in groups:
        out.extend(sorted((FIXTURES / group).glob("*.jsonl")))
    return out
