"""``pbot-watch index`` end to end, as a person runs it."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import subprocess
import time
from pathlib import Path

from tests.support.cli import invoke, run
from tests.support.paths import FIXTURES


class TestIndexCommand:
    def test_second_run_writes_nothing(self, tmp_path: Path) -> None:
        """Indexing the real fixtures twice writes every record once."""
        sessions = tmp_path / "sessions"
        shutil.copytree(FIXTURES / "real-v3", sessions / "v3")
        archive = tmp_path / "archive"
        first = invoke("index", "--sessions", str(sessions), "--archive", str(archive))
        assert first.returncode == 0, first.stderr
        assert "9 records written" in first.stdout
        second = invoke("index", "--sessions", str(sessions), "--archive", str(archive))
        assert second.returncode == 0, second.stderr
        assert "0 records written, 9 unchanged" in second.stdout
        for path in archive.glob("*.json"):
            record = json.loads(path.read_text())
            assert record["nodes"][-1]["kind"] == "session"

    def test_missing_root_is_one_clear_line(self, tmp_path: Path) -> None:
        """A session root that does not exist fails with a message naming it."""
        result = invoke("index", "--sessions", str(tmp_path / "nope"))
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
        result = invoke("index", env={"PBOT_WATCH_CONFIG": str(config)})
        assert 0 == result.returncode, result.stderr
        assert "9 records written" in result.stdout
        assert 9 == len(list(archive.glob("*.json")))


def on_terminal(*args: str) -> tuple[int, str, str]:
    """``pbot-watch`` with stderr on a pseudo-terminal: exit code, stdout, what the terminal showed."""
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"}
    proc = subprocess.Popen(
        ["pbot-watch", *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower, env=env
    )
    os.close(follower)
    shown = bytearray()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: every end of the terminal was closed, the command is done
            break
        if not data:
            break
        shown += data
    os.close(leader)
    out, _ = proc.communicate(timeout=30)
    return proc.returncode, out.decode(), shown.decode(errors="replace")


class TestProgress:
    def test_terminal_shows_a_progress_bar(self, tmp_path: Path) -> None:
        """On a terminal, index draws its bar (files and bytes) on stderr; the summary stays on stdout."""
        sessions = tmp_path / "sessions"
        shutil.copytree(FIXTURES / "real-v3", sessions)
        code, out, shown = on_terminal("index", "--sessions", str(sessions), "--archive", str(tmp_path / "a"))
        assert 0 == code, shown
        assert "9 records written" in out
        assert "indexing" in shown
        assert "9/9 files" in shown

    def test_pipe_gets_no_progress(self, tmp_path: Path) -> None:
        """In a pipe (a script, a log), index prints its summary line and nothing else."""
        sessions = tmp_path / "sessions"
        shutil.copytree(FIXTURES / "real-v3", sessions)
        result = run("index", "--sessions", str(sessions), "--archive", str(tmp_path / "a"))
        assert 0 == result.returncode, result.stderr
        assert "" == result.stderr
        assert 1 == len(result.stdout.splitlines())

    def test_reindex_shows_its_steps_on_a_terminal(self, tmp_path: Path) -> None:
        """reindex draws a bar of its steps on a terminal, and prints only its summary in a pipe."""
        sessions = tmp_path / "sessions"
        shutil.copytree(FIXTURES / "real-v3", sessions)
        archive = ("--sessions", str(sessions), "--archive", str(tmp_path / "a"))
        assert 0 == run("index", *archive).returncode
        code, out, shown = on_terminal("reindex", *archive)
        assert 0 == code, shown
        assert "reindexing" in shown
        assert "/4" in shown
        piped = run("reindex", *archive)
        assert ("", 1) == (piped.stderr, len(piped.stdout.splitlines()))
        assert out.split(" (")[0] == piped.stdout.split(" (")[0]
