"""`--include`/`--exclude` (the `include`/`exclude` settings) leave a workspace out of every command alike.

`index` and `run` write no record for an excluded workspace, `summarize` works on no record
there, and `search` shows none of its records, even those written before it was excluded (or
shipped in a cloned repository): docs/search.md says so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import invoke
from tests.support.pi_sessions import PiSession
from tests.support.service import ServiceProcess


def two_workspaces(home: Path) -> tuple[Path, PiSession, PiSession]:
    sessions = home / ".pi" / "agent" / "sessions"
    kept = PiSession("01a228f5-0000-7000-8000-00000000000a", cwd=str(home / "work" / "kept"))
    left = PiSession("01a228f5-0000-7000-8000-00000000000b", cwd=str(home / "scratch" / "left"))
    for session, name in ((kept, "kept"), (left, "left")):
        Path(session.cwd).mkdir(parents=True)
        session.file = sessions / f"--{name}--" / "s.jsonl"
        session.__post_init__()
        session.user(f"where is findme in {name}?")
        session.assistant(f"findme is in {name}")
    return sessions, kept, left


def exclude(home: Path, pattern: str) -> None:
    config = home / "config" / "pbot-watch" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"exclude = [{json.dumps(pattern)}]\n")


def found(query: str) -> set[str]:
    result = invoke("search", query, "--json")
    assert 0 == result.returncode, result.stderr
    return {hit["sessionId"] for hit in json.loads(result.stdout)["matches"]}


def record_of(session: PiSession) -> Path:
    return Path(session.cwd) / ".pi" / "pbot" / "history"


def test_index_and_search_leave_it_out(isolated_home: Path) -> None:
    """Records written before the exclusion stay on disk, but search no longer shows them."""
    _sessions, kept, left = two_workspaces(isolated_home)
    assert 0 == invoke("index").returncode
    assert {kept.session_id, left.session_id} == found("findme")
    exclude(isolated_home, str(isolated_home / "scratch" / "*"))
    left.user("a later findme question in left")
    left.assistant("a later answer")
    before = sorted(p.read_bytes() for p in record_of(left).iterdir())
    done = invoke("index")
    assert 0 == done.returncode, done.stderr
    assert "1 skipped" in done.stdout + done.stderr
    assert before == sorted(p.read_bytes() for p in record_of(left).iterdir())  # not written
    assert {kept.session_id} == found("findme")


@pytest.mark.slow
def test_run_leaves_it_out(isolated_home: Path) -> None:
    """The service writes no record for an excluded workspace; search shows only the other."""
    exclude(isolated_home, str(isolated_home / "scratch" / "*"))
    sessions, kept, left = two_workspaces(isolated_home)
    with ServiceProcess([sessions], None).start() as service:
        assert 0 == service.stop()
    assert record_of(kept).is_dir()
    assert not record_of(left).exists() or not any(record_of(left).iterdir())
    assert {kept.session_id} == found("findme")
