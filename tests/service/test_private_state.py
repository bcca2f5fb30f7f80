"""The state folder holds conversation text (search.db has every exchange and tool output): private.

Whatever the umask, the state folder is 0700 and every file in it 0600, including SQLite's
``-wal`` and ``-shm`` files, through the real commands and the real service.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from pbot_watch.config_paths import default_state_dir
from tests.support.cli import run
from tests.support.pi_sessions import PiSession
from tests.support.service import ServiceProcess, wait_for

DATABASES = ("search.db", "summaries.db", "state.sqlite3")


def modes(folder: Path) -> dict[str, int]:
    """Each file below ``folder`` (by its relative path) with its mode; a folder in it must be
    0700 (resume logs, cue ledgers), which is checked on the way."""
    found: dict[str, int] = {}
    for p in folder.rglob("*"):
        mode = stat.S_IMODE(p.stat().st_mode)
        if p.is_dir():
            assert 0o700 == mode, p
        else:
            found[str(p.relative_to(folder))] = mode
    return found


def one_session(root: Path, workspace: Path) -> None:
    workspace.mkdir(exist_ok=True)
    session = PiSession("s1", str(workspace), file=root / "--w--" / "s.jsonl")
    session.user("where is the marmalade", id="u1")
    session.assistant("in the pantry", id="a1")


class TestPrivateState:
    def test_commands_leave_the_state_private(self, tmp_path: Path, umask_022: None) -> None:
        """index, search and summarize under umask 022: the state folder 0700, its databases 0600."""
        sessions = tmp_path / "sessions"
        one_session(sessions, tmp_path / "ws")
        for command in ("index", "search marmalade", "summarize"):
            result = run(*command.split(), "--sessions", str(sessions))
            assert 0 == result.returncode, result.stderr
        state = default_state_dir()
        assert 0o700 == stat.S_IMODE(state.stat().st_mode)
        found = modes(state)
        assert {"search.db", "summaries.db"} <= set(found)
        assert dict.fromkeys(found, 384) == found

    @pytest.mark.slow
    def test_service_keeps_the_state_private(self, tmp_path: Path, umask_022: None) -> None:
        """A running service under umask 022: every database, -wal and -shm file is 0600."""
        sessions = tmp_path / "sessions"
        one_session(sessions, tmp_path / "ws")
        with ServiceProcess([sessions], tmp_path / "archive").start() as service:
            service.wait_status(lambda s: s.records_written >= 1, "the record to be written")
            expected = {f"{db}{suffix}" for db in DATABASES for suffix in ("", "-wal", "-shm")}
            wait_for(lambda: expected <= set(modes(service.state_dir)), what="every database open in WAL")
            assert 0o700 == stat.S_IMODE(service.state_dir.stat().st_mode)
            found = modes(service.state_dir)
            assert dict.fromkeys(found, 384) == found
            assert 0 == service.stop()
