"""A memory query while raw memory is being built: by the service (answer from what is there,
say what is missing) or by the query itself (a progress bar on a terminal, never in the JSON)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pbot_watch.config import Settings, load_settings
from pbot_watch.memory.index import held_stamps
from pbot_watch.memory.query import MemoryScope
from pbot_watch.search.index import SearchIndex
from pbot_watch.service.status import CatchUpInfo, RootInfo, iso
from pbot_watch.tools.registry import call
from tests.core.test_index_cli import on_terminal
from tests.support.cli import invoke, run
from tests.support.pi_sessions import PiSession
from tests.support.service import ServiceProcess, fake_status, service_lock, wait_for


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
def settings(root: Path) -> Settings:
    return load_settings({"sessions": [root]})


@pytest.fixture
def held(settings: Settings) -> Iterator[None]:
    """The service's lock, held as a running service holds it."""
    with service_lock(settings.state_dir):
        yield


def session(root: Path, name: str, text: str) -> Path:
    path = root / f"{name}.jsonl"
    s = PiSession(f"sess-{name}", file=path)
    s.user(text)
    s.assistant("done")
    return path


def catching_up(settings: Settings, root: Path, *, finished: bool = False) -> None:
    """The status file of a service reading ``root`` during its catch-up (or just after it)."""
    fake_status(
        settings.state_dir,
        roots=[RootInfo(path=str(root), exists=True, watched=True)],
        activity="busy",
        catch_up=CatchUpInfo(
            files_total=3,
            files_done=1,
            bytes_total=3000,
            bytes_done=1000,
            started=iso(0),
            finished=iso(1) if finished else None,
            seconds=1.0,
        ),
    )


def search(root: Path, *args: str) -> tuple[dict[str, object], str]:
    result = invoke("memory", "search", *args, "--sessions", str(root), "--json")
    assert 0 == result.returncode, result.stderr
    return json.loads(result.stdout), result.stderr


def held_files(settings: Settings) -> set[str]:
    index = SearchIndex(SearchIndex.default_path(settings.state_dir))
    try:
        return {path.name for path in held_stamps(index)}
    finally:
        index.close()


class TestWhileTheServiceBuilds:
    def test_answers_from_what_is_there_and_counts_the_rest(
        self, settings: Settings, root: Path, held: None
    ) -> None:
        """While the service catches up, a query reads no session file, answers and says what is missing."""
        session(root, "a", "the quokka plan")
        assert 1 == search(root, "quokka")[0]["total"]  # raw memory holds a (no service yet)
        session(root, "b", "quokka again")
        session(root, "c", "a third quokka")
        catching_up(settings, root)
        found, stderr = search(root, "quokka")
        assert (1, 2) == (found["total"], found["sessionsNotSearched"])
        assert "note: 2 sessions not yet searched" in stderr
        assert {"a.jsonl"} == held_files(settings)  # b and c were left to the service
        human = invoke("memory", "search", "quokka", "--sessions", str(root))
        assert "2 sessions not yet searched" in human.stderr
        text = call("search_memory", {"query": "quokka"}, settings).text
        assert "2 sessions not yet searched as written now: pbot-watch (its service" in text

    def test_an_append_not_yet_stored_counts_too(self, settings: Settings, root: Path, held: None) -> None:
        """A session raw memory holds older bytes of is searched as held, and counted as not current."""
        path = session(root, "a", "the quokka plan")
        search(root, "quokka")
        with path.open("ab") as out:
            out.write(b'{"type":"custom","id":"zz","parentId":null,"timestamp":"2024-01-01T00:00:09Z"}\n')
        catching_up(settings, root)
        found, _ = search(root, "quokka")
        assert (1, 1) == (found["total"], found["sessionsNotSearched"])

    def test_caught_up_service_leaves_the_query_its_reading(
        self, settings: Settings, root: Path, held: None
    ) -> None:
        """Once the catch-up finished, a query reads what is new itself, as without the service."""
        session(root, "a", "the quokka plan")
        session(root, "b", "quokka again")
        catching_up(settings, root, finished=True)
        found, stderr = search(root, "quokka")
        assert (2, 0) == (found["total"], found["sessionsNotSearched"])
        assert "not yet searched" not in stderr

    def test_a_root_the_service_does_not_read_is_read(
        self, settings: Settings, root: Path, tmp_path: Path, held: None
    ) -> None:
        """Only the service's own roots are left to it: the query reads any other root it is given."""
        session(root, "a", "the quokka plan")
        catching_up(settings, tmp_path / "elsewhere")
        found, _ = search(root, "quokka")
        assert (1, 0) == (found["total"], found["sessionsNotSearched"])

    def test_no_lock_means_no_service(self, settings: Settings, root: Path) -> None:
        """A status file saying "catching up" with nobody holding the lock is a dead service: read it all."""
        session(root, "a", "the quokka plan")
        catching_up(settings, root)
        found, _ = search(root, "quokka")
        assert (1, 0) == (found["total"], found["sessionsNotSearched"])

    def test_pinned_query_syncs_its_file(self, settings: Settings, root: Path, held: None) -> None:
        """A query pinned to its session (Pi's tool) reads that one file, service or not."""
        path = session(root, "a", "the quokka plan")
        catching_up(settings, root)
        answer = call("search_memory", {"query": "quokka"}, settings, scope=MemoryScope(session_file=path))
        assert answer.structured is not None
        assert (1, 0) == (answer.structured["total"], answer.structured["sessionsNotSearched"])


