"""``pbot-watch secrets scan`` finds what an older, unredacted archive holds; ``scrub`` removes it."""

from __future__ import annotations

import json
import sqlite3
import zlib
from pathlib import Path

import pytest

from pbot_watch.redact import policy
from tests.redact.test_everywhere import PLANTS, _everything_stored, _leaks, _plant_session
from tests.support.cli import invoke


@pytest.fixture(autouse=True)
def redaction_back_on():
    yield
    policy.configure(True)


def _hits(query: str) -> list[tuple[str, str]]:
    shown = json.loads(invoke("search", query, "--json").stdout)
    return [(m["id"], m.get("session_id", "")) for m in shown["matches"]]


def test_scan_finds_an_unredacted_archive_and_scrub_leaves_it_clean(isolated_home: Path):
    config = isolated_home / "config" / "pbot-watch" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[privacy]\nredact = false\n")  # an archive written as personal-bot writes it
    _, workspace = _plant_session(isolated_home)
    assert invoke("index").returncode == 0
    invoke("search", "config", "--json")
    invoke("memory", "search", "line", "--json")
    assert _leaks(_everything_stored(isolated_home, workspace))

    config.write_text("")
    scan = invoke("secrets", "scan", "--json")
    assert 1 == scan.returncode
    document = json.loads(scan.stdout)
    assert not document["clean"]
    assert {"record", "history index", "memory index"} == {found["place"] for found in document["found"]}
    assert {plant.kind for plant in PLANTS} <= set(document["kinds"])
    assert [] == _leaks(scan.stdout)  # ids and counts, never a value
    node_ids = {found["id"] for found in document["found"] if found["place"] == "record"}
    before = _hits("noted")

    scrub = invoke("secrets", "scrub")
    assert 0 == scrub.returncode, scrub.stderr
    clean = invoke("secrets", "scan")
    assert 0 == clean.returncode, clean.stdout
    assert "no secrets found" in clean.stdout
    invoke("memory", "search", "line", "--json")
    stored = _everything_stored(isolated_home, workspace)
    assert [] == _leaks(stored)
    records = [json.loads(p.read_text()) for p in (workspace / ".pi").rglob("*.json")]
    assert node_ids <= {node["id"] for record in records for node in record["nodes"]} | {""}
    assert before == _hits("noted")  # search results are otherwise unchanged
    db = next((isolated_home / "state").rglob("search.db"))
    for side in (db, Path(f"{db}-wal")):
        if side.exists():
            raw = side.read_bytes().decode("utf-8", "replace")
            leaked = [p for p in PLANTS if p.value in raw]
            if leaked:
                i = raw.find(leaked[0].value)
                print("LEAK", side, repr(raw[max(0, i - 300) : i + 40]))
            assert [] == _leaks(raw)


def test_scan_reads_raw_memory_of_an_older_schema_until_it_is_rebuilt(tmp_path: Path):
    """Raw memory as schema 6 kept it (a zlib text per source row, the path on each row) is on disk
    until the next query rebuilds it: the scan reads it too.
    """
    from pbot_watch.cli.secrets_cmd import index_leaks

    plant = PLANTS[0]
    db = tmp_path / "search.db"
    conn = sqlite3.connect(db)
    conn.execute(
        "CREATE TABLE mem_sources(rowid INTEGER PRIMARY KEY, file TEXT, session_id TEXT, entry_id TEXT, label TEXT)"
    )
    conn.execute(
        "CREATE TABLE mem_texts(rowid INTEGER PRIMARY KEY, data BLOB NOT NULL, packed INTEGER NOT NULL)"
    )
    conn.execute("INSERT INTO mem_sources VALUES (1, '/sessions/s.jsonl', 'sess-1', 'e1', 'toolResult bash')")
    text = f"cat .env\n{plant.text}\n" * 20
    conn.execute("INSERT INTO mem_texts VALUES (1, ?, 1)", (zlib.compress(text.encode()),))
    conn.commit()
    conn.close()
    (leak,) = index_leaks(db)
    assert ("memory index", "/sessions/s.jsonl", "sess-1", "e1") == (
        leak.place,
        leak.path,
        leak.session_id,
        leak.item_id,
    )
    assert plant.kind in leak.kinds
