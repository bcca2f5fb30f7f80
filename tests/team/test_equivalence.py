"""Team search gives local search's totals on the same records (literal: pbot's equivalence)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import psycopg
import pytest

from pbot_watch.history.jstext import dumps
from pbot_watch.history.nodes import SessionHistory, index_history
from pbot_watch.search.index import RecordFolder, SearchIndex
from pbot_watch.search.queries import search_history
from pbot_watch.team.search import team_read, team_search
from tests.team.conftest import push_archive

PIECES = [
    "Error",
    "error",
    "ERROR",
    "数据",
    "数据库",
    "鲸鱼",
    "鲸",
    "中文",
    "日本語",
    "한국어",
    "50%",
    "a_b",
    "a\\b",
    "İstanbul",
    "straße",
    "STRASSE",
    "café",
    "cafe\u0301",
    "🙂",
    "x",
    "go",
    "+1",
    "  ",
    "\t",
    "the cache",
    "Cache",
    "flaky test",
    "データ",
    "ﬁle",
    "Ω",
    "K",
    "\u212a",
]
NEEDLES = [
    "error",
    "Error",
    "数",
    "数据",
    "据库",
    "鲸鱼",
    "鲸",
    "中",
    "日本",
    "한",
    "50%",
    "%",
    "_",
    "a_b",
    "a\\b",
    "\\",
    "i̇stanbul",
    "istanbul",
    "straße",
    "strasse",
    "ß",
    "café",
    "é",
    "\u0301",
    "🙂",
    "x",
    "go",
    "+1",
    "e",
    " ",
    "the cache",
    "cache",
    "flaky",
    "データ",
    "ﬁ",
    "fi",
    "ω",
    "k",
    "\u212a",
    "zzz-none",
    "  error",
]


def _write_archive(folder: Path, rng: random.Random, sessions: int = 12) -> None:
    folder.mkdir(parents=True)
    for s in range(sessions):
        branch = []
        for i in range(rng.randint(1, 9)):
            stamp = f"2026-03-{1 + s:02d}T{i:02d}:00:00.000Z"
            question = " ".join(rng.choice(PIECES) for _ in range(rng.randint(1, 6)))
            answer = " ".join(rng.choice(PIECES) for _ in range(rng.randint(1, 8)))
            branch.append(
                {
                    "entryIds": [f"u{s}x{i}", f"a{s}x{i}"],
                    "from": stamp if rng.random() > 0.05 else "not a date",
                    "to": stamp,
                    "completed": True,
                    "text": f"用户：\n{question}\n\n助手：\n{answer}",
                }
            )
        record = index_history(SessionHistory(f"session-{s}", f"Session {s}", [branch]))
        for node in record["nodes"]:
            if node["kind"] == "summary" and rng.random() < 0.7:
                node["text"] = " ".join(rng.choice(PIECES) for _ in range(5))
                node["ready"] = True
        record["workspace"] = f"/home/dev/space-{s % 3}"
        (folder / f"{record['id']}.json").write_text(dumps(record) + "\n", encoding="utf-8")


@pytest.fixture
def both(tmp_path: Path, team_dsn: str) -> Iterator[tuple[SearchIndex, psycopg.Connection]]:
    archive = tmp_path / "archive"
    _write_archive(archive, random.Random(18))
    index = SearchIndex(tmp_path / "search.db")
    index.rebuild([RecordFolder(archive, None)])
    pusher, report = push_archive(tmp_path / "state", team_dsn, archive)
    pusher.close()
    assert report.pushed == 12
    with closing(index), psycopg.connect(team_dsn) as conn:
        yield index, conn


def test_literal_totals_equal_local_totals(both: tuple[SearchIndex, psycopg.Connection]) -> None:
    index, conn = both
    for needle in NEEDLES:
        local = search_history(index, needle, limit=50)
        team = team_search(conn, needle, limit=50)
        assert (needle, team.total) == (needle, local.total)
        assert sorted(m.id for m in team.matches) == sorted(m.id for m in local.matches) or local.total > 50
    # No query lists the sessions; filters narrow both alike.
    assert team_search(conn, "").total == search_history(index, "").total > 0
    for needle in ("error", "数据"):
        local = search_history(index, needle, from_="2026-03-04", to="2026-03-08", session_id=None)
        team = team_search(conn, needle, from_="2026-03-04", to="2026-03-08")
        assert team.total == local.total
    for needle in ("数", "数据", "鲸", "error"):  # within a session, short CJK is not narrowed by terms
        for session in ("session-3", "session-7"):
            local = search_history(index, needle, session_id=session)
            assert team_search(conn, needle, session_id=session).total == local.total, (needle, session)


def test_snippets_and_reads_match_local(both: tuple[SearchIndex, psycopg.Connection]) -> None:
    from pbot_watch.search.queries import read_node

    index, conn = both
    for needle in ("cache", "鲸", "straße"):
        local = {m.id: m for m in search_history(index, needle, limit=50).matches}
        for hit in team_search(conn, needle, limit=50).matches:
            assert hit.snippet == local[hit.id].snippet
            assert hit.exchanges == local[hit.id].exchanges
    node = next(iter(local))
    mine, theirs = read_node(index, node, limit=7), team_read(conn, node, limit=7)
    assert (theirs.text, theirs.next_offset, theirs.total_length) == (
        mine.text,
        mine.next_offset,
        mine.total_length,
    )
    assert [p.id for p in theirs.parents] == [p.id for p in mine.parents]


def test_terms_finds_what_local_terms_finds(both: tuple[SearchIndex, psycopg.Connection]) -> None:
    """Every node holding a query term (local terms search also adds words of its first hits)."""
    index, conn = both
    for query in ("errors", "flaky tests", "数据", "鲸"):
        local = search_history(index, query, match="terms", limit=50)
        team = team_search(conn, query, match="terms", limit=50)
        assert 0 < team.total <= local.total
        if local.total <= 50:
            assert {m.id for m in team.matches} <= {m.id for m in local.matches}
        assert team.matches[0].score == 1.0
