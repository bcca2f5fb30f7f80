"""Shared fixtures: every test runs with its own XDG folders and Pi agent dir."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.e2e.pi_install import PiInstall

# Captured when pytest imports this file, before the autouse fixture below points HOME and XDG_*
# at a temporary folder per test: caches that outlive a run (the npm installs) must be the real ones.
REAL_ENV = dict(os.environ)

# Subprocess tests run the installed console script; find it beside the running interpreter even
# when the venv is not activated (README and .ci/run call .venv/bin/python -m pytest).
_SCRIPTS = str(Path(sys.executable).parent)
if os.environ.get("PATH", "").split(os.pathsep)[0] != _SCRIPTS:
    os.environ["PATH"] = _SCRIPTS + os.pathsep + os.environ.get("PATH", "")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """An end-to-end test is a slow one: ``-m "not slow"`` (the quick loop) leaves the real Pi out."""
    for item in items:
        if item.get_closest_marker("e2e") is not None:
            item.add_marker(pytest.mark.slow)


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
    return home


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The usual umask, under which new files are readable by everyone."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture(scope="session")
def pi_install() -> PiInstall:
    """The real Pi 1.6.0 and a Node >= 22.19 from the npm registry (cached between runs).

    Used by the real-Pi end-to-end test and by the personal-bot parity oracle (pbot imports Pi's
    SessionManager); skipped, with the reason, only where they cannot be had.
    """
    from tests.e2e.pi_install import Unavailable, ensure_pi  # only for tests that need Pi

    try:
        return ensure_pi(REAL_ENV)
    except Unavailable as reason:
        pytest.skip(f"the real Pi CLI cannot be installed here: {reason}")
