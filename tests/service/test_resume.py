"""A session file the service dropped from memory resumes at its cursor: only new bytes are parsed.

Real files, the real ``Tailer`` with its SQLite state, its resume logs on disk and the real
raw-memory follower. The archive it writes must equal a one-shot ``index_all`` of the same
files, whether a file was resumed, read from 0, or its log was damaged.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Self

import pytest

from pbot_watch.archive.files import ArchiveStore
from pbot_watch.archive.marks import MARKS_FOLDER
from pbot_watch.indexer import index_all
from pbot_watch.memory.listener import MemoryFollower
from pbot_watch.service.resume_store import RESUME_FOLDER
from pbot_watch.service.state import StateStore
from pbot_watch.service.tail import ArchiveWriter, Tailer
from pbot_watch.sources import WHOLE_BLOCK, WholeDigest
from tests.memory.test_index import busy_session
from tests.memory.test_listener import memory_offset
from tests.support.archive import archive_files, records
from tests.support.pi_sessions import PiSession, rewrite_in_place


class Service:
    """A tailer as the service builds one (state, resume logs, raw memory), and how to restart it."""

    def __init__(self, tmp_path: Path, memory_budget: int) -> None:
        self.tmp = tmp_path
        self.budget = memory_budget
        self.archive = tmp_path / "archive"
        self.state_dir = tmp_path / "state"

    @contextmanager
    def running(self) -> Iterator[Self]:
        """A new tailer on the same state (a restart, the second time), closed whatever the test did."""
        self.follower = MemoryFollower(self.state_dir)
        self.state = StateStore(self.state_dir)
        self.store = store = ArchiveWriter(central=self.archive)
        self.tailer = Tailer(store, self.state, 10, on_entries=self.follower, memory_budget=self.budget)
        try:
            yield self
        finally:
            self.follower.close()
            self.state.close()

    def append(self, w: PiSession, path: Path, n: int) -> int:
        """One turn appended and synced; the bytes the tailer parsed for it (its size is asserted)."""
        size = path.stat().st_size
        w.user(f"one more question {n}", id=f"more-q{n}")
        w.assistant(f"and its answer {n}", id=f"more-r{n}")
        report = self.tailer.sync([path])
        assert [path] == report.appended
        assert path.stat().st_size == memory_offset(self.state_dir / "search.db", path)
        return self.tailer.counters.bytes_parsed_last_append - (path.stat().st_size - size)

    def same_as_one_shot(self, sessions: Path) -> None:
        expected = self.tmp / f"expected-{len(list(self.tmp.glob('expected-*')))}"
        index_all([sessions], ArchiveStore(central=expected))
        assert records(expected) == records(self.archive)
        assert archive_files(expected) == archive_files(self.archive)  # byte for byte


@pytest.fixture
def two_sessions(tmp_path: Path) -> tuple[Path, PiSession, Path, PiSession]:
    sessions = tmp_path / "sessions"
    big_path, small_path = sessions / "ws" / "big.jsonl", sessions / "ws" / "small.jsonl"
    big = busy_session(big_path, turns=60, output_lines=40)
    small = PiSession("sess-small", file=small_path)
    small.user("hello", id="s0")
    small.assistant("hi", id="s1")
    return big_path, big, small_path, small


def test_an_evicted_session_resumes_at_its_cursor(
    tmp_path: Path, two_sessions: tuple[Path, PiSession, Path, PiSession]
) -> None:
    """Two active sessions over the budget: each append to either parses only its own bytes."""
    big_path, big, small_path, small = two_sessions
    with Service(tmp_path, memory_budget=1).running() as service:  # one file in memory at a time
        service.tailer.sync([big_path, small_path])
        for n in range(4):
            assert service.append(big, big_path, n) == 0
            assert service.append(small, small_path, 100 + n) == 0
            assert big_path not in service.tailer.indexer.files  # evicted by the small one
        assert service.tailer.resume.resumed >= 4
        assert service.follower.bytes_read == 0  # raw memory took the entries as they were read
        service.same_as_one_shot(tmp_path / "sessions")


def test_the_first_append_after_a_restart_parses_only_its_bytes(
    tmp_path: Path, two_sessions: tuple[Path, PiSession, Path, PiSession]
) -> None:
    """A new service process finds the log beside the cursor: no re-read of what was read before."""
    big_path, big, small_path, _ = two_sessions
    service = Service(tmp_path, memory_budget=32 << 20)
    with service.running():
        service.tailer.sync([big_path, small_path])
        assert service.append(big, big_path, 0) == 0
    with service.running():
        assert service.append(big, big_path, 1) == 0
        assert service.tailer.resume.resumed == 1
        assert service.follower.bytes_read == 0  # raw memory was in step at the same offset
        service.same_as_one_shot(tmp_path / "sessions")


def test_a_rewritten_file_is_read_from_zero_and_its_log_started_over(
    tmp_path: Path, two_sessions: tuple[Path, PiSession, Path, PiSession]
) -> None:
    """The log stands for the bytes it was made from: a rewrite in place is parsed whole."""
    big_path, big, small_path, _ = two_sessions
    with Service(tmp_path, memory_budget=1).running() as service:
        service.tailer.sync([big_path, small_path])
        data = big_path.read_bytes().replace(b"question 7:", b"QUESTION 7:")
        rewrite_in_place(big_path, data)
        service.tailer.sync([big_path])
        assert service.tailer.counters.bytes_parsed_last_append == len(data)
        service.tailer.sync([small_path])  # evicts the big one again
        assert service.append(big, big_path, 0) == 0  # resumed from the new log
        service.same_as_one_shot(tmp_path / "sessions")
        assert "QUESTION 7:" in str(records(service.archive)["sess-busy"])


@pytest.mark.parametrize("damage", ["torn", "garbage", "empty", "gone"])
def test_a_damaged_log_means_a_read_from_zero(
    tmp_path: Path, two_sessions: tuple[Path, PiSession, Path, PiSession], damage: str
) -> None:
    """A torn, foreign, empty or missing log is never trusted: the file is parsed whole, nothing lost."""
    big_path, big, small_path, _ = two_sessions
    with Service(tmp_path, memory_budget=1).running() as service:
        service.tailer.sync([big_path, small_path])
        assert big_path not in service.tailer.indexer.files
        log = service.tailer.resume.log_path(big_path)
        assert log.parent == service.state_dir / RESUME_FOLDER
        data = log.read_bytes()
        if damage == "torn":
            log.write_bytes(data[: len(data) // 2])
        elif damage == "garbage":
            log.write_bytes(data[:8] + bytes(len(data) - 8))
        elif damage == "empty":
            log.write_bytes(b"")
        else:
            log.unlink()
        size = big_path.stat().st_size
        parsed_more = service.append(big, big_path, 0)
        assert parsed_more == size  # the whole file before the append, read again
        service.same_as_one_shot(tmp_path / "sessions")
        service.tailer.sync([small_path])
        assert service.append(big, big_path, 1) == 0  # and a good log from then on


def test_a_deleted_session_loses_its_log(
    tmp_path: Path, two_sessions: tuple[Path, PiSession, Path, PiSession]
) -> None:
    big_path, _, small_path, _ = two_sessions
    with Service(tmp_path, memory_budget=1).running() as service:
        service.tailer.sync([big_path, small_path])
        log = service.tailer.resume.log_path(big_path)
        assert log.exists()
        big_path.unlink()
        service.tailer.sync([big_path])
        assert not log.exists()


def test_after_a_restart_the_record_as_written_keeps_its_nodes_json(
    tmp_path: Path, two_sessions: tuple[Path, PiSession, Path, PiSession]
) -> None:
    """The record on disk is the one the last run wrote: its nodes' JSON is taken from the file,
    only what the append changed is encoded, and the bytes are those of a full rebuild."""
    big_path, big, small_path, _ = two_sessions
    service = Service(tmp_path, memory_budget=32 << 20)
    with service.running():
        service.tailer.sync([big_path, small_path])
        service.append(big, big_path, 0)
    assert any((service.state_dir / RESUME_FOLDER / MARKS_FOLDER).glob("*.mark"))
    with service.running():
        assert service.append(big, big_path, 1) == 0
        encoder = service.store.encoder
        assert encoder.changed is not None
        nodes = len(records(service.archive)["sess-busy"]["nodes"])
        assert encoder.from_file == nodes - len(encoder.changed)
        assert len(encoder.changed) < nodes // 4
        service.same_as_one_shot(tmp_path / "sessions")


@pytest.mark.parametrize("edit", ["reformatted", "same size and time"])
def test_a_record_changed_while_the_service_was_down_is_read_as_foreign(
    tmp_path: Path, two_sessions: tuple[Path, PiSession, Path, PiSession], edit: str
) -> None:
    """Another tool rewrote the record (pretty-printed it, or edited it keeping its size and mtime):
    nothing of the file's bytes is kept, the record is indexed against its content, and right."""
    big_path, big, small_path, _ = two_sessions
    service = Service(tmp_path, memory_budget=32 << 20)
    with service.running():
        service.tailer.sync([big_path, small_path])
    (record,) = [p for p in service.archive.glob("*.json") if b"sess-busy" in p.read_bytes()]
    data = record.read_bytes()
    if edit == "reformatted":
        record.write_text(json.dumps(json.loads(data), ensure_ascii=False, indent=2))
    else:
        st = record.stat()
        with record.open("r+b") as out:  # the same bytes, written again in place
            out.write(data)
        os.utime(record, ns=(st.st_atime_ns, st.st_mtime_ns))
    with service.running():
        assert service.store.marks is not None
        assert not service.store.marks.ours(record, record.stat())
        service.append(big, big_path, 0)
        assert service.store.encoder.from_file == 0  # nothing taken from the file's bytes
        service.same_as_one_shot(tmp_path / "sessions")


