"""The Pi installer skips only where Pi cannot be had, and keeps its cache out of the test's HOME."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.e2e.pi_install import STAMP, Unavailable, cache_root, ensure_pi, parse_version


class TestCacheRoot:
    def test_explicit_folder_wins(self, tmp_path: Path) -> None:
        """PBOT_WATCH_E2E_CACHE names the folder whatever XDG_CACHE_HOME says."""
        env = {"PBOT_WATCH_E2E_CACHE": str(tmp_path / "c"), "XDG_CACHE_HOME": "/elsewhere", "HOME": "/h"}
        assert tmp_path / "c" == cache_root(env)

    def test_xdg_then_home(self) -> None:
        """Without it, the XDG cache folder, else ~/.cache."""
        assert Path("/x/pbot-watch-e2e") == cache_root({"XDG_CACHE_HOME": "/x", "HOME": "/h"})
        assert Path("/h/.cache/pbot-watch-e2e") == cache_root({"HOME": "/h"})


class TestUnavailable:
    def test_no_npm_is_a_skip_reason(self, tmp_path: Path) -> None:
        """Without npm on PATH the installer says so instead of failing."""
        env = {"PBOT_WATCH_E2E_CACHE": str(tmp_path), "PATH": str(tmp_path / "empty"), "HOME": str(tmp_path)}
        with pytest.raises(Unavailable, match="npm is not on PATH"):
            ensure_pi(env)

    @pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
    def test_dead_registry_is_a_skip_reason_and_fails_fast(self, tmp_path: Path) -> None:
        """A registry that refuses connections (a closed port on 127.0.0.1) is 'unavailable', and nothing is left half-installed."""
        env = {
            "PBOT_WATCH_E2E_CACHE": str(tmp_path / "cache"),
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "npm_config_registry": "http://127.0.0.1:9/",
        }
        with pytest.raises(Unavailable, match="registry cannot be reached"):
            ensure_pi(env)
        assert not list((tmp_path / "cache").glob(f"*/{STAMP}"))
        assert not list((tmp_path / "cache").glob(".staging-*"))


class TestParseVersion:
    def test_node_version_output(self) -> None:
        """`node --version` prints v22.23.5."""
        assert (22, 23, 5) == parse_version("v22.23.5\n")
        assert parse_version("not a version") is None
