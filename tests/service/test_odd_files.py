"""What ``pbot-watch run`` does with odd files: nothing in a user's files stops it.

Each test is a row of the table in ``docs/service.md`` ("What pbot-watch does with odd files"),
played against the real service in a subprocess: a tracked session is replaced by a folder, a
FIFO, a device or a file the service may not read, and the service keeps running, keeps
serving the other sessions, says what is wrong in status, retries, and stops on SIGTERM.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pbot_watch.config_paths import default_state_dir
from pbot_watch.service.status_file import assess
from pbot_watch.sqlite import BUSY_TIMEOUT_SECONDS
from tests.support.archive import records
from tests.support.paths import FIXTURES
from tests.support.pi_sessions import PiSession, append, lines_of
from tests.support.service import Expect, ServiceProcess, one_shot, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

PLAIN = FIXTURES / "real-v3" / "01-plain-multiturn.jsonl"
# SIGTERM must be honoured within seconds whatever is in the watched folders.
STOP_SECONDS = 5.0


@pytest.fixture
def two_sessions(tmp_path: Path) -> tuple[Path, Path, Path, Expect]:
    """A session root with two sessions: ``odd`` (to be replaced) and ``other`` (appended to)."""
    sessions = tmp_path / "sessions"
    folder = sessions / "--proj--"
    folder.mkdir(parents=True)
    odd = folder / "odd.jsonl"
    other = folder / "other.jsonl"
    shutil.copy(FIXTURES / "real-v3" / "03-tour-kitchen-sink.jsonl", odd)
    lines = lines_of(PLAIN)
    append(other, b"".join(lines[:4]))
    return odd, other, tmp_path / "archive", Expect([sessions], tmp_path / "archive", tmp_path)


def stop_quickly(service: ServiceProcess) -> float:
    """SIGTERM; the exit code must be 0; returns how long it took."""
    started = time.monotonic()
    assert service.stop(timeout=STOP_SECONDS) == 0
    return time.monotonic() - started


# What takes a tracked session's place, and the words status says it in.
NOT_REGULAR: dict[str, tuple[Callable[[Path], object], str]] = {
    "folder": (Path.mkdir, "a folder"),
    "fifo": (os.mkfifo, "a FIFO"),
    "dev-zero": (lambda path: path.symlink_to("/dev/zero"), "a character device"),
}


def replace_while_running(service: ServiceProcess, expect: Expect, odd: Path, kind: str) -> None:
    """Once the service has both sessions, ``odd`` replaced by a ``kind``; status must name it."""
    make, said = NOT_REGULAR[kind]
    expect.same(service=service)
    expect.kept.add(session_id(odd))
    odd.unlink()
    make(odd)
    status = service.wait_status(lambda s: s.retrying_files == 1, f"{said} to be reported")
    assert f"{odd}: cannot read: {said}, not a regular file" in status.errors[-1].message


def other_served(other: Path, archive: Path, expect: Expect) -> None:
    """The other session's record, as a one-shot index of it alone writes it."""
    wanted = expect_one(other, expect)[session_id(other)]
    wait_for(lambda: records(archive).get(session_id(other)) == wanted, what="the other session's record")


def append_rest(other: Path) -> None:
    """The rest of the plain session, appended to ``other`` while the odd file is in place."""
    append(other, b"".join(lines_of(PLAIN)[4:]))