@pytest.mark.slow
def test_real_service_building_raw_memory(root: Path, tmp_path: Path) -> None:
    """A real service catching up on many sessions: a query meanwhile answers and counts what is missing."""
    for number in range(150):
        s = PiSession(f"sess-{number:03}", file=root / f"{number:03}.jsonl")
        for turn in range(10):
            s.user(f"quokka question {turn} " + "filler words " * 200)
            s.assistant("answer " * 200)
    with ServiceProcess([root], tmp_path / "archive").start(wait=False) as service:
        wait_for(lambda: (s := service.status()) is not None and s.catch_up is not None, what="catch-up")
        found, _ = search(root, "quokka question 0")
        status = service.status()
        assert status is not None
        assert status.catch_up is not None
        if status.catch_up.finished is None:  # the query was asked during the catch-up
            # Every session is either searched or counted (counted just before the search, so the
            # service may have stored a few of them meanwhile: then they are both).
            assert found["sessionsNotSearched"] > 0
            assert found["total"] + found["sessionsNotSearched"] >= 150  # type: ignore[operator]
        service.wait_status(lambda s: s.activity == "idle", "catch-up to finish")
        found, _ = search(root, "quokka question 0")
        assert (150, 0) == (found["total"], found["sessionsNotSearched"])


class TestProgress:
    def test_terminal_shows_a_bar_of_the_first_build(self, root: Path) -> None:
        """Without the service, the first query's build draws a bar on a terminal; a warm one does not."""
        for name in "abc":
            session(root, name, f"quokka {name}")
        code, out, shown = on_terminal("memory", "search", "quokka", "--sessions", str(root), "--json")
        assert 0 == code, shown
        assert 3 == json.loads(out)["total"]  # stdout is the JSON alone
        assert "reading sessions" in shown
        code, out, shown = on_terminal("memory", "search", "quokka", "--sessions", str(root))
        assert 0 == code, shown
        assert "reading sessions" not in shown

    def test_pipe_gets_no_bar(self, root: Path) -> None:
        """In a pipe, the first build says nothing on stderr and the JSON is the only output."""
        session(root, "a", "quokka")
        result = run("memory", "search", "quokka", "--sessions", str(root), "--json")
        assert 0 == result.returncode
        assert "" == result.stderr
        assert 1 == json.loads(result.stdout)["total"]
