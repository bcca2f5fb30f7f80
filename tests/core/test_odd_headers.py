"""``pbot-watch index`` on sessions it cannot place: said in a warning, never written somewhere odd.

A relative ``cwd`` names no folder (resolved against the caller's, ``index`` run from two
folders would write two places), a record folder that is a symlink out of its workspace would
write where the workspace's owner did not put it, and a ``parentId`` cycle through every entry
leaves no branch to index. Each is played through the real command, as a person runs it.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import run, scratch_user
from tests.support.pi_sessions import PiSession


def environment(tmp_path: Path) -> dict[str, str]:
    """A scratch user: the state, settings and Pi folders all under ``tmp_path``."""
    return scratch_user(tmp_path / "home")


def session(sessions: Path, name: str, cwd: str, session_id: str) -> Path:
    pi = PiSession(session_id, cwd)
    pi.turn(f"question of {name}", f"answer of {name}")
    return pi.write(sessions / "--w--" / f"{name}.jsonl")


def record_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*.json"))


class TestRelativeCwd:
    """A header whose ``cwd`` is relative: skipped with a warning, wherever ``index`` runs."""

    def test_index_from_two_folders_writes_nowhere(self, tmp_path: Path) -> None:
        """Run from two folders that both hold the relative path, nothing is written under either."""
        sessions = tmp_path / "sessions"
        session(sessions, "relative", "ws", "01a228f5-0000-7000-8000-0000000000a1")
        env = environment(tmp_path)
        for caller in (tmp_path / "one", tmp_path / "two"):
            (caller / "ws").mkdir(parents=True)
            done = run("index", "--sessions", str(sessions), env=env, cwd=caller)
            assert 0 == done.returncode, done.stderr
            assert "0 records written" in done.stdout
            assert "warning: the session header's cwd 'ws' is relative" in done.stderr
            assert [] == record_files(caller)

    def test_central_archive_skips_it_too(self, tmp_path: Path) -> None:
        """With ``--archive`` the session is skipped as well (pbot has no record for it); the others are written."""
        sessions = tmp_path / "sessions"
        session(sessions, "relative", "./ws", "01a228f5-0000-7000-8000-0000000000a2")
        session(sessions, "absolute", str(tmp_path / "ws"), "01a228f5-0000-7000-8000-0000000000a3")
        archive = tmp_path / "archive"
        done = run("index", "--sessions", str(sessions), "--archive", str(archive), env=environment(tmp_path))
        assert 0 == done.returncode, done.stderr
        assert "1 record written" in done.stdout
        assert "warning: the session header's cwd './ws' is relative" in done.stderr
        assert 1 == len(record_files(archive))

    def test_search_does_not_look_in_the_callers_folder(self, tmp_path: Path) -> None:
        """search reads no records from ``<caller>/ws`` for a session whose ``cwd`` is ``ws``."""
        caller = tmp_path / "caller"
        planted = tmp_path / "planted"
        (caller / "ws").mkdir(parents=True)
        session(planted, "absolute", str(caller / "ws"), "01a228f5-0000-7000-8000-0000000000a4")
        done = run("index", "--sessions", str(planted), env=environment(tmp_path / "first"))
        assert 1 == len(record_files(caller / "ws")), done.stderr
        sessions = tmp_path / "sessions"
        session(sessions, "relative", "ws", "01a228f5-0000-7000-8000-0000000000a5")
        found = run("search", "question", "--sessions", str(sessions), env=environment(tmp_path), cwd=caller)
        assert 0 == found.returncode, found.stderr
        assert "no matches" in found.stdout


class TestSymlinkedRecordFolder:
    """A workspace whose ``.pi`` or ``.pi/pbot/history`` is a symlink out of it is refused."""

    def index_workspace(self, tmp_path: Path) -> tuple[Path, Path, str, str]:
        workspace = tmp_path / "ws"
        workspace.mkdir()
        outside = tmp_path / "elsewhere"
        outside.mkdir()
        sessions = tmp_path / "sessions"
        session(sessions, "s", str(workspace), "01a228f5-0000-7000-8000-0000000000b1")
        return workspace, outside, str(sessions), "01a228f5-0000-7000-8000-0000000000b1"

    def test_pi_folder_linked_out(self, tmp_path: Path) -> None:
        """``<workspace>/.pi -> elsewhere``: nothing written through it, a warning names the link."""
        workspace, outside, sessions, _ = self.index_workspace(tmp_path)
        (workspace / ".pi").symlink_to(outside, target_is_directory=True)
        done = run("index", "--sessions", sessions, env=environment(tmp_path))
        assert 0 == done.returncode, done.stderr
        assert f"warning: workspace {workspace}: {workspace / '.pi'} is a symlink out of it" in done.stderr
        assert [] == record_files(outside)

    def test_history_folder_linked_out(self, tmp_path: Path) -> None:
        """``<workspace>/.pi/pbot/history -> elsewhere``: refused the same way."""
        workspace, outside, sessions, _ = self.index_workspace(tmp_path)
        (workspace / ".pi" / "pbot").mkdir(parents=True)
        history = workspace / ".pi" / "pbot" / "history"
        history.symlink_to(outside, target_is_directory=True)
        done = run("index", "--sessions", sessions, env=environment(tmp_path))
        assert 0 == done.returncode, done.stderr
        assert f"warning: workspace {workspace}: {history} is a symlink out of it" in done.stderr
        assert [] == record_files(outside)

    def test_link_inside_the_workspace_is_followed(self, tmp_path: Path) -> None:
        """``<workspace>/.pi -> <workspace>/dotpi`` stays in the workspace: the record is written there."""
        workspace, _, sessions, _ = self.index_workspace(tmp_path)
        (workspace / "dotpi").mkdir()
        (workspace / ".pi").symlink_to("dotpi", target_is_directory=True)
        done = run("index", "--sessions", sessions, env=environment(tmp_path))
        assert 0 == done.returncode, done.stderr
        assert "1 record written" in done.stdout
        assert 1 == len(record_files(workspace / "dotpi"))


class TestParentCycle:
    """A ``parentId`` cycle through every entry leaves no tip: no record, and a warning says why."""

    def test_warning_and_no_record(self, tmp_path: Path) -> None:
        """Question and answer each the other's parent: the warning names the file."""
        pi = PiSession("01a228f5-0000-7000-8000-0000000000c1", str(tmp_path))
        pi.user("question", id="u1", parent="a1")
        pi.assistant("answer", id="a1", parent="u1")
        path = pi.write(tmp_path / "sessions" / "--w--" / "cycle.jsonl")
        archive = tmp_path / "archive"
        done = run(
            "index",
            "--sessions",
            str(tmp_path / "sessions"),
            "--archive",
            str(archive),
            env=environment(tmp_path),
        )
        assert 0 == done.returncode, done.stderr
        assert (
            f"warning: {path}: parentId cycle through every entry (2 entries): no branch to index"
            in done.stderr
        )
        assert [] == record_files(archive)
