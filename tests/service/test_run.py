"""``pbot-watch run`` end to end: the real service in a subprocess follows Pi-like writes.

After each change the live archive must equal what a one-shot ``pbot-watch index`` of the
same files writes (the records of deleted files excepted: they are kept).
"""

from __future__ import annotations

import json
import random
import re
import shutil
import signal
import time
from pathlib import Path

import pytest

from pbot_watch.config_paths import default_state_dir
from tests.support.archive import records
from tests.support.cli import run
from tests.support.paths import FIXTURES
from tests.support.pi_sessions import append, append_split, lines_of, rewrite_in_place, with_session_id
from tests.support.service import Expect, ServiceProcess, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

PLAIN = FIXTURES / "real-v3" / "01-plain-multiturn.jsonl"
TOOLS = FIXTURES / "real-v3" / "02-tool-calls.jsonl"


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path, Expect]:
    sessions = tmp_path / "sessions"
    (sessions / "--proj-a--").mkdir(parents=True)
    shutil.copy(FIXTURES / "real-v3" / "03-tour-kitchen-sink.jsonl", sessions / "--proj-a--")
    shutil.copy(FIXTURES / "real-v3" / "06-branching.jsonl", sessions / "--proj-a--")
    archive = tmp_path / "archive"
    return sessions, archive, Expect([sessions], archive, tmp_path)