def drop_dac_override() -> list[str]:
    """A command prefix under which the service cannot read a mode-000 file, even as root.

    Root reads any file through CAP_DAC_OVERRIDE; ``setpriv`` starts the service without that
    capability (and without CAP_DAC_READ_SEARCH), so permissions apply to it as to a user.
    """
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: a mode-000 file would be readable to the service")
    prefix = [
        setpriv,
        "--inh-caps=-dac_override,-dac_read_search",
        "--bounding-set=-dac_override,-dac_read_search",
    ]
    probe = subprocess.run([*prefix, "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"setpriv cannot drop capabilities here: {probe.stderr.decode(errors='replace')}")
    return prefix


def without_override(sessions: Path, archive: Path) -> ServiceProcess:
    service = ServiceProcess([sessions], archive)
    service.args = [*drop_dac_override(), *service.args]
    return service


class TestReplacedWhileRunning:
    """A tracked session replaced while the service runs: the others go on, status says why."""

    def test_folder(self, two_sessions: tuple[Path, Path, Path, Expect]) -> None:
        """A folder in a session's place: an error naming it in status, retried; the service goes on."""
        odd, other, archive, expect = two_sessions
        with ServiceProcess([odd.parent.parent], archive).start() as service:
            replace_while_running(service, expect, odd, "folder")
            append_rest(other)
            expect.same(service=service)
            assert stop_quickly(service) < STOP_SECONDS

    def test_fifo(self, two_sessions: tuple[Path, Path, Path, Expect]) -> None:
        """A FIFO in a session's place is never opened: no reader blocks, a writer finds none."""
        odd, other, archive, expect = two_sessions
        with ServiceProcess([odd.parent.parent], archive).start() as service:
            replace_while_running(service, expect, odd, "fifo")
            # Nobody holds it open for reading: a non-blocking writer finds no reader.
            with pytest.raises(OSError, match="No such device or address") as raised:
                os.open(odd, os.O_WRONLY | os.O_NONBLOCK)
            assert errno.ENXIO == raised.value.errno
            append_rest(other)
            expect.same(service=service)
            assert stop_quickly(service) < STOP_SECONDS

    def test_symlink_to_dev_zero(self, two_sessions: tuple[Path, Path, Path, Expect]) -> None:
        """A symlink to ``/dev/zero`` in a session's place is never read: no spinning, no memory."""
        odd, other, archive, expect = two_sessions
        with ServiceProcess([odd.parent.parent], archive).start() as service:
            replace_while_running(service, expect, odd, "dev-zero")
            append_rest(other)
            expect.same(service=service)
            assert service_rss_mb(service) < 150
            assert stop_quickly(service) < STOP_SECONDS

    def test_unreadable(self, two_sessions: tuple[Path, Path, Path, Expect]) -> None:
        """A session made unreadable: an error in status, retried, read again once readable."""
        odd, other, archive, expect = two_sessions
        with without_override(odd.parent.parent, archive).start() as service:
            expect.same(service=service)
            odd.chmod(0)
            append(odd, b"".join(lines_of(PLAIN)[1:]))
            status = service.wait_status(
                lambda s: s.retrying_files == 1, "the unreadable file to be reported"
            )
            assert f"{odd}: cannot read: Permission denied" in status.errors[-1].message
            append_rest(other)
            other_served(other, archive, expect)
            odd.chmod(0o644)
            append(odd, b"\n")  # the write that makes the service look again (a retry would too)
            expect.same(service=service)
            service.wait_status(lambda s: s.retrying_files == 0, "the retry to succeed")
            assert stop_quickly(service) < STOP_SECONDS


class TestAtTheNextStart:
    """The service starts whatever it finds where a tracked session was."""

    def test_unreadable(self, two_sessions: tuple[Path, Path, Path, Expect]) -> None:
        """An unreadable tracked session at start: the service runs, says so, and reads the rest."""
        odd, other, archive, expect = two_sessions
        with without_override(odd.parent.parent, archive).start() as service:
            expect.same(service=service)
            assert stop_quickly(service) < STOP_SECONDS
        odd.chmod(0)
        append(odd, b"".join(lines_of(PLAIN)[1:]))
        append_rest(other)
        with without_override(odd.parent.parent, archive).start(wait=False) as service:
            status = service.wait_status(
                lambda s: s.running and s.retrying_files == 1, "the unreadable file to be reported"
            )
            assert f"{odd}: cannot read: Permission denied" in status.errors[-1].message
            other_served(other, archive, expect)
            odd.chmod(0o644)
            append(odd, b"\n")
            expect.same(service=service)
            assert stop_quickly(service) < STOP_SECONDS

    @pytest.mark.parametrize("kind", ["folder", "fifo", "dev-zero"])
    def test_not_a_regular_file(self, two_sessions: tuple[Path, Path, Path, Expect], kind: str) -> None:
        """A folder, FIFO or device where a tracked session was: not a session; the start goes on."""
        odd, other, archive, expect = two_sessions
        with ServiceProcess([odd.parent.parent], archive).start() as service:
            expect.same(service=service)
            assert stop_quickly(service) < STOP_SECONDS
        expect.kept.add(session_id(odd))
        odd.unlink()
        NOT_REGULAR[kind][0](odd)
        append_rest(other)
        with ServiceProcess([odd.parent.parent], archive).start() as service:
            expect.same(service=service)
            assert service.wait_status(lambda s: True, "status").errors == []
            assert stop_quickly(service) < STOP_SECONDS


def session_id(path: Path) -> str:
    return str(json.loads(path.read_bytes().split(b"\n", 1)[0])["id"])


def expect_one(path: Path, expect: Expect) -> dict[str, dict[str, object]]:
    """A one-shot index of ``path`` alone, in a fresh folder."""
    alone = expect.scratch / f"alone-{path.stem}-{time.monotonic_ns()}"
    (alone / "sessions").mkdir(parents=True)
    shutil.copy(path, alone / "sessions" / path.name)
    return one_shot([alone / "sessions"], alone / "archive")


def service_rss_mb(service: ServiceProcess) -> float:
    for row in Path(f"/proc/{service.pid}/status").read_text().splitlines():
        if row.startswith("VmRSS:"):
            return int(row.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def numbered_session(path: Path, cwd: Path, turns: int = 40) -> None:
    """A session of about 15 KB: ``question number N`` / ``answer N`` pairs."""
    builder = PiSession(cwd=str(cwd))
    for i in range(turns):
        builder.turn(f"question number {i} " + "padding " * 30, f"answer {i}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(builder.data())


def edit_in_place(path: Path, old: bytes, new: bytes) -> None:
    """Overwrite ``old`` with ``new`` (same length) where it is, as an editor saving in place does."""
    data = path.read_bytes()
    assert len(old) == len(new)
    at = data.index(old)
    assert at > 4096 and at < len(data) - 1024  # outside the first 4 KB and the last 1 KB
    with path.open("r+b") as handle:
        handle.seek(at)
        handle.write(new)


class TestSameSizeRewrite:
    """A session rewritten in place without changing its size is seen, running or at the next start."""

    def test_while_running(self, tmp_path: Path) -> None:
        """``question number 20`` -> ``QUESTION NUMBER 20`` in a 15 KB session: the record follows."""
        sessions = tmp_path / "sessions"
        path = sessions / "--proj--" / "s.jsonl"
        numbered_session(path, tmp_path)
        expect = Expect([sessions], tmp_path / "archive", tmp_path)
        with ServiceProcess([sessions], tmp_path / "archive").start() as service:
            expect.same(service=service)
            edit_in_place(path, b"question number 20", b"QUESTION NUMBER 20")
            assert "QUESTION NUMBER 20" in json.dumps(expect.same(service=service))
            assert stop_quickly(service) < STOP_SECONDS

    def test_at_the_next_start(self, tmp_path: Path) -> None:
        """The same edit made while the service was stopped is seen at its next start."""
        sessions = tmp_path / "sessions"
        path = sessions / "--proj--" / "s.jsonl"
        numbered_session(path, tmp_path)
        expect = Expect([sessions], tmp_path / "archive", tmp_path)
        with ServiceProcess([sessions], tmp_path / "archive").start() as service:
            expect.same(service=service)
            assert stop_quickly(service) < STOP_SECONDS
        edit_in_place(path, b"question number 20", b"QUESTION NUMBER 20")
        with ServiceProcess([sessions], tmp_path / "archive").start() as service:
            assert "QUESTION NUMBER 20" in json.dumps(expect.same(service=service))
            assert stop_quickly(service) < STOP_SECONDS

    def test_touch_parses_nothing(self, tmp_path: Path) -> None:
        """A new mtime on unchanged bytes costs a fingerprint, not a parse, and only once.

        Not by the records' reading, and not by raw memory's either: its cursor has no whole-file
        fingerprint, so it takes the new stamp from the service's check instead of reading the
        file again (it did, whole, at every start after a touch).
        """
        sessions = tmp_path / "sessions"
        path = sessions / "--proj--" / "s.jsonl"
        numbered_session(path, tmp_path)
        with ServiceProcess([sessions], tmp_path / "archive").start() as service:
            assert stop_quickly(service) < STOP_SECONDS
        os.utime(path, ns=(time.time_ns(), path.stat().st_mtime_ns + 10**9))
        # A touch is no content event: while it runs, the service sees it at its next rescan.
        with ServiceProcess([sessions], tmp_path / "archive", "--reconcile-seconds", "1").start() as service:
            status = service.wait_status(
                lambda s: s.catch_up is not None and s.catch_up.finished, "caught up"
            )
            assert (0, 0) == (status.bytes_parsed_total, memory_read_itself(status.extensions))
            # And while it runs: the rescan sees the new mtime, the check finds the bytes unchanged.
            os.utime(path, ns=(time.time_ns(), path.stat().st_mtime_ns + 10**9))
            wait_for(
                lambda: state_mtime(service.state_dir, path) == path.stat().st_mtime_ns, what="the touch seen"
            )
            status = service.wait_status(lambda s: True, "status")
            assert (0, 0) == (status.bytes_parsed_total, memory_read_itself(status.extensions))
            assert stop_quickly(service) < STOP_SECONDS
        with ServiceProcess([sessions], tmp_path / "archive").start() as service:
            status = service.wait_status(
                lambda s: s.catch_up is not None and s.catch_up.finished, "caught up"
            )
            assert (0, 0) == (status.bytes_parsed_total, memory_read_itself(status.extensions))
            assert stop_quickly(service) < STOP_SECONDS


def memory_read_itself(extensions: dict[str, dict[str, Any]]) -> int:
    """The session bytes raw memory read on its own (not handed over by the records' reading)."""
    memory = extensions["memory"]
    return int(memory["bytes_read_itself"]) + int(memory["build_queued"])


def state_mtime(state_dir: Path, path: Path) -> int | None:
    """The mtime the service's saved cursor of ``path`` holds (its state database, read only)."""
    with contextlib.closing(sqlite3.connect(f"file:{state_dir / 'state.sqlite3'}?mode=ro", uri=True)) as conn:
        row = conn.execute("SELECT mtime_ns FROM files WHERE path = ?", (str(path),)).fetchone()
    return None if row is None else int(row[0])


@pytest.fixture
def small_state_disk() -> Iterator[Path]:
    """The service's state folder on a real file system of 8 MB (a tmpfs), to fill up.

    Big enough for the empty indexes (search.db's tables alone take about 1.1 MB in 16 KB pages)
    and the fixtures' rows, so that once the filler is gone everything fits again.
    """
    folder = default_state_dir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system for the state folder needs root")
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], capture_output=True, check=False)


def fill(folder: Path) -> Path:
    """Write a file until the file system is full, to the last page."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (1 << 16, 1 << 12, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    return filler


class TestStateFailures:
    """The cursor database failing degrades the service, never stops it (``state_error`` in status)."""

    def test_full_disk(self, two_sessions: tuple[Path, Path, Path, Expect], small_state_disk: Path) -> None:
        """State folder full: records still written, cursors kept in memory, saved once there is room."""
        odd, other, archive, expect = two_sessions
        sessions = odd.parent.parent
        with ServiceProcess([sessions], archive).start() as service:
            expect.same(service=service)
            filler = fill(small_state_disk)
            append_rest(other)
            new = odd.with_name("new.jsonl")
            shutil.copy(FIXTURES / "real-v3" / "06-branching.jsonl", new)
            expect.same(service=service)
            status = service.wait_status(lambda s: s.state_error is not None, "the full disk in status")
            assert "database or disk is full; cursors are kept in memory" in status.state_error
            assert status.unsaved_cursors > 0
            assert status.running
            filler.unlink()
            service.wait_status(
                lambda s: (s.state_error, s.unsaved_cursors) == (None, 0), "the cursors to be saved"
            )
            assert stop_quickly(service) < STOP_SECONDS
        with ServiceProcess([sessions], archive).start() as service:
            assert 0 == service.wait_status(lambda s: True, "status").bytes_parsed_total
            assert stop_quickly(service) < STOP_SECONDS

    def test_start_on_a_full_disk(
        self, two_sessions: tuple[Path, Path, Path, Expect], small_state_disk: Path
    ) -> None:
        """A start with the state folder full: the service runs and indexes; status says why."""
        odd, other, archive, expect = two_sessions
        sessions = odd.parent.parent
        with ServiceProcess([sessions], archive).start() as service:
            expect.same(service=service)
            assert stop_quickly(service) < STOP_SECONDS
        fill(small_state_disk)
        append_rest(other)
        with ServiceProcess([sessions], archive).start() as service:
            expect.same(service=service)
            other_more = other.with_name("more.jsonl")
            shutil.copy(FIXTURES / "real-v3" / "06-branching.jsonl", other_more)
            expect.same(service=service)
            status = service.wait_status(lambda s: s.state_error is not None, "the full disk in status")
            assert "cursors are kept in memory" in status.state_error
            assert stop_quickly(service) < STOP_SECONDS

    def test_locked_past_the_busy_timeout(self, two_sessions: tuple[Path, Path, Path, Expect]) -> None:
        """Another process holding the state's write lock for over 10 s: a degraded, running service."""
        odd, other, archive, expect = two_sessions
        sessions = odd.parent.parent
        with ServiceProcess([sessions], archive).start() as service:
            expect.same(service=service)
            holder = sqlite3.connect(service.state_dir / "state.sqlite3", isolation_level=None)
            holder.execute("BEGIN IMMEDIATE")
            try:
                append_rest(other)
                expect.same(service=service)
                status = service.wait_status(
                    lambda s: s.state_error is not None,
                    "the lock in status",
                    timeout=BUSY_TIMEOUT_SECONDS + 10,
                )
                assert "database is locked; cursors are kept in memory" in status.state_error
                assert "running" == assess(service.state_dir, status)[0]
            finally:
                holder.execute("ROLLBACK")
                holder.close()
            service.wait_status(
                lambda s: (s.state_error, s.unsaved_cursors) == (None, 0), "the cursors to be saved"
            )
            assert stop_quickly(service) < STOP_SECONDS
        with ServiceProcess([sessions], archive).start() as service:
            assert 0 == service.wait_status(lambda s: True, "status").bytes_parsed_total
            assert stop_quickly(service) < STOP_SECONDS


def pasted_log(megabytes: int) -> str:
    """A pasted log of about ``megabytes`` MB: one message, one JSON line once written."""
    line = "2026-11-30T12:00:00Z INFO worker-{} handled request id={} in {} ms status=200\n"
    count = megabytes * 1_000_000 // 70
    return "".join(line.format(i % 16, i, i % 997) for i in range(count))


class TestHugeLine:
    """A 50 MB single line (a pasted log) does not stall the other sessions."""

    @pytest.mark.timeout(240)
    def test_other_sessions_are_served_meanwhile(self, tmp_path: Path) -> None:
        """Appends to another session reach its record within seconds while the 50 MB line is indexed."""
        sessions = tmp_path / "sessions"
        folder = sessions / "--proj--"
        other = folder / "other.jsonl"
        builder = PiSession(session_id="0b0b0b0b-0000-7000-8000-00000000b0b0", cwd=str(tmp_path))
        builder.turn("first question", "first answer")
        builder.write(other)
        archive = tmp_path / "archive"
        expect = Expect([sessions], archive, tmp_path)
        with ServiceProcess([sessions], archive).start() as service:
            expect.same(service=service)
            # Only the other session's record is read while waiting: loading every record would
            # parse the 59 MB one at each poll, and the test would take the service's second core.
            (other_record,) = [
                path for path in archive.glob("*.json") if builder.session_id.encode() in path.read_bytes()
            ]
            big = PiSession(cwd=str(tmp_path))
            big.turn("please read this log:\n" + pasted_log(50), "done")
            big.write(folder / "big.jsonl")
            latencies = []
            for i in range(8):
                since = len(builder.entries)
                builder.turn(f"question {i} while the log is indexed", f"answer {i}")
                started = time.monotonic()
                builder.append_to(other, since)
                wait_for(
                    lambda i=i: f"answer {i}".encode() in other_record.read_bytes(),
                    timeout=60,
                    what=f"answer {i} in the other session's record",
                )
                latencies.append(time.monotonic() - started)
            assert max(latencies) < 5.0, latencies
            expect.same(service=service, timeout=120)
            # Memory is given back once the log is indexed and the other session is the active one
            # (the log's parsed state, over the memory budget, goes first).
            service.wait_status(
                lambda s: s.listener_backlog == 0, "the search index to take the log", timeout=120
            )
            since = len(builder.entries)
            builder.turn("one more question", "one more answer")
            builder.append_to(other, since)
            wait_for(
                lambda: "one more answer" in json.dumps(records(archive).get(builder.session_id)),
                what="the last answer in the other session's record",
            )
            service.wait_status(lambda s: s.files_in_memory == 1, "the log's parsed state to be dropped")
            wait_for(lambda: service_rss_mb(service) < 300, timeout=30, what="the memory to be given back")
            assert stop_quickly(service) < STOP_SECONDS
