"""`--include`/`--exclude` (the `include`/`exclude` settings) leave a workspace out of every command alike.

`index` and `run` write no record for an excluded workspace, `summarize` works on no record
there, and `search` shows none of its records, even those written before it was excluded (or
shipped in a cloned repository): docs/search.md says so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.archive import records
from tests.support.cli import invoke
from tests.support.pi_sessions import PiSession
from tests.support.service import ServiceProcess
from tests.support.summaries import summaries


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


GLOBS = {
    "exclude": lambda home: f"exclude = [{json.dumps(str(home / 'scratch' / '*'))}]\n",
    "include": lambda home: f"include = [{json.dumps(str(home / 'work' / '*'))}]\n",
}


def acted_on(command: str, sessions: Path, both: tuple[PiSession, PiSession]) -> set[str]:
    """The sessions ``command`` did its work for: a record written, a summary made, a hit shown."""
    if command == "search":
        return found("findme")
    if command == "run":
        with ServiceProcess([sessions], None).start() as service:
            assert 0 == service.stop()
    else:
        done = invoke(command)
        assert 0 == done.returncode, done.stderr
    out = set()
    for session in both:
        record = records(record_of(session))[session.session_id]
        if command == "summarize":
            if any(node["ready"] for node in summaries(record).values()):
                out.add(session.session_id)
        elif "a later findme" in json.dumps(record, ensure_ascii=False):
            out.add(session.session_id)
    return out


@pytest.mark.parametrize("setting", list(GLOBS))
@pytest.mark.parametrize(
    "command", ["index", pytest.param("run", marks=pytest.mark.slow), "summarize", "search"]
)
def test_every_command_leaves_out_the_same_workspace(isolated_home: Path, command: str, setting: str) -> None:
    """The same settings leave the same workspace out of `index`, `run`, `summarize` and `search`.

    Both workspaces have a record (indexed before the setting), with exchanges enough for a
    summary; then the setting leaves ``scratch/left`` out (``exclude`` naming it, or ``include``
    naming only ``work/*``) and each session gets a later exchange. Each command must act for
    ``kept`` alone: its record takes the later exchange (``index``, ``run``), it is summarized
    (``summarize``), it is found (``search``, though the other record is on disk).
    """
    sessions, kept, left = two_workspaces(isolated_home)
    for session in (kept, left):
        session.exchanges(4)
    assert 0 == invoke("index").returncode
    config = isolated_home / "config" / "pbot-watch" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(GLOBS[setting](isolated_home))
    for session in (kept, left):
        session.user("a later findme question")
        session.assistant("a later answer")
    assert {kept.session_id} == acted_on(command, sessions, (kept, left))
