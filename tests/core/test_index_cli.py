"""``pbot-watch index`` end to end, through the installed console script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from tests.support.paths import FIXTURES


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["pbot-watch", *args], capture_output=True, text=True, check=False, timeout=120)


class TestIndexCommand:
    def test_second_run_writes_nothing(self, tmp_path: Path) -> None:
        """Indexing the real fixtures twice writes every record once."""
        sessions = tmp_path / "sessions"
        shutil.copytree(FIXTURES / "real-v3", sessions / "v3")
        archive = tmp_path / "archive"
        first = run("index", "--sessions", str(sessions), "--archive", str(archive))
        assert first.returncode == 0, first.stderr
        assert "9 records written" in first.stdout
        second = run("index", "--sessions", str(sessions), "--archive", str(archive))
        assert second.returncode == 0, second.stderr
        assert "0 records written, 9 unchanged" in second.stdout
        for path in archive.glob("*.json"):
            record = json.loads(path.read_text())
            assert record["nodes"][-1]["kind"] == "session"

    def test_missing_root_is_one_clear_line(self, tmp_path: Path) -> None:
        """A session root that does not exist fails with a message naming it."""
        result = run("index", "--sessions", str(tmp_path / "nope"))
        assert result.returncode != 0
        assert "does not exist" in result.stderr
        assert "Traceback" not in result.stderr

    def test_settings_file_supplies_roots_and_archive(self, tmp_path: Path) -> None:
        """Without flags, `index` takes its roots and archive from the settings, as `run` does."""
        sessions = tmp_path / "sessions"
        shutil.copytree(FIXTURES / "real-v3", sessions)
        archive = tmp_path / "archive"
        config = tmp_path / "config.toml"
        config.write_text(f'sessions = ["{sessions}"]\narchive = "{archive}"\n')
        result = subprocess.run(
            ["pbot-watch", "index"],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            env={**os.environ, "PBOT_WATCH_CONFIG": str(config)},
        )
        assert 0 == result.returncode, result.stderr
        assert "9 records written" in result.stdout
        assert 9 == len(list(archive.glob("*.json")))
