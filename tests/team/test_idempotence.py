"""One copy of each record whatever happens: a replay, a restart, two writers, a killed pusher."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import psycopg
import pytest

from pbot_watch.config import Settings
from pbot_watch.history.jstext import dumps
from pbot_watch.team.dsn import TeamUnavailable
from pbot_watch.team.gate import secret_gate
from pbot_watch.team.push import TeamPusher
from pbot_watch.team.schema import migrate
from tests.support.cli import pbot_watch_executable, scratch_user
from tests.support.postgres import PostgresServer
from tests.team.conftest import write_config
from tests.team.test_equivalence import _write_archive

SESSIONS = 60


def _pusher(tmp_path: Path, name: str, dsn: str, archive: Path) -> TeamPusher:
    settings = Settings.model_validate(
        {
            "state_dir": tmp_path / name,
            "machine": name,
            "team": {"enabled": True, "workspaces": ["*"], "batch_records": 7},
        }
    )
    gate = secret_gate()
    return TeamPusher(settings, dsn, gate, [(archive, None)])


def _archive(tmp_path: Path) -> Path:
    import random

    archive = tmp_path / "archive"
    _write_archive(archive, random.Random(5), sessions=SESSIONS)
    return archive


def _counts(dsn: str) -> tuple[int, int, int]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM pbot_records), (SELECT count(*) FROM pbot_nodes), "
            "(SELECT count(*) FROM (SELECT record_id, id FROM pbot_nodes GROUP BY 1, 2 HAVING count(*) > 1) d)"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def _expected_nodes(archive: Path) -> int:
    return sum(len(json.loads(p.read_text())["nodes"]) for p in archive.glob("*.json"))


@pytest.fixture
def initialised(team_dsn: str) -> str:
    with psycopg.connect(team_dsn) as conn:
        migrate(conn)
    return team_dsn


def test_replay_and_a_lost_ledger_push_nothing_twice(tmp_path: Path, initialised: str) -> None:
    archive = _archive(tmp_path)
    pusher = _pusher(tmp_path, "laptop", initialised, archive)
    assert pusher.catch_up().pushed == SESSIONS
    assert pusher.catch_up().pushed == 0  # nothing changed: no file is even read
    pusher.close()
    before = _counts(initialised)
    shutil.rmtree(tmp_path / "laptop")  # the ledger lost: everything is offered again
    again = _pusher(tmp_path, "laptop", initialised, archive)
    report = again.catch_up()
    again.close()
    assert (report.pushed, report.unchanged) == (0, SESSIONS)
    assert _counts(initialised) == before == (SESSIONS, _expected_nodes(archive), 0)


def test_a_changed_record_rewrites_only_its_changed_nodes(tmp_path: Path, initialised: str) -> None:
    archive = _archive(tmp_path)
    pusher = _pusher(tmp_path, "laptop", initialised, archive)
    pusher.catch_up()
    path = min(archive.glob("*.json"))
    record = json.loads(path.read_text())
    summary = next(n for n in record["nodes"] if n["kind"] == "summary" or n["kind"] == "exchange")
    summary["text"] += " and one more word: zeppelin"
    path.write_text(dumps(record) + "\n")
    with psycopg.connect(initialised) as conn:
        conn.execute("CREATE TABLE seen AS SELECT xmin::text AS x, record_id, id FROM pbot_nodes")
    assert pusher.catch_up().pushed == 1
    pusher.close()
    with psycopg.connect(initialised) as conn:
        changed = conn.execute(
            "SELECT count(*) FROM pbot_nodes n LEFT JOIN seen s ON s.record_id = n.record_id AND s.id = n.id "
            "AND s.x = n.xmin::text WHERE s.id IS NULL"
        ).fetchone()
        hit = conn.execute("SELECT count(*) FROM pbot_nodes WHERE text_lower LIKE '%zeppelin%'").fetchone()
    assert changed == (1,)
    assert hit == (1,)
    assert _counts(initialised)[2] == 0


def test_two_writers_pushing_the_same_records_at_once(tmp_path: Path, initialised: str) -> None:
    """Two machines with a synced archive (the same records) push together: one copy of each."""
    archive = _archive(tmp_path)
    mirror = tmp_path / "mirror"
    shutil.copytree(archive, mirror)
    pushers = [
        _pusher(tmp_path, "laptop", initialised, archive),
        _pusher(tmp_path, "devbox", initialised, mirror),
    ]
    reports = []
    errors: list[BaseException] = []

    def push(pusher: TeamPusher) -> None:
        try:
            reports.append(pusher.catch_up())
        except BaseException as error:  # noqa: BLE001 - reported by the test below
            errors.append(error)

    threads = [threading.Thread(target=push, args=(p,)) for p in pushers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for pusher in pushers:
        pusher.close()
    assert errors == []
    assert sum(r.pushed for r in reports) == SESSIONS  # each record went in once, by one of them
    assert sum(r.unchanged for r in reports) == SESSIONS
    assert _counts(initialised) == (SESSIONS, _expected_nodes(archive), 0)


@pytest.mark.slow
def test_server_restarted_during_a_push(tmp_path: Path, postgres: PostgresServer, initialised: str) -> None:
    import random

    archive = tmp_path / "big"
    _write_archive(archive, random.Random(9), sessions=400)
    pusher = _pusher(tmp_path, "laptop", initialised, archive)
    failures = 0
    restarter = threading.Thread(target=lambda: (time.sleep(0.3), postgres.restart()))
    restarter.start()
    while True:
        try:
            pusher.catch_up()
            break
        except TeamUnavailable:
            failures += 1
            time.sleep(0.2)
            assert failures < 200
    restarter.join()
    pusher.close()
    assert _counts(initialised) == (400, _expected_nodes(archive), 0)


@pytest.mark.slow
def test_a_pusher_killed_mid_push_leaves_nothing_half_done(tmp_path: Path, initialised: str) -> None:
    import random

    home = tmp_path / "home-cli"
    for sub in ("state", "config", "cache"):
        (home / sub).mkdir(parents=True)
    archive = tmp_path / "archive"
    _write_archive(archive, random.Random(3), sessions=300)
    write_config(home, "laptop", ["*"], extra=f'archive = "{archive}"')
    env = {**scratch_user(home), "PBOT_WATCH_TEAM_DSN": initialised}
    for delay in (0.8, 1.2):
        child = subprocess.Popen(
            [pbot_watch_executable(), "team", "push"], env=env, stdout=subprocess.DEVNULL
        )
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    done = subprocess.run(
        [pbot_watch_executable(), "team", "push"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert _counts(initialised) == (300, _expected_nodes(archive), 0)
