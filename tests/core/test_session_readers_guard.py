"""Every reader of Pi session files opens them through ``sources.open_session``'s guard.

A FIFO named like a session blocks a plain ``open`` forever (no writer), and a symlink to
``/dev/zero`` never ends: one such file in a user's folder must neither hang nor feed any
reader. Each reader that takes a session path is given both; each must refuse or skip it at
once. A reader that opened the path itself would hang here until the timeout fails it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from pbot_watch.archive.files import ArchiveStore
from pbot_watch.catalog import HeaderCache
from pbot_watch.indexer import index_all
from pbot_watch.memory.cue_follow import FollowedCues, NotASession
from pbot_watch.memory.index import sync_memory_file
from pbot_watch.search.index import SearchIndex
from pbot_watch.sources import (
    NotRegularFile,
    SessionTail,
    read_header,
    read_session_entries,
    read_session_file,
)

pytestmark = pytest.mark.timeout(20)


def fifo(folder: Path) -> Path:
    path = folder / "fifo.jsonl"
    os.mkfifo(path)
    return path


def device(folder: Path) -> Path:
    path = folder / "zero.jsonl"
    path.symlink_to("/dev/zero")
    return path


ODD = [fifo, device]


def refused(read: Callable[[], object]) -> None:
    with pytest.raises((NotRegularFile, NotASession)):
        read()


@pytest.mark.parametrize("make", ODD, ids=["fifo", "device"])
class TestEveryReaderRefuses:
    def test_header(self, tmp_path: Path, make: Callable[[Path], Path]) -> None:
        assert False is read_header(make(tmp_path))

    def test_header_cache(self, tmp_path: Path, make: Callable[[Path], Path]) -> None:
        assert "not-session" == HeaderCache().sight(make(tmp_path)).kind

    def test_entries(self, tmp_path: Path, make: Callable[[Path], Path]) -> None:
        path = make(tmp_path)
        refused(lambda: read_session_entries(path))
        refused(lambda: read_session_file(path))

    def test_tail(self, tmp_path: Path, make: Callable[[Path], Path]) -> None:
        path = make(tmp_path)
        refused(lambda: SessionTail(path))

    def test_raw_memory(self, tmp_path: Path, make: Callable[[Path], Path]) -> None:
        index = SearchIndex(tmp_path / "search.db")
        try:
            assert False is sync_memory_file(index, make(tmp_path))
        finally:
            index.close()

    def test_cues(self, tmp_path: Path, make: Callable[[Path], Path]) -> None:
        path = make(tmp_path)
        refused(lambda: FollowedCues().ledger(path))

    def test_indexer(self, tmp_path: Path, make: Callable[[Path], Path]) -> None:
        sessions = tmp_path / "sessions"
        sessions.mkdir()
        make(sessions)
        report = index_all([sessions], ArchiveStore(tmp_path / "archive"))
        assert 0 == report.written
