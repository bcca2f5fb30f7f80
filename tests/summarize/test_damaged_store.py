"""A damaged ``summaries.db`` is set aside with a clear message; summarizing goes on afresh.

The store holds what was paid for, so it is kept beside (``summaries.db.corrupt``) for a person
to recover from, not deleted; but neither ``summarize`` nor the service may stop on it.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

PAGE = 4096


def summarize(history: Path) -> subprocess.CompletedProcess[str]:
    where = ("--sessions", str(history / "sessions"), "--archive", str(history / "archive"))
    return subprocess.run(
        [sys.executable, "-m", "pbot_watch", "summarize", *where],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )


def store_file() -> Path:
    return Path(os.environ["XDG_STATE_HOME"]) / "pbot-watch" / "summaries.db"


class TestDamagedStore:
    def test_garbage_is_set_aside(self, history: Path) -> None:
        """A file that is no database: one warning line naming the kept copy, and summaries written."""
        store_file().parent.mkdir(parents=True, exist_ok=True)
        garbage = os.urandom(64 * 1024)
        store_file().write_bytes(garbage)
        done = summarize(history)
        assert 0 == done.returncode, done.stderr
        assert "Traceback" not in done.stderr
        assert "kept as summaries.db.corrupt" in done.stderr
        assert done.stdout.startswith("2 summaries written")
        assert garbage == store_file().with_name("summaries.db.corrupt").read_bytes()

    def test_damaged_pages_are_found_at_open(self, history: Path) -> None:
        """A store whose cache pages are garbage (the header sound) is set aside as well."""
        assert 0 == summarize(history).returncode
        with sqlite3.connect(store_file()) as conn:
            conn.executemany(
                "INSERT INTO cache VALUES (?, 's', 'm', ?, 0, 0, 0)",
                ((f"k{i}", "x" * 900) for i in range(400)),
            )
            pages = [p for (p,) in conn.execute("SELECT pageno FROM dbstat WHERE name = 'cache'")]
        conn.close()
        with store_file().open("r+b") as file:
            for page in pages[1:]:
                file.seek((page - 1) * PAGE)
                file.write(bytes([0xDE, 0xAD]) * (PAGE // 2))
        done = summarize(history)
        assert 0 == done.returncode, done.stderr
        assert "Traceback" not in done.stderr
        assert "kept as summaries.db.corrupt" in done.stderr