def test_after_a_restart_the_whole_fingerprint_goes_on_from_the_logged_blocks(tmp_path: Path) -> None:
    """The resume log holds the digests of the file's whole blocks: the first cursor after a restart
    hashes the last partial block again, not the file, and is the cursor a full hash makes."""
    path = tmp_path / "sessions" / "ws" / "long.jsonl"
    w = PiSession("sess-long", file=path)
    for n in range(24):
        w.user(f"question {n}: " + "many words " * 12_000, id=f"q{n}")
        w.assistant(f"answer {n}", id=f"a{n}")
    size = path.stat().st_size
    assert size > 3 * WHOLE_BLOCK
    service = Service(tmp_path, memory_budget=32 << 20)
    with service.running():
        service.tailer.sync([path])
    with service.running():
        known = service.tailer.known[path]
        found = service.tailer.resume.load(path, known.cursor)
        assert found is not None
        _, whole = found
        assert whole is not None
        assert whole.upto == size // WHOLE_BLOCK * WHOLE_BLOCK
        assert service.append(w, path, 0) == 0
        cursor = service.tailer.indexer.files[path].cursor
        assert cursor is not None
        with path.open("rb") as handle:
            assert cursor.whole == WholeDigest().extend(handle.fileno(), cursor.offset)
        service.same_as_one_shot(tmp_path / "sessions")
