"""The running service wires its extensions: the search index listener and the summary model."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from pbot_watch.search.index import NodeTexts
from tests.support.paths import FIXTURES
from tests.support.pi_sessions import append, lines_of
from tests.support.service import ServiceProcess, wait_for

pytestmark = pytest.mark.slow

PLAIN = FIXTURES / "real-v3" / "01-plain-multiturn.jsonl"


def indexed_texts(db: Path) -> str:
    """Every exchange text the index holds, read straight from SQLite (no CLI refresh)."""
    if not db.exists():
        return ""
    with sqlite3.connect(db) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "node_texts" not in tables:
            return ""
        unpack = NodeTexts(conn).unpack
        return "\n".join(unpack(*row) or "" for row in conn.execute("SELECT text, packed FROM node_texts"))


class TestSearchListener:
    def test_append_reaches_the_index_without_a_query(self, tmp_path: Path) -> None:
        """A turn appended while the service runs is in search.db before any search refreshes it."""
        sessions = tmp_path / "sessions" / "--proj--"
        sessions.mkdir(parents=True)
        archive = tmp_path / "archive"
        path = sessions / "s.jsonl"
        lines = lines_of(PLAIN)
        for line in lines[:-2]:
            append(path, line)
        with ServiceProcess([tmp_path / "sessions"], archive).start() as service:
            db = service.state_dir / "search.db"
            wait_for(lambda: "Second turn" in indexed_texts(db), what="the first turns in the index")
            last_user = json.loads(lines[-2])["message"]["content"][0]["text"]
            for line in lines[-2:]:
                append(path, line)
            wait_for(lambda: last_user in indexed_texts(db), what="the appended turn in the index")
            assert service.stop() == 0


class TestModelFlags:
    def test_run_takes_the_model_from_its_flags(self, tmp_path: Path) -> None:
        """`run --model M --api-base URL` summarizes with M, as status shows (no call is made while busy)."""
        sessions = tmp_path / "sessions"
        sessions.mkdir()
        extra = ("--model", "openai/test-model", "--api-base", "http://127.0.0.1:9", "--idle-seconds", "3600")
        with ServiceProcess([sessions], tmp_path / "archive", *extra).start() as service:
            status = service.wait_status(lambda s: bool(s.summaries), "the summaries status")
            assert "openai/test-model" == status.summaries["model"]
            assert service.stop() == 0
