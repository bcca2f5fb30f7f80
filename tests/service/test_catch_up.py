"""A first run catches up newest first, and status shows how far it is (files, bytes, rate, time left)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from pbot_watch.config_paths import default_state_dir
from pbot_watch.search.literal import literal_match
from pbot_watch.service.catchup import CatchUp
from pbot_watch.service.status import Status, iso, write_status
from tests.support.pi_sessions import PiSession
from tests.support.service import ServiceProcess

pytestmark = pytest.mark.timeout(120)


def sessions_aged(root: Path, ages: dict[str, int]) -> dict[str, Path]:
    """One session file per name (session id ``s-<name>``), modified ``ages[name]`` hours ago."""
    now = time.time()
    paths = {}
    for name, hours in ages.items():
        b = PiSession(session_id=f"s-{name}", cwd=str(root))
        for turn in range(3):
            b.turn(f"question {turn} in {name}", "answer " * 200)
        path = root / "sessions" / "--w--" / f"{name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b.data())
        os.utime(path, (now - hours * 3600, now - hours * 3600))
        paths[name] = path
    return paths


class TestNewestFirst:
    @pytest.mark.slow
    def test_first_run_indexes_the_newest_session_first(self, tmp_path: Path) -> None:
        """Records reach the search index in the order of their sessions' mtimes, newest first."""
        ages = {"a": 30, "b": 2, "c": 50, "d": 7, "e": 1, "f": 12}
        paths = sessions_aged(tmp_path, ages)
        with ServiceProcess([tmp_path / "sessions"], tmp_path / "archive").start() as service:
            status = service.wait_status(
                lambda s: (
                    s.catch_up is not None and s.catch_up.finished is not None and s.listener_backlog == 0
                ),
                "the catch-up and its records in the search index",
            )
            db = sqlite3.connect(default_state_dir() / "search.db")
            try:
                order = [sid for (sid,) in db.execute("SELECT session_id FROM records ORDER BY rowid")]
            finally:
                db.close()
            assert 0 == service.stop()
        assert [f"s-{name}" for name in sorted(ages, key=ages.__getitem__)] == order
        assert status.catch_up is not None
        size = sum(p.stat().st_size for p in paths.values())
        assert (6, 6, size, size) == (
            status.catch_up.files_done,
            status.catch_up.files_total,
            status.catch_up.bytes_done,
            status.catch_up.bytes_total,
        )
        assert status.catch_up.eta_seconds is None


class TestCatchUpProgress:
    def sizes(self) -> dict[Path, int]:
        return {Path("a"): 100, Path("b"): 300, Path("c"): 600}

    def test_progress_rate_and_time_left(self) -> None:
        """After 2 s and 400 of 1000 bytes: 200 bytes/s, 3 s left."""
        catch_up = CatchUp(self.sizes(), now=1000.0)
        assert not catch_up.done([Path("a"), Path("b")], now=1001.0)
        info = catch_up.info(now=1002.0)
        assert (2, 3, 400, 1000) == (info.files_done, info.files_total, info.bytes_done, info.bytes_total)
        assert (200, 3.0, None) == (info.bytes_per_second, info.eta_seconds, info.finished)

    def test_the_last_file_finishes_it(self) -> None:
        """Reading the last file ends the catch-up once; its time and rate stay as they were."""
        catch_up = CatchUp(self.sizes(), now=1000.0)
        catch_up.done([Path("a"), Path("b")], now=1001.0)
        assert catch_up.done([Path("c")], now=1004.0)
        assert not catch_up.done([Path("c")], now=1005.0)
        info = catch_up.info(now=1010.0)
        assert (4.0, 250, None, iso(1004.0)) == (
            info.seconds,
            info.bytes_per_second,
            info.eta_seconds,
            info.finished,
        )

    def test_nothing_to_read_is_caught_up_at_once(self) -> None:
        """A start with nothing changed is caught up from its first moment."""
        info = CatchUp({}, now=1000.0).info(now=1003.0)
        assert (0, iso(1000.0)) == (info.files_total, info.finished)


class TestStatusShowsCatchUp:
    def status_with(self, catch_up: CatchUp, now: float) -> None:
        folder = default_state_dir()
        folder.mkdir(parents=True, exist_ok=True)
        write_status(
            folder,
            Status(
                running=True,
                pid=os.getpid(),
                version="0.1.0",
                started=iso(now - 60),
                uptime_seconds=60,
                heartbeat=iso(now),
                heartbeat_epoch=now,
                catch_up=catch_up.info(now),
            ),
        )

    def test_catching_up_line(self) -> None:
        """While catching up, status shows files and bytes done of the total, the rate and the time left."""
        now = time.time()
        catch_up = CatchUp({Path(f"f{i}"): 2_000_000 for i in range(300)}, now=now - 10)
        catch_up.done([Path(f"f{i}") for i in range(120)], now=now)
        self.status_with(catch_up, now)
        result = subprocess.run(
            ["pbot-watch", "status"], capture_output=True, text=True, timeout=30, check=False
        )
        assert (
            "  catching up 120 of 300 files, 240.0 MB of 600.0 MB, 24.0 MB/s, about 15s left" in result.stdout
        )

    def test_caught_up_line(self) -> None:
        """Once caught up, status says what the catch-up read and how long it took."""
        now = time.time()
        catch_up = CatchUp({Path("a"): 50_000_000, Path("b"): 25_000_000}, now=now - 200)
        catch_up.done([Path("a"), Path("b")], now=now - 50)
        self.status_with(catch_up, now)
        result = subprocess.run(
            ["pbot-watch", "status"], capture_output=True, text=True, timeout=30, check=False
        )
        assert "  caught up  2 files, 75.0 MB in 2m30s, 0.5 MB/s" in result.stdout


def found(db: Path, table: str, match: str) -> int:
    """Rows of the FTS table ``table`` matching ``match``, read straight from SQLite (no refresh)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(
            conn.execute(f"SELECT count(*) FROM {table} WHERE {table} MATCH ?", (match,)).fetchone()[0]
        )
    finally:
        conn.close()


class TestCaughtUpMeansSearchable:
    @pytest.mark.slow
    def test_caught_up_is_said_once_both_indexes_hold_every_session(self, tmp_path: Path) -> None:
        """The moment the service logs ``caught_up``, each session's own word is found in the history
        index and in raw memory, and raw memory's cursor stands at every file's end."""

        root = tmp_path / "sessions" / "--w--"
        words: dict[Path, str] = {}
        for n in range(12):
            session = PiSession(session_id=f"s-{n}", cwd=str(tmp_path))
            for turn in range(4):
                session.turn(f"question {turn} about zqword{n}x", "answer " * 300)
            path = root / f"{n}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(session.data())
            words[path] = f"zqword{n}x"
        service = ServiceProcess([tmp_path / "sessions"], tmp_path / "archive")
        with service.start(wait=False):
            service.wait_log("caught_up", "the service to say it caught up")
            db = service.state_dir / "search.db"
            held = [
                (
                    found(db, "nodes_literal", literal_match(word)) > 0,
                    found(db, "mem_literal", literal_match(word)) > 0,
                )
                for word in words.values()
            ]
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            try:
                offsets = dict(conn.execute("SELECT path, offset FROM mem_files").fetchall())
            finally:
                conn.close()
            assert 0 == service.stop()
        assert [(True, True)] * len(words) == held
        assert {str(path): path.stat().st_size for path in words} == offsets
