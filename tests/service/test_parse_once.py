"""The service decodes an append once and hands its entries to the record and to raw memory.

Real files, the real ``Tailer`` with its SQLite state and the real raw-memory follower; the
JSON decoder of session lines is wrapped to count its calls (it still does the work).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import pbot_watch.pi.entries
from pbot_watch.archive.stamp import FileStamp
from pbot_watch.memory.index import MemorySync, held_stamps, refresh_memory
from pbot_watch.memory.listener import MemoryFollower
from pbot_watch.search.index import SearchIndex
from pbot_watch.service.state import StateStore
from pbot_watch.service.tail import ArchiveWriter, Tailer
from tests.memory.test_index import busy_session
from tests.memory.test_listener import memory_offset


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many session lines were decoded (``calls[0]``), counted as they are."""
    calls = [0]
    real: Callable[[bytes], Any] = pbot_watch.pi.entries.decode_line

    def counted(line: bytes) -> Any:
        calls[0] += 1
        return real(line)

    monkeypatch.setattr(pbot_watch.pi.entries, "decode_line", counted)
    return calls


def test_an_append_is_decoded_once(tmp_path: Path, decodes: list[int]) -> None:
    """Each appended line is decoded once; raw memory holds it without reading the file itself."""
    sessions = tmp_path / "sessions"
    path = sessions / "ws" / "s.jsonl"
    w = busy_session(path, turns=20)
    state_dir = tmp_path / "state"
    follower = MemoryFollower(state_dir)
    state = StateStore(state_dir)
    tailer = Tailer(ArchiveWriter(central=tmp_path / "archive"), state, 10, on_entries=follower)
    try:
        tailer.sync([path])
        assert path.read_bytes().count(b"\n") == decodes[0]  # the whole file, once
        for turn in range(3):
            decodes[0] = 0
            size = path.stat().st_size
            w.user(f"one more question {turn}", id=f"q{turn}")
            w.assistant(f"and its answer {turn}", id=f"r{turn}")
            report = tailer.sync([path])
            assert [path] == report.appended
            appended = path.read_bytes()[size:].count(b"\n")
            assert (2, 2) == (appended, decodes[0])
            assert path.stat().st_size == memory_offset(state_dir / "search.db", path)
        assert (4, 0) == (follower.fed, follower.bytes_read)
        assert_a_query_reads_nothing(state_dir, sessions)
    finally:
        follower.close()
        state.close()


def assert_a_query_reads_nothing(state_dir: Path, sessions: Path) -> None:
    """A query's refresh of raw memory finds every file held as it is: no file, no byte read."""
    again = MemorySync()
    with SearchIndex(state_dir / "search.db") as index:
        refresh_memory(index, [sessions], again)
    assert (0, 0) == (again.files_read, again.bytes_read)


@contextmanager
def touch_followed(tmp_path: Path, turns: int) -> Iterator[tuple[Path, MemoryFollower, Callable[[], Tailer]]]:
    """A session file of ``turns`` turns, raw memory's follower, and a maker of the service's
    tailer with that follower taking its reads and its touch checks (one state between them)."""
    path = tmp_path / "sessions" / "ws" / "s.jsonl"
    busy_session(path, turns=turns)
    state_dir = tmp_path / "state"
    follower = MemoryFollower(state_dir)
    state = StateStore(state_dir)

    def tailer() -> Tailer:
        return Tailer(
            ArchiveWriter(central=tmp_path / "archive"),
            state,
            10,
            on_entries=follower,
            on_touched=follower.touched,
        )

    try:
        yield path, follower, tailer
    finally:
        follower.close()
        state.close()


@pytest.mark.parametrize("held", [True, False], ids=["held-in-memory", "after-a-restart"])
def test_a_touch_reads_nothing_for_raw_memory(tmp_path: Path, held: bool) -> None:
    """A new mtime on unchanged bytes: the tailer's whole-file check tells raw memory, which reads nothing.

    Raw memory's own cursor cannot tell a touch from a same-size rewrite, so before, the next
    query or start read the whole file again. ``held``: the tailer still holds the file parsed
    (its next read finds it unchanged), or it starts afresh from its saved cursor (a restart).
    """
    with touch_followed(tmp_path, turns=20) as (path, follower, tailer):
        first = tailer()
        first.sync([path])
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        report = (first if held else tailer()).sync([path])
        assert ([], 0) == (report.appended, follower.bytes_read)
        assert_a_query_reads_nothing(tmp_path / "state", tmp_path / "sessions")


def test_a_same_size_rewrite_is_read_again_by_raw_memory(tmp_path: Path) -> None:
    """The same with bytes changed mid-file: the check fails, the file is read again, raw memory follows it."""
    with touch_followed(tmp_path, turns=60) as (path, follower, tailers):
        tailer = tailers()
        tailer.sync([path])
        data = path.read_bytes()
        at = data.index(b"question 30")
        assert 4096 < at < len(data) - 1024  # outside the cursor's windows: only the whole check sees it
        path.write_bytes(data[:at] + b"QUESTION 30" + data[at + 11 :])
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        assert [path] == tailer.sync([path]).appended
        assert follower.fed == 2  # the whole file, then the whole file again
        with SearchIndex(tmp_path / "state" / "search.db") as index:
            assert {path: FileStamp.of(path.stat())} == held_stamps(index)