class TestFollowing:
    def test_start_indexes_existing_sessions(self, roots: tuple[Path, Path, Expect]) -> None:
        """Sessions present at start are indexed as a one-shot index would."""
        sessions, archive, expect = roots
        with ServiceProcess([sessions], archive).start() as service:
            assert len(expect.same(service=service)) == 2
            assert service.stop() == 0

    def test_new_folder_and_appends_one_write_per_line(self, roots: tuple[Path, Path, Expect]) -> None:
        """A session folder and file created while running, then appended entry by entry."""
        sessions, archive, expect = roots
        with ServiceProcess([sessions], archive).start() as service:
            base = service.wait_status(lambda s: True, "status").bytes_parsed_total
            folder = sessions / "--proj-new--"
            folder.mkdir()
            path = folder / "2026-11-29T20-00-00-000Z_new.jsonl"
            lines = lines_of(PLAIN)
            for line in lines[:4]:
                append(path, line)
            expect.same(service=service)
            for line in lines[4:-1]:
                append(path, line)
            expect.same(service=service)
            size = path.stat().st_size
            service.wait_status(lambda s: s.bytes_parsed_total - base == size, "status to count those bytes")
            append(path, lines[-1])
            expect.same(service=service)
            status = service.wait_status(
                lambda s: s.bytes_parsed_total - base > size, "the last append in status"
            )
            # An append parses the new bytes only, not the file.
            assert (status.bytes_parsed_last_append, status.last_append_path) == (len(lines[-1]), str(path))
            assert status.bytes_parsed_total - base == path.stat().st_size
            assert service.stop() == 0

    def test_lines_split_across_writes(self, roots: tuple[Path, Path, Expect]) -> None:
        """A line written in pieces is read once its newline arrives; a partial line is never parsed."""
        sessions, archive, expect = roots
        rng = random.Random(7)
        with ServiceProcess([sessions], archive).start() as service:
            path = sessions / "--proj-a--" / "split.jsonl"
            lines = lines_of(TOOLS)
            for line in lines[:3]:
                append(path, line)
            expect.same(service=service)
            for line in lines[3:12]:
                append_split(path, line, rng)
            # Half a line: the archive must equal an index of the complete lines only.
            append(path, lines[12][: len(lines[12]) // 2])
            expect.same(service=service)
            append(path, lines[12][len(lines[12]) // 2 :])
            for line in lines[13:]:
                append(path, line)
            expect.same(service=service)
            assert service.stop() == 0

    def test_fork_copies_ids_into_a_new_session(self, roots: tuple[Path, Path, Expect]) -> None:
        """A fork (new header, entries copied with their ids) gets its own record; the source keeps its."""
        sessions, archive, expect = roots
        with ServiceProcess([sessions], archive).start() as service:
            source = lines_of(PLAIN)
            original = sessions / "--proj-a--" / "original.jsonl"
            append(original, b"".join(source))
            expect.same(service=service)
            fork = sessions / "--proj-a--" / "fork.jsonl"
            header = with_session_id(
                source[0], "0f0f0f0f-0000-7000-8000-00000000f0f0", parentSession=str(original)
            )
            append(fork, header)
            for line in source[1:]:
                append(fork, line)
            assert len(expect.same(service=service)) == 4
            assert service.stop() == 0

    def test_rewrite_in_place_as_pi_migrates(self, roots: tuple[Path, Path, Expect]) -> None:
        """A v1 file rewritten in place (same inode, new head) is re-read from 0."""
        sessions, archive, expect = roots
        onload = FIXTURES / "onload"
        with ServiceProcess([sessions], archive).start() as service:
            path = sessions / "--proj-a--" / "v1.jsonl"
            append(path, (onload / "v1.before.jsonl").read_bytes())
            before = expect.same(service=service)
            inode = path.stat().st_ino
            rewrite_in_place(path, (onload / "v1.after.jsonl").read_bytes())
            assert path.stat().st_ino == inode
            after = expect.same(service=service)
            assert before != after
            assert service.stop() == 0

    def test_delete_forgets_file_and_keeps_record(self, roots: tuple[Path, Path, Expect]) -> None:
        """A deleted session file is forgotten; its record stays in the archive."""
        sessions, archive, expect = roots
        with ServiceProcess([sessions], archive).start() as service:
            path = sessions / "--proj-a--" / "06-branching.jsonl"
            expect.same(service=service)
            path.unlink()
            service.wait_status(lambda s: s.files_tracked == 1, "the deleted file to be forgotten")
            expect.kept = set(records(archive))
            expect.same(service=service)
            assert len(records(archive)) == 2
            assert service.stop() == 0

    def test_root_created_after_start(self, tmp_path: Path) -> None:
        """A session root that does not exist at start is watched once it appears."""
        sessions = tmp_path / "later" / "sessions"
        archive = tmp_path / "archive"
        expect = Expect([sessions], archive, tmp_path)
        with ServiceProcess([sessions], archive).start() as service:
            status = service.wait_status(lambda s: True, "status")
            assert [(r.exists, r.watched) for r in status.roots] == [(False, False)]
            (sessions / "--p--").mkdir(parents=True)
            path = sessions / "--p--" / "s.jsonl"
            for line in lines_of(PLAIN):
                append(path, line)
            assert len(expect.same(service=service)) == 1
            status = service.wait_status(lambda s: s.roots[0].watched, "the root to be watched")
            assert status.roots[0].exists
            assert service.stop() == 0

    def test_reconcile_catches_what_events_miss(self, tmp_path: Path) -> None:
        """A folder linked into a root sends no events; only the rescan finds it."""
        sessions, elsewhere = tmp_path / "sessions", tmp_path / "elsewhere"
        sessions.mkdir()
        elsewhere.mkdir()
        (sessions / "linked").symlink_to(elsewhere)
        archive = tmp_path / "archive"
        expect = Expect([sessions], archive, tmp_path)
        with ServiceProcess([sessions], archive, "--reconcile-seconds", "1").start() as service:
            path = elsewhere / "s.jsonl"
            for line in lines_of(PLAIN):
                append(path, line)
            assert len(expect.same(service=service)) == 1
            status = service.wait_status(lambda s: s.files_tracked == 1, "the linked file tracked")
            assert status.last_reconcile is not None
            assert service.stop() == 0

    @pytest.mark.parametrize("observer", ["inotify", "polling"])
    def test_root_deleted_and_recreated(self, roots: tuple[Path, Path, Expect], observer: str) -> None:
        """A root removed while running is dropped; when it comes back it is watched and scanned again."""
        sessions, archive, expect = roots
        extra = ["--poll", "--poll-seconds", "0.2"] if observer == "polling" else []
        with ServiceProcess([sessions], archive, *extra).start() as service:
            expect.same(service=service)
            expect.kept = set(records(archive))
            shutil.rmtree(sessions)
            service.wait_status(
                lambda s: not s.roots[0].exists and s.files_tracked == 0, "the root to vanish"
            )
            (sessions / "--back--").mkdir(parents=True)
            append(sessions / "--back--" / "s.jsonl", PLAIN.read_bytes())
            expect.same(service=service)
            status = service.wait_status(
                lambda s: s.roots[0].watched and s.files_tracked == 1, "the root again"
            )
            assert status.observer.kind == observer
            assert len(records(archive)) == 3
            assert service.stop() == 0

    def test_restart_parses_nothing_unchanged(self, roots: tuple[Path, Path, Expect]) -> None:
        """A restart over unchanged files reads no session bytes; an append meanwhile is caught up."""
        sessions, archive, expect = roots
        with ServiceProcess([sessions], archive).start() as service:
            expect.same(service=service)
            assert service.stop() == 0
        with ServiceProcess([sessions], archive).start() as service:
            status = service.wait_status(lambda s: s.activity == "idle", "idle")
            assert status.bytes_parsed_total == 0
            assert status.files_tracked == 2
            assert status.records_written == 0
            assert service.stop() == 0
        path = sessions / "--proj-a--" / "06-branching.jsonl"
        append(path, lines_of(PLAIN)[3])
        with ServiceProcess([sessions], archive).start() as service:
            expect.same(service=service)
            status = service.wait_status(lambda s: s.activity == "idle", "idle")
            # The grown file resumes from its log at the cursor: only the appended line is parsed.
            assert status.bytes_parsed_total == len(lines_of(PLAIN)[3])
            assert service.stop() == 0

    def test_evicted_sessions_are_rebuilt(self, roots: tuple[Path, Path, Expect]) -> None:
        """With room for one parsed file, appends to two sessions in turn still give the right records."""
        sessions, archive, expect = roots
        with ServiceProcess([sessions], archive, "--max-sessions-in-memory", "1").start() as service:
            first, second = sessions / "--proj-a--" / "one.jsonl", sessions / "--proj-a--" / "two.jsonl"
            lines = lines_of(PLAIN)
            append(second, with_session_id(lines[0], "0e0e0e0e-0000-7000-8000-00000000e0e0"))
            append(first, lines[0])
            for line in lines[1:]:
                append(first, line)
                append(second, line)
                time.sleep(0.2)  # each append its own batch, so the two files keep evicting each other
            expect.same(service=service)
            status = service.wait_status(lambda s: s.files_in_memory <= 1, "memory bound")
            assert status.bytes_parsed_total > first.stat().st_size * 2
            assert service.stop() == 0

    def test_poll_observer(self, roots: tuple[Path, Path, Expect]) -> None:
        """``--poll`` uses the polling observer, says why, and still follows appends."""
        sessions, archive, expect = roots
        with ServiceProcess([sessions], archive, "--poll", "--poll-seconds", "0.2").start() as service:
            status = service.wait_status(lambda s: True, "status")
            assert status.observer.kind == "polling"
            assert status.observer.reason is not None
            assert "poll" in status.observer.reason
            path = sessions / "--proj-a--" / "polled.jsonl"
            for line in lines_of(PLAIN):
                append(path, line)
            expect.same(service=service)
            assert service.stop() == 0

    def test_inotify_by_default(self, roots: tuple[Path, Path, Expect]) -> None:
        """On Linux the service uses inotify and gives no fallback reason."""
        sessions, archive, _ = roots
        with ServiceProcess([sessions], archive).start() as service:
            status = service.wait_status(lambda s: True, "status")
            assert (status.observer.kind, status.observer.reason) == ("inotify", None)
            assert service.stop() == 0


class TestLifecycle:
    def test_second_instance_is_refused(self, roots: tuple[Path, Path, Expect]) -> None:
        """A second ``run`` exits 1 with one line naming the first one's pid; the first runs on."""
        sessions, archive, _ = roots
        with ServiceProcess([sessions], archive).start() as service:
            second = run("run", "--sessions", str(sessions), "--archive", str(archive), timeout=30)
            assert second.returncode == 1
            assert f"already running (pid {service.pid}" in second.stderr
            assert "Traceback" not in second.stderr
            assert service.proc is not None and service.proc.poll() is None
            assert service.stop() == 0
        # The lock file stays; a new instance takes it.
        with ServiceProcess([sessions], archive).start() as service:
            assert service.stop() == 0

    def test_sigterm_stops_within_two_seconds(self, roots: tuple[Path, Path, Expect]) -> None:
        """SIGTERM: exit code 0 within 2 s, status says stopped, the lock is free."""
        sessions, archive, _ = roots
        with ServiceProcess([sessions], archive).start() as service:
            started = time.monotonic()
            assert service.stop(timeout=2) == 0
            assert time.monotonic() - started < 2
            status = service.status()
            assert status is not None
            assert not status.running

    def test_a_clean_stop_leaves_no_wal_beside_search_db(self, roots: tuple[Path, Path, Expect]) -> None:
        """Every connection to search.db is closed on its own thread at a stop (the history index's
        listener included): the last one folds the WAL back in and deletes it, where one left
        open at exit left it on disk (116 MB after a first run over 634 MB)."""
        sessions, archive, _ = roots
        with ServiceProcess([sessions], archive).start() as service:
            wal = service.state_dir / "search.db-wal"
            deadline = time.monotonic() + 30
            while not wal.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert wal.exists(), "the service never wrote search.db"
            service.wait_status(
                lambda s: s.catch_up is not None and s.catch_up.finished is not None, "catch-up"
            )
            assert service.stop() == 0
        assert (service.state_dir / "search.db").stat().st_size > 0
        assert not wal.exists()

    def test_sigint_twice_forces_exit(self, roots: tuple[Path, Path, Expect]) -> None:
        """A second Ctrl-C exits at once (code 130) even if the first is still being handled."""
        sessions, archive, _ = roots
        with ServiceProcess([sessions], archive).start() as service:
            assert service.proc is not None
            service.proc.send_signal(signal.SIGINT)
            service.proc.send_signal(signal.SIGINT)
            code = service.proc.wait(2)
            assert code in (0, 130)

    def test_bad_setting_is_one_line(self, tmp_path: Path) -> None:
        """An invalid flag value fails before starting, naming the key."""
        result = run("run", "--sessions", str(tmp_path), "--debounce-seconds", "-1", timeout=30)
        assert result.returncode == 2
        assert "debounce_seconds" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1

    def test_env_setting_applies(
        self, roots: tuple[Path, Path, Expect], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """``PBOT_WATCH_POLL=true`` selects polling without a flag."""
        sessions, archive, _ = roots
        monkeypatch.setenv("PBOT_WATCH_POLL", "true")
        with ServiceProcess([sessions], archive).start() as service:
            assert service.wait_status(lambda s: True, "status").observer.kind == "polling"
            assert service.stop() == 0

    def test_unwritable_state_dir_fails_cleanly(
        self, roots: tuple[Path, Path, Expect], tmp_path: Path
    ) -> None:
        """A state folder that cannot be created is one error line, not a traceback."""
        sessions, archive, _ = roots
        blocker = tmp_path / "file"
        blocker.write_text("not a folder")
        result = run(
            "run",
            "--sessions",
            str(sessions),
            "--archive",
            str(archive),
            "--state-dir",
            str(blocker / "state"),
            timeout=30,
        )
        assert result.returncode == 1
        assert "Traceback" not in result.stderr
        assert str(blocker) in result.stderr

    def test_failed_record_write_is_retried(self, roots: tuple[Path, Path, Expect]) -> None:
        """A record that cannot be written is an error in status, keeps its cursor back, and is retried."""
        sessions, archive, expect = roots
        with ServiceProcess([sessions], archive).start() as service:
            expect.same(service=service)
            aside = archive.with_name("archive-aside")
            archive.rename(aside)
            archive.write_text("a file where the archive folder should be")
            path = sessions / "--proj-a--" / "06-branching.jsonl"
            append(path, b"".join(lines_of(PLAIN)[1:]))  # new exchanges: the record must change
            status = service.wait_status(lambda s: bool(s.errors), "the write error")
            assert "cannot write the record" in status.errors[0].message
            assert (status.retrying_files, status.activity) == (1, "idle")
            archive.unlink()
            aside.rename(archive)
            expect.same(service=service)
            status = service.wait_status(lambda s: s.retrying_files == 0, "the retry")
            assert status.records_written == 3
            assert service.stop() == 0
        with ServiceProcess([sessions], archive).start() as service:
            # The cursor was saved after the retried record only: nothing is left to do.
            assert service.wait_status(lambda s: True, "status").bytes_parsed_total == 0
            assert service.stop() == 0

    def test_missing_workspace_is_a_warning(self, tmp_path: Path) -> None:
        """Per-workspace records for a workspace that is gone: a warning in status; the service goes on."""
        sessions = tmp_path / "sessions"
        path = sessions / "--gone--" / "s.jsonl"
        path.parent.mkdir(parents=True)
        lines = lines_of(PLAIN)
        append(
            path,
            with_session_id(lines[0], "0d0d0d0d-0000-7000-8000-00000000d0d0", cwd=str(tmp_path / "gone")),
        )
        append(path, b"".join(lines[1:]))
        with ServiceProcess([sessions], None).start() as service:
            status = service.wait_status(lambda s: bool(s.warnings), "a warning")
            assert "no longer exists" in status.warnings[0]
            assert status.records_written == 0
            # Later appends to a live workspace's session still work (the first failure stops nothing).
            workspace = tmp_path / "ws"
            workspace.mkdir()
            other = sessions / "--ws--" / "t.jsonl"
            other.parent.mkdir()
            append(
                other, with_session_id(lines[0], "0c0c0c0c-0000-7000-8000-00000000c0c0", cwd=str(workspace))
            )
            append(other, b"".join(lines[1:]))
            wait_for(
                lambda: list((workspace / ".pi" / "pbot" / "history").glob("*.json")),
                what="a workspace record",
            )
            assert service.stop() == 0

    def test_corrupt_state_is_set_aside(self, roots: tuple[Path, Path, Expect]) -> None:
        """A state database that is not SQLite is kept aside; the service starts afresh and says so."""
        sessions, archive, expect = roots
        state = default_state_dir()
        state.mkdir(parents=True)
        (state / "state.sqlite3").write_bytes(b"this is not a database" * 100)
        with ServiceProcess([sessions], archive).start() as service:
            expect.same(service=service)
            status = service.wait_status(lambda s: bool(s.warnings), "the warning")
            assert "kept as state.sqlite3.corrupt and started afresh" in status.warnings[0]
            assert status.state_error is None
            assert service.stop() == 0
        assert b"this is not a database" * 100 == (state / "state.sqlite3.corrupt").read_bytes()


class TestLogs:
    def test_events_are_named_in_snake_case(self, roots: tuple[Path, Path, Expect]) -> None:
        """Each JSON log line of the service names its event in snake_case, a failure included."""
        sessions, archive, expect = roots
        with ServiceProcess([sessions], archive).start() as service:
            expect.same(service=service)
            archive.rename(archive.with_name("archive-aside"))
            archive.write_text("a file where the archive folder should be")
            append(sessions / "--proj-a--" / "06-branching.jsonl", b"".join(lines_of(PLAIN)[1:]))
            service.wait_status(lambda s: bool(s.errors), "the write error")
            assert service.stop() == 0
        lines = [json.loads(line) for line in service.log.read_text().splitlines()]
        events = [line["event"] for line in lines if line.get("logger", "").startswith("pbot_watch")]
        assert [] == [event for event in events if not re.fullmatch(r"[a-z]+(_[a-z]+)*", event)]
        assert {"service_started", "caught_up", "record_write_failed", "service_stopped"} <= set(events)
