"""Team memory search gives local memory search's totals on the same sessions (literal, CJK included)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import psycopg
import pytest

from pbot_watch.config import Settings
from pbot_watch.memory.index import refresh_memory
from pbot_watch.memory.query import search_memory
from pbot_watch.search.index import SearchIndex
from pbot_watch.team.gate import secret_gate
from pbot_watch.team.memory_search import team_memory_search
from pbot_watch.team.push import TeamPusher
from pbot_watch.team.schema import migrate
from tests.support.pi_sessions import PiSession
from tests.team.test_equivalence import NEEDLES, PIECES


def _words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(PIECES) for _ in range(count))


def _write_sessions(root: Path, workspace: str, rng: random.Random, sessions: int = 8) -> None:
    for s in range(sessions):
        pi = PiSession(f"mem-{s}", workspace)
        for turn in range(rng.randint(1, 6)):
            pi.user(_words(rng, rng.randint(1, 5)))
            call = f"call_{s}_{turn}"
            pi.assistant(
                _words(rng, 3), thinking=_words(rng, 4), calls=[(call, "bash", {"command": _words(rng, 2)})]
            )
            output = "\n".join(_words(rng, rng.randint(0, 6)) for _ in range(rng.randint(1, 5)))
            pi.tool_result(output, call_id=call, error=rng.random() < 0.2)
            if rng.random() < 0.3:
                pi.bash(_words(rng, 2), _words(rng, 5))
        if s == 0:
            # A source longer than the terms vector sees: a short CJK needle far into it.
            pi.user("x" * 70_000 + "\n鲸鱼 at the end")
        pi.write(root / f"mem-{s}.jsonl")


@pytest.fixture
def both(tmp_path: Path, team_dsn: str) -> Iterator[tuple[SearchIndex, psycopg.Connection]]:
    sessions = tmp_path / "sessions"
    workspace = tmp_path / "proj"
    _write_sessions(sessions, str(workspace), random.Random(21))
    index = SearchIndex(tmp_path / "search.db")
    refresh_memory(index, [sessions])
    with psycopg.connect(team_dsn) as conn:
        migrate(conn)
    settings = Settings.model_validate(
        {
            "state_dir": tmp_path / "state",
            "sessions": [sessions],
            "team": {"enabled": True, "workspaces": [str(workspace)], "raw_memory": True},
        }
    )
    pusher = TeamPusher(settings, team_dsn, secret_gate())
    try:
        report = pusher.push_memory(index)
    finally:
        pusher.close()
    assert report.sessions == 8
    assert report.pushed > 50
    with closing(index), psycopg.connect(team_dsn) as conn:
        yield index, conn


def test_literal_totals_equal_local_totals(both: tuple[SearchIndex, psycopg.Connection]) -> None:
    index, conn = both
    for needle in [*NEEDLES, "鲸鱼 at", "x\nx", "FAILED"]:
        local = search_memory(index, needle, limit=50)
        team = team_memory_search(conn, needle, limit=50)
        assert (needle, team.total) == (needle, local.total)
        if local.total <= 50:
            assert sorted(h.handle for h in team.hits) == sorted(h.handle for h in local.hits), needle
    assert team_memory_search(conn, "鲸鱼").total > 0
    assert team_memory_search(conn, "", limit=50).total == search_memory(index, "", limit=50).total


def test_hits_show_what_local_hits_show(both: tuple[SearchIndex, psycopg.Connection]) -> None:
    index, conn = both
    for needle in ("cache", "鲸", "straße", "error"):
        local = {h.handle: h for h in search_memory(index, needle, limit=50).hits}
        team = team_memory_search(conn, needle, limit=50)
        assert team.hits
        for hit in team.hits:
            mine = local[hit.handle]
            assert (hit.line, hit.snippet, hit.snippet_lines, hit.section, hit.context, hit.label) == (
                mine.line,
                mine.snippet,
                mine.snippet_lines,
                mine.section,
                mine.context,
                mine.label,
            )
            assert hit.machine is not None and hit.workspace == "proj"


def test_paging_and_terms(both: tuple[SearchIndex, psycopg.Connection]) -> None:
    _index, conn = both
    first = team_memory_search(conn, "e", limit=5)
    assert first.total > 5 and first.next_cursor is not None
    second = team_memory_search(conn, "e", limit=5, after=first.next_cursor)
    assert not {h.handle for h in first.hits} & {h.handle for h in second.hits}
    terms = team_memory_search(conn, "flaky errors", match="terms", limit=5)
    assert terms.total > 0 and terms.hits[0].score == 1.0
