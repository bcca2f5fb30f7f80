"""A damaged ``search.db`` is derived data: every query, and ``reindex``, rebuilds it and answers.

A disk error or a copy taken mid-write leaves pages SQLite reports as ``database disk image is
malformed`` only when a query reads them, so the damage is made for real here (pages
overwritten in the middle of a real index) and the commands run as a person runs them.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from pathlib import Path

import pytest

from tests.support.cli import invoke
from tests.support.pi_sessions import PiSession


@pytest.fixture
def roots(tmp_path: Path) -> tuple[str, ...]:
    """Twenty indexed sessions of twenty exchanges each; the ``--sessions``/``--archive`` arguments."""
    sessions, archive = tmp_path / "sessions", tmp_path / "archive"
    for number in range(20):
        pi = PiSession(f"s-{number:02d}", "/w")
        pi.exchanges(20)
        pi.write(sessions / "--w--" / f"{number:02d}.jsonl")
    where = ("--sessions", str(sessions), "--archive", str(archive))
    assert 0 == invoke("index", *where).returncode
    assert 0 == invoke("search", "question", *where).returncode  # builds search.db
    assert 0 == invoke("memory", "search", "question", *where).returncode  # and raw memory in it
    return where


def index_file() -> Path:
    return Path(os.environ["XDG_STATE_HOME"]) / "pbot-watch" / "search.db"


def damage(path: Path) -> None:
    """Garbage over every page of every table; the schema and the version stay readable.

    That is the damage a query meets (a bad header is simpler: the index is not a database).
    """
    with sqlite3.connect(path) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        kept = {"sqlite_schema", "sqlite_master", "meta", "sqlite_autoindex_meta_1"}
        pages = sorted(
            pageno for name, pageno in conn.execute("SELECT name, pageno FROM dbstat") if name not in kept
        )
    conn.close()
    with path.open("r+b") as file:
        for page in pages:
            file.seek((page - 1) * page_size)
            file.write(bytes([0xDE, 0xAD]) * (page_size // 2))
    with sqlite3.connect(path) as conn, contextlib.suppress(sqlite3.DatabaseError):  # raised: damaged too
        assert [("ok",)] != conn.execute("PRAGMA quick_check").fetchall()
    conn.close()


class TestQueries:
    def test_search_rebuilds_and_answers(self, roots: tuple[str, ...]) -> None:
        """search finds what it found before the damage, and says the index was rebuilt."""
        before = json.loads(invoke("search", "question", "--json", *roots).stdout)
        damage(index_file())
        done = invoke("search", "question", "--json", *roots)
        assert (0, "") == (done.returncode, done.stderr)
        after = json.loads(done.stdout)
        assert before["total"] == after["total"]
        assert any("search index was damaged" in warning for warning in after["warnings"])

    def test_memory_search_rebuilds_and_answers(self, roots: tuple[str, ...]) -> None:
        """memory search answers as before the damage."""
        before = json.loads(invoke("memory", "search", "question", "--json", *roots).stdout)
        damage(index_file())
        done = invoke("memory", "search", "question", "--json", *roots)
        assert (0, "") == (done.returncode, done.stderr)
        assert before["total"] == json.loads(done.stdout)["total"]

    def test_the_next_query_finds_a_sound_index(self, roots: tuple[str, ...]) -> None:
        """After the rebuild the file passes SQLite's own check and no warning repeats."""
        damage(index_file())
        assert 0 == invoke("search", "question", *roots).returncode
        with sqlite3.connect(index_file()) as conn:
            assert [("ok",)] == conn.execute("PRAGMA quick_check").fetchall()
        conn.close()
        assert [] == json.loads(invoke("search", "question", "--json", *roots).stdout)["warnings"]


class TestReindex:
    def test_reindex_builds_from_no_file(self, roots: tuple[str, ...]) -> None:
        """reindex on a damaged index warns, rebuilds it whole, and search works after it."""
        damage(index_file())
        done = invoke("reindex", *roots)
        assert 0 == done.returncode
        assert "search index was damaged" in done.stderr
        assert done.stdout.startswith("20 records, ")
        assert 0 == invoke("search", "question", *roots).returncode
