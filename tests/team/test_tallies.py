"""Tallies: the exact totals of common team queries stay exact as nodes come and go.

A query with ``TALLY_MIN`` hits or more is tallied on its first search; later searches read
the tally. Each test compares the tally's total with a plain ``count(*)`` of the same query
after pushes, rewrites and a writer that was mid-transaction while the tally was registered.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pbot_watch.history.jstext import dumps
from pbot_watch.history.nodes import SessionHistory, index_history
from pbot_watch.search.index import RecordFolder, SearchIndex
from pbot_watch.search.queries import search_history
from pbot_watch.team.push import TeamPusher
from pbot_watch.team.search import like_pattern, team_search
from pbot_watch.team.tallies import FOLD_ROWS, TALLY_MIN
from tests.team.conftest import push_archive

EXCHANGES = 2 * TALLY_MIN + 200


def _record(session: str, exchanges: int, word: str, every: int = 2) -> dict[str, object]:
    branch = [
        {
            "entryIds": [f"u{session}{i}", f"a{session}{i}"],
            "from": f"2026-04-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}.000Z",
            "to": f"2026-04-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}.000Z",
            "completed": True,
            "text": f"用户：\nquestion {i} {word if i % every == 0 else 'plain'} 数据\n\n助手：\nanswer {i}",
        }
        for i in range(exchanges)
    ]
    record = index_history(SessionHistory(session, f"Session {session}", [branch]))
    record["workspace"] = "/home/dev/proj"
    return record


def _write(folder: Path, record: dict[str, object]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{record['id']}.json").write_text(dumps(record) + "\n", encoding="utf-8")


def _count(conn: psycopg.Connection, needle: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pbot_nodes WHERE searchable AND text_lower LIKE %s", (like_pattern(needle),)
    ).fetchone()
    conn.rollback()
    assert row is not None
    return int(row[0])


def _tallies(conn: psycopg.Connection) -> dict[str, bool]:
    rows = dict(conn.execute("SELECT key, ready FROM pbot_tallies").fetchall())
    conn.rollback()
    return rows


@pytest.fixture
def team(tmp_path: Path, team_dsn: str) -> Iterator[tuple[Path, TeamPusher, psycopg.Connection]]:
    archive = tmp_path / "archive"
    _write(archive, _record("big", EXCHANGES, "tallyword"))
    pusher, _ = push_archive(tmp_path / "state", team_dsn, archive)
    conn = psycopg.connect(team_dsn)
    try:
        yield archive, pusher, conn
    finally:
        pusher.close()
        conn.close()


def test_a_common_query_is_tallied_and_stays_exact(team: tuple[Path, TeamPusher, psycopg.Connection]) -> None:
    archive, pusher, conn = team
    first = team_search(conn, "TallyWord")
    assert first.total == _count(conn, "tallyword") >= TALLY_MIN
    assert _tallies(conn) == {f"literal:{like_pattern('tallyword')}": True}
    # More records, a record rewritten with fewer hits, a record gone from the server.
    _write(archive, _record("more", 300, "tallyword", every=1))
    _write(archive, _record("big", EXCHANGES, "tallyword", every=3))
    pusher.catch_up()
    with psycopg.connect(pusher.dsn, autocommit=True) as other:
        other.execute("DELETE FROM pbot_records WHERE session_id = 'more'")
    again = team_search(conn, "tallyword")
    assert again.total == _count(conn, "tallyword")
    assert [m.id for m in again.matches] == [
        m.id for m in team_search(conn, "tallyword", session_id="big").matches
    ]
    # terms too: the tally of the query's tsquery.
    terms = team_search(conn, "tallyword", match="terms")
    row = conn.execute("SELECT count(*) FROM pbot_nodes WHERE searchable AND terms @@ 'tallyword'").fetchone()
    conn.rollback()
    assert row is not None
    assert terms.total == row[0]
    assert team_search(conn, "tallyword", match="terms").total == row[0]
    assert terms.matches[0].score == 1.0


def test_a_writer_mid_transaction_when_the_tally_is_made_is_counted(
    team: tuple[Path, TeamPusher, psycopg.Connection],
) -> None:
    """Step 2 of tallies.py: registering waits for a writer that added nodes before the tally existed."""
    _archive, pusher, conn = team
    before = _count(conn, "tallyword")
    writer = psycopg.connect(pusher.dsn)
    writer.execute(
        "INSERT INTO pbot_records SELECT 'copy', session_id, name, name_json, machine, os_user, workspace, "
        "'x', now(), pushed_by FROM pbot_records WHERE record_id IN (SELECT record_id FROM pbot_records WHERE session_id = 'big')"
    )
    writer.execute(
        "INSERT INTO pbot_nodes SELECT 'copy', id, seq, kind, level, from_, to_, from_ms, to_ms, ready, "
        "completed, searchable, capped, entry_ids, children, parents, text, text_json, text_lower, terms, hash "
        "FROM pbot_nodes WHERE record_id IN (SELECT record_id FROM pbot_records WHERE session_id = 'big')"
    )
    done: list[int] = []
    search = threading.Thread(target=lambda: done.append(team_search(conn, "tallyword").total))
    search.start()
    time.sleep(1.0)
    writer.commit()  # the registering search waits for this, then counts
    writer.close()
    search.join(60)
    # The search's total is its registration's count, made once the writer it waited for committed.
    assert done == [2 * before]
    assert _tallies(conn) == {f"literal:{like_pattern('tallyword')}": True}
    assert team_search(conn, "tallyword").total == _count(conn, "tallyword") == 2 * before


def test_deltas_fold_and_a_reader_counts_for_itself(
    team: tuple[Path, TeamPusher, psycopg.Connection], tmp_path: Path
) -> None:
    archive, pusher, conn = team
    team_search(conn, "tallyword")
    for _ in range(FOLD_ROWS + 5):  # one delta row per statement that changes the count
        with conn.transaction():
            conn.execute(
                "UPDATE pbot_nodes SET text_lower = text_lower || ' tallyword' WHERE record_id = (SELECT record_id FROM pbot_records WHERE session_id = 'big') AND "
                "id = (SELECT id FROM pbot_nodes WHERE record_id = (SELECT record_id FROM pbot_records WHERE session_id = 'big') AND searchable AND "
                "text_lower NOT LIKE '%tallyword%' ORDER BY seq LIMIT 1)"
            )
    rows = conn.execute("SELECT count(*) FROM pbot_tally_deltas").fetchone()
    conn.rollback()
    assert rows is not None
    assert rows[0] > FOLD_ROWS
    assert team_search(conn, "tallyword").total == _count(conn, "tallyword")
    rows = conn.execute("SELECT count(*) FROM pbot_tally_deltas").fetchone()
    conn.rollback()
    assert rows == (1,)
    assert team_search(conn, "tallyword").total == _count(conn, "tallyword")
    # A read-only role without the tallies' grants counts for itself and registers nothing.
    with psycopg.connect(pusher.dsn, autocommit=True) as admin:
        admin.execute("CREATE ROLE tally_reader LOGIN")
        admin.execute("GRANT SELECT ON pbot_records, pbot_nodes, pbot_meta, pbot_migrations TO tally_reader")
    reader_dsn = pusher.dsn.replace("postgres@", "tally_reader@")
    with psycopg.connect(reader_dsn) as reader:
        assert team_search(reader, "数据").total == _count(conn, "数据")
        assert team_search(reader, "tallyword").total == _count(conn, "tallyword")
    assert f"literal:{like_pattern('数据')}" not in _tallies(conn)
    # And local search, on the same records, agrees with the tallied total.
    index = SearchIndex(tmp_path / "search.db")
    try:
        index.rebuild([RecordFolder(archive, None)])
        with psycopg.connect(pusher.dsn, autocommit=True) as admin:
            admin.execute("DELETE FROM pbot_records")  # the nodes go with them
        push_archive(tmp_path / "state-2", pusher.dsn, archive)[0].close()
        for needle in ("tallyword", "数据"):
            assert team_search(conn, needle).total == search_history(index, needle).total
            assert team_search(conn, needle).total == search_history(index, needle).total
    finally:
        index.close()
