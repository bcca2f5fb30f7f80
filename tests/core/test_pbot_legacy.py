"""A legacy folder made by personal-bot's own code, moved in by ``pbot-watch index`` as pbot would.

pbot's ``HistoryService`` (through the parity oracle) indexes and summarizes two sessions;
their records go to the user-level folder with ``workspace`` and ``file``, as pbot before 0.2.3
kept them, and one session file is deleted. ``pbot-watch index`` then imports them; the
workspace ends up holding what pbot 0.2.3's own load makes of the same folder.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.core.pbot_oracle import Oracle
from tests.e2e.pi_install import PiInstall
from tests.support.archive import archive_files, records
from tests.support.cli import invoke
from tests.support.pi_sessions import PiSession

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


@pytest.fixture
def oracle(pi_install: PiInstall) -> Iterator[Oracle]:
    pbot = Oracle(pi_install)
    yield pbot
    pbot.close()


def test_index_moves_pbots_legacy_records_in_as_pbot_does(tmp_path: Path, oracle: Oracle) -> None:
    agent = Path(os.environ["PI_CODING_AGENT_DIR"])
    workspace = tmp_path / "work"
    workspace.mkdir()
    session_dir = agent / "sessions" / "--work--"
    files = []
    for n, turns in ((1, 8), (2, 5)):
        path = session_dir / f"2026-12-01T10-00-0{n}-000Z_s{n}.jsonl"
        pi = PiSession(session_id=f"01a228f5-0000-7000-8000-0000000b000{n}", cwd=str(workspace), file=path)
        for i in range(turns):
            pi.turn(f"question {i} of session {n}: the rhubarb crumble", f"answer {i}")
        files.append(path)
    made = oracle.service(workspace, session_dir, files, organize=True)
    assert "error" not in made and made["writes"], made
    folder = workspace / ".pi" / "pbot" / "history"
    legacy = agent / "pbot" / "history"
    legacy.mkdir(parents=True)
    for path, file in zip(sorted(folder.glob("*.json")), sorted(files), strict=True):
        record = json.loads(path.read_bytes())
        nodes = record.pop("nodes")
        assert all(n["ready"] for n in nodes) and any(n["kind"] == "summary" for n in nodes)
        record.update(workspace=str(workspace), file=str(file), nodes=nodes)
        (legacy / path.name).write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")
    shutil.rmtree(workspace / ".pi")
    files[1].unlink()  # its session is gone; only the legacy record remains
    old = archive_files(legacy)

    # What pbot 0.2.3 itself makes of this folder on its load, for reference.
    assert oracle.service(workspace, session_dir, files[:1], agent_dir=agent)["writes"]
    by_pbot = records(folder)
    shutil.rmtree(workspace / ".pi")

    first = invoke("index")
    assert 0 == first.returncode, first.stderr
    assert "2 imported from pbot's old history" in first.stdout
    assert by_pbot == records(folder)
    assert old == archive_files(legacy)

    found = json.loads(invoke("search", "pbot summary of", "--json").stdout)
    assert {r["id"] for r in by_pbot.values()} == {m["id"].split(":")[0] for m in found["matches"]}
    gone = json.loads(invoke("search", "question 4 of session 2", "--json").stdout)["matches"]
    page = json.loads(invoke("read", gone[0]["id"], "--json").stdout)
    assert "the rhubarb crumble" in page["text"]

    kept = archive_files(folder)
    second = invoke("index")
    assert 0 == second.returncode, second.stderr
    assert "0 records written" in second.stdout and "0 imported" in second.stdout
    assert kept == archive_files(folder)
    # And pbot, loading the workspace pbot-watch filled, writes nothing either.
    assert [] == oracle.service(workspace, session_dir, files[:1], agent_dir=agent)["writes"]
