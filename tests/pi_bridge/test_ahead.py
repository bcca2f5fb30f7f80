"""A pinned session's raw memory built ahead, piece by piece: searched meanwhile, and the same once built."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pbot_watch.config import Settings, load_settings
from pbot_watch.memory.cue_follow import FollowedCues, clean_ledgers, ledger_head
from pbot_watch.memory.handles import make_handle
from pbot_watch.memory.index import MemorySync, refresh_memory, sync_memory_file
from pbot_watch.memory.query import MemoryScope
from pbot_watch.pi_bridge.ahead import MemoryAhead
from pbot_watch.pi_bridge.protocol import Scope, ToolParams
from pbot_watch.pi_bridge.serve import Child
from pbot_watch.search.index import SearchIndex
from pbot_watch.tools.registry import call
from tests.memory.work import Work
from tests.support.pi_sessions import PiSession

WORDS = 60
"""Turns in the session: each says one numbered word ("wombat17") in its question and its tool output."""


def long_session(path: Path, turns: int = WORDS) -> PiSession:
    session = PiSession("sess-ahead", file=path)
    for n in range(turns):
        session.user(f"where is wombat{n}?", id=f"u{n}")
        session.assistant(None, calls=[(f"c{n}", "bash", {"command": f"grep -r wombat{n} ."})], id=f"a{n}")
        output = "\n".join(f"src/file{k}.ts: wombat{n} {'x' * 40}" for k in range(40))
        session.tool_result(output, call_id=f"c{n}", name="bash", id=f"t{n}")
        session.assistant(f"wombat{n} is in src.", id=f"b{n}")
    return session


@pytest.fixture
def settings(isolated_home: Path, tmp_path: Path) -> Settings:
    return load_settings({"sessions": [tmp_path / "roots"], "archive": tmp_path / "archive"})


def search(settings: Settings, path: Path, query: str, **scope: Any) -> dict[str, Any]:
    answer = call(
        "search_memory",
        {"query": query, "limit": 50},
        settings,
        scope=MemoryScope(session_file=path, **scope),
    )
    assert answer.failure is None, answer.text
    assert isinstance(answer.structured, dict)
    return {**answer.structured, "text": answer.text}


def handles(result: dict[str, Any]) -> list[str]:
    return sorted(hit["handle"] for hit in result["hits"])


class TestBuiltAhead:
    def test_a_query_during_the_build_answers_from_what_is_built_and_says_so(
        self, settings: Settings, tmp_path: Path
    ) -> None:
        """Two pieces in: the oldest turns are found, the session is counted as not searched, nothing waits."""
        path = tmp_path / "pi" / "s.jsonl"
        long_session(path)
        ahead = MemoryAhead(settings, piece=path.stat().st_size // 8)
        ahead.watch(path)
        assert ahead.step()
        assert ahead.step()
        assert ahead.behind(path)
        early = search(settings, path, "wombat1", read_at_most=0)
        assert early["sessionsNotSearched"] == 1
        assert "1 session not yet searched as written now" in early["text"]
        assert early["hits"], "the first turns are built"
        late = search(settings, path, f"wombat{WORDS - 1}", read_at_most=0)
        assert late["hits"] == []
        assert late["sessionsNotSearched"] == 1

    def test_built_in_pieces_it_answers_as_built_whole(self, settings: Settings, tmp_path: Path) -> None:
        """Every piece committed with its cursor: the finished index answers exactly as one read of the file."""
        path = tmp_path / "pi" / "s.jsonl"
        long_session(path)
        ahead = MemoryAhead(settings, piece=9_000)  # cuts fall inside lines, between calls and results
        ahead.watch(path)
        steps = 0
        while ahead.step():
            steps += 1
        assert steps > 10
        assert not ahead.behind(path)
        assert ahead.bytes_read >= path.stat().st_size
        pieces = [search(settings, path, query) for query in ("wombat", "wombat7 x", "src/file3")]
        other = settings.model_copy(update={"state_dir": tmp_path / "whole-state"})
        whole = [search(other, path, query) for query in ("wombat", "wombat7 x", "src/file3")]
        assert not (tmp_path / "whole-state").samefile(settings.state_dir)
        for built, read in zip(pieces, whole, strict=True):
            assert built["sessionsNotSearched"] == read["sessionsNotSearched"] == 0
            assert built["total"] == read["total"]
            assert handles(built) == handles(read)

    def test_a_query_after_the_build_reads_only_what_was_appended(
        self, settings: Settings, tmp_path: Path
    ) -> None:
        path = tmp_path / "pi" / "s.jsonl"
        session = long_session(path)
        ahead = MemoryAhead(settings, piece=1 << 20)
        assert not ahead.before_query(path)
        session.user("and the numbat?", id="late")
        assert search(settings, path, "numbat")["hits"]

    def test_a_session_the_service_indexed_is_not_read_again(
        self, settings: Settings, tmp_path: Path
    ) -> None:
        """Raw memory already holds the file as it is (the service's build): the child reads none of it."""
        path = settings.sessions[0] / "ws" / "s.jsonl"
        long_session(path)
        index = SearchIndex(SearchIndex.default_path(settings.state_dir))
        try:
            refresh_memory(index, settings.sessions)
        finally:
            index.close()
        ahead = MemoryAhead(settings, piece=4096)
        assert not ahead.before_query(path)
        assert ahead.bytes_read == 0
        assert not ahead.step()


class TestTheChildDuringTheBuild:
    def test_a_recall_of_the_part_not_built_says_so(self, settings: Settings, tmp_path: Path) -> None:
        """A cue's handle of the newest turns is not "fix your arguments" alone: the note says why."""
        path = tmp_path / "pi" / "s.jsonl"
        long_session(path)
        child = Child(settings)
        child._ahead = MemoryAhead(settings, piece=path.stat().st_size // 8, wait=0)  # one piece per query
        scope = Scope(sessionFile=str(path), sessionId="sess-ahead")
        late = make_handle("sess-ahead", f"t{WORDS - 1}", 0)
        reply = child.tool(ToolParams(name="recall_memory", arguments={"handle": late}, scope=scope))
        assert reply.failure == "arguments"
        assert "still being built" in reply.text
        searched = child.tool(ToolParams(name="search_memory", arguments={"query": "wombat"}, scope=scope))
        assert searched.structured is not None
        assert searched.structured["sessionsNotSearched"] == 1
        while child._ahead.step():
            pass
        reply = child.tool(ToolParams(name="recall_memory", arguments={"handle": late}, scope=scope))
        assert reply.failure is None, reply.text
        assert "still being built" not in reply.text


class TestPinnedOutsideTheRoots:
    def test_an_unpinned_refresh_keeps_it_and_the_next_pinned_sync_goes_on_from_its_cursor(
        self, settings: Settings, tmp_path: Path
    ) -> None:
        """Pi's session folder is not a root: refreshing the roots neither drops nor re-reads the pinned file."""
        (tmp_path / "roots").mkdir()
        Work(tmp_path / "roots" / "ws" / "other.jsonl").run("ls", "a\n")
        path = tmp_path / "pi" / "s.jsonl"
        session = long_session(path)
        index = SearchIndex(SearchIndex.default_path(settings.state_dir))
        try:
            assert sync_memory_file(index, path, pinned=True)
            refresh_memory(index, settings.sessions)
            held = {row[0] for row in index.conn.execute("SELECT path FROM mem_files")}
            assert str(path) in held
            size = path.stat().st_size
            session.user("and the numbat?", id="late")
            report = MemorySync()
            assert sync_memory_file(index, path, report, pinned=True)
            assert (
                report.bytes_read < (path.stat().st_size - size) + 64 << 10
            )  # the append and the cursor's windows
            path.unlink()
            refresh_memory(index, settings.sessions)
            held = {row[0] for row in index.conn.execute("SELECT path FROM mem_files")}
            assert str(path) not in held, "a pinned file that is gone goes"
            assert len(held) == 1
        finally:
            index.close()

    def test_an_unpinned_file_outside_the_roots_is_dropped(self, settings: Settings, tmp_path: Path) -> None:
        """Only a pinned query's file is kept: one read for another reason (a root since removed) goes."""
        path = tmp_path / "old-root" / "s.jsonl"
        long_session(path, turns=2)
        index = SearchIndex(SearchIndex.default_path(settings.state_dir))
        try:
            refresh_memory(index, [tmp_path / "old-root"])
            refresh_memory(index, settings.sessions)
            assert index.conn.execute("SELECT count(*) FROM mem_files").fetchone()[0] == 0
        finally:
            index.close()


class TestLedgerCleaning:
    def test_ledgers_of_session_files_that_are_gone_are_deleted(self, tmp_path: Path) -> None:
        store = tmp_path / "cue-ledgers"
        kept, gone = tmp_path / "kept.jsonl", tmp_path / 'gone "quoted".jsonl'
        for path in (kept, gone):
            Work(path).run("make", "done\n")
            followed = FollowedCues(store, saved_from=0)
            followed.ledger(path)
            followed.follow()  # caught up: saved

        def paths() -> set[str]:
            return {
                ledger_head(p.read_bytes()).path for p in store.glob("*.cues") if p.name != "damaged.cues"
            }

        assert len(list(store.glob("*.cues"))) == 2
        assert paths() == {os.path.realpath(kept), os.path.realpath(gone)}
        gone.unlink()
        (store / "damaged.cues").write_bytes(b"{not json")  # left alone: replaced when its file is read
        assert clean_ledgers(store) == 1
        assert paths() == {os.path.realpath(kept)}
        assert (store / "damaged.cues").exists()
        assert clean_ledgers(tmp_path / "no-such-folder") == 0
