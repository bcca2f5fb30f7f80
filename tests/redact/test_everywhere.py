"""Planted secrets never reach a record, an index, a cue, a tool result or a log line.

One session holds every planted shape, spread over user text, assistant text, thinking, tool
arguments, tool output, bash output and session names. After ``pbot-watch index`` and both
indexes' first query, no record, no index row (raw memory's texts decompressed), no cue line,
no tool result, no CLI output and no log line holds any planted value, and every marker names
its plant's kind. Turning redaction off gives pbot's exact text back.
"""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import pytest

from pbot_watch.memory.index import text_codec
from pbot_watch.redact import holds_secret, marker, policy
from tests.support.cli import invoke
from tests.support.pi_sessions import PiSession
from tests.support.planted import planted

PLANTS = planted()


@pytest.fixture(autouse=True)
def redaction_back_on():
    yield
    policy.configure(True)


def _plant_session(home: Path) -> tuple[PiSession, Path]:
    workspace = home / "work" / "app"
    workspace.mkdir(parents=True)
    folder = home / ".pi" / "agent" / "sessions" / "--work-app--"
    w = PiSession("01a228f5-0000-7000-8000-00000000beef", cwd=str(workspace), file=folder / "s.jsonl")
    for n, plant in enumerate(PLANTS):
        where = n % 6
        if where == 0:
            w.user(f"note: {plant.text}")
            w.assistant("noted")
        elif where == 1:
            w.user("what is in the config?")
            w.assistant(f"It holds {plant.text}")
        elif where == 2:
            w.user("think about it")
            w.assistant("thought about it", thinking=f"the file says {plant.text}")
        elif where == 3:
            w.user("run it")
            w.assistant(None, calls=[(f"c{n}", "bash", {"command": f"echo '{plant.text}'"})])
            w.tool_result("done\n", call_id=f"c{n}", name="bash")
            w.assistant("ran it")
        elif where == 4:
            w.user("show the file")
            w.assistant(None, calls=[(f"c{n}", "read", {"path": "app.env"})])
            w.tool_result(f"line 1\n{plant.text}\nline 3\n", call_id=f"c{n}", name="read")
            w.assistant("shown")
        else:
            w.info(f"session {plant.text}")
            w.bash("cat secrets.txt", f"{plant.text}\n")
            w.user("and?")
            w.assistant("fine")
    return w, workspace


def _everything_stored(home: Path, workspace: Path) -> str:
    """Every text the archive and both indexes hold, decompressed, as one string."""
    parts = [p.read_text(encoding="utf-8") for p in (workspace / ".pi").rglob("*.json")]
    db = next((home / "state").rglob("search.db"))
    conn = sqlite3.connect(db)
    try:
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:  # every row of every table, FTS shadow tables too
            try:
                parts += [str(row) for row in conn.execute(f'SELECT * FROM "{table}"')]
            except sqlite3.OperationalError:
                continue  # a contentless FTS table: its shadow tables are read instead
        codec = text_codec(conn)
        parts += [
            codec.unpack(data, packed) for data, packed in conn.execute("SELECT data, packed FROM mem_texts")
        ]
    finally:
        conn.close()
    # And the files' bytes as they are: free pages and the -wal file too.
    parts += [side.read_bytes().decode("utf-8", "replace") for side in db.parent.glob("search.db*")]
    return "\n".join(parts)


def _kinds_named(text: str) -> set[str]:
    return {plant.kind for plant in PLANTS if marker(plant.kind) in text}


def _leaks(text: str) -> list[str]:
    return [plant.shape for plant in PLANTS if plant.value in text]


def test_planted_secrets_reach_no_record_index_cue_tool_result_or_output(isolated_home: Path):
    w, workspace = _plant_session(isolated_home)
    assert invoke("index").returncode == 0
    outputs = [
        invoke("search", "--json").stdout,
        invoke("search", "config", "--json").stdout,
        invoke("memory", "search", "line", "--json").stdout,
        invoke("memory", "search", "redacted", "--json").stdout,
        invoke("cues", str(w.file), "--json").stdout,
    ]
    stored = _everything_stored(isolated_home, workspace)
    assert [] == _leaks(stored)
    assert {plant.kind for plant in PLANTS} == _kinds_named(stored)
    assert not holds_secret(stored)
    for out in outputs:
        assert [] == _leaks(out)

    from pbot_watch.config import load_settings
    from pbot_watch.tools.registry import call

    settings = load_settings()
    found = call("search_memory", {"query": "redacted", "limit": 50}, settings)
    assert found.structured is not None, found.text
    handles = [hit["handle"] for hit in found.structured["hits"]]
    answers = [found, call("history_search", {"query": "redacted"}, settings)]
    answers += [call("recall_memory", {"handle": handle}, settings) for handle in handles]
    nodes = json.loads(invoke("search", "redacted", "--json").stdout)
    answers += [call("history_read", {"id": hit["id"]}, settings) for hit in nodes["matches"][:20]]
    for answer in answers:
        text = answer.text + json.dumps(answer.structured, ensure_ascii=False)
        assert [] == _leaks(text), answer.text[:200]
    assert len(answers) > 3


def test_a_log_line_holds_no_secret():
    from pbot_watch.log import configure_logging, get_logger

    out = io.StringIO()
    configure_logging(log_format="json", stream=out)
    log = get_logger("test")
    for plant in PLANTS:
        log.warning("read_failed", error=f"bad line: {plant.text}", lines=[plant.text])
    assert [] == _leaks(out.getvalue())
    assert {plant.kind for plant in PLANTS} == _kinds_named(out.getvalue())


def test_redaction_off_keeps_the_exact_text(isolated_home: Path):
    config = isolated_home / "config" / "pbot-watch" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[privacy]\nredact = false\n")
    _, workspace = _plant_session(isolated_home)
    assert invoke("index").returncode == 0
    records = "".join(p.read_text(encoding="utf-8") for p in (workspace / ".pi").rglob("*.json"))
    assert "[redacted:" not in records
    shown = json.loads(invoke("config", "--json").stdout)["settings"]["privacy"]
    assert {"redact": False} == shown["value"]
