"""The tool registry: one call validates, runs and renders, and says whose a failure is."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pbot_watch.config import Settings
from pbot_watch.memory.query import MemoryScope
from pbot_watch.search.index import SearchIndex
from pbot_watch.tools.registry import TOOLS, Failure, call
from pbot_watch.tools.text import MEMORY_NOTE
from tests.support.pi_sessions import PiSession


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """One session with a failing test run, and an empty state folder for the index."""
    root = tmp_path / "sessions"
    w = PiSession("sess-1", file=root / "ws" / "s.jsonl")
    w.user("run the budget tests", id="u1")
    w.assistant(None, calls=[("call-1", "bash", {"command": "npm test"})], id="a1")
    w.tool_result(
        "PASS unit\n3 failed: budget over limit\n", call_id="call-1", name="bash", error=True, id="t1"
    )
    w.assistant("Three budget tests fail.", id="a2")
    return Settings(sessions=[root], archive=tmp_path / "archive", state_dir=tmp_path / "state")


class TestTools:
    def test_names(self) -> None:
        """The registry holds pbot's history tools and pi-echo's memory tools, in that order."""
        assert ["history_search", "history_read", "search_memory", "recall_memory"] == [t.name for t in TOOLS]

    def test_schemas_forbid_unknown_arguments(self) -> None:
        """Every input schema is a closed JSON object a native tool can be registered with."""
        for tool in TOOLS:
            schema = tool.input_schema()
            assert "object" == schema["type"], tool.name
            assert schema["additionalProperties"] is False, tool.name


class TestCall:
    def test_result_has_text_and_structure(self, settings: Settings) -> None:
        """A successful call gives the model's text and the --json shape, and no failure."""
        answer = call("search_memory", {"query": "budget over limit"}, settings)
        assert answer.failure is None
        assert answer.text.startswith(MEMORY_NOTE)
        assert answer.structured is not None
        assert 1 == answer.structured["total"]
        assert answer.structured["hits"][0]["handle"] in answer.text

    def test_no_match_is_a_result(self, settings: Settings) -> None:
        """A query that finds nothing is an answer that says so, not a failure."""
        answer = call("search_memory", {"query": "zebra-unicorn"}, settings)
        assert answer.failure is None
        assert answer.structured is not None
        assert 0 == answer.structured["total"]
        assert "No sources matching 'zebra-unicorn'" in answer.text

    def test_invalid_arguments_are_the_callers_to_fix(self, settings: Settings) -> None:
        """Arguments that do not validate are refused with what to change."""
        answer = call("search_memory", {"qurey": "budget", "limit": 0}, settings)
        assert Failure.ARGUMENTS == answer.failure
        assert answer.structured is None
        assert "qurey: unknown argument; did you mean query?" in answer.text
        assert "limit: must be at least 1 (got 0)" in answer.text

    def test_query_errors_are_the_callers_to_fix(self, settings: Settings) -> None:
        """A query the index cannot answer as asked (an unknown handle) is an arguments failure."""
        answer = call("recall_memory", {"handle": "m1.bm9uZQ"}, settings)
        assert Failure.ARGUMENTS == answer.failure
        assert "unknown memory handle 'm1.bm9uZQ'" in answer.text

    def test_unknown_tool_is_the_callers_to_fix(self, settings: Settings) -> None:
        """A tool name that does not exist lists the real ones."""
        answer = call("pbot_history", {}, settings)
        assert Failure.ARGUMENTS == answer.failure
        assert "Unknown tool 'pbot_history'; this server has history_search" in answer.text

    def test_arguments_must_be_an_object(self, settings: Settings) -> None:
        """Arguments that are not a JSON object are refused, not a crash."""
        answer = call("search_memory", ["budget"], settings)
        assert Failure.ARGUMENTS == answer.failure
        assert "arguments must be a JSON object" in answer.text

    def test_missing_arguments_mean_none_given(self, settings: Settings) -> None:
        """No arguments at all is the same as an empty object: here, a listing of sources."""
        answer = call("search_memory", None, settings)
        assert answer.failure is None
        assert answer.structured is not None
        assert answer.structured["total"] > 0


class TestScope:
    @pytest.fixture
    def scope(self, settings: Settings) -> MemoryScope:
        """sess-1 pinned by its file; sess-2 beside it also ran the budget tests."""
        other = PiSession("sess-2", file=settings.sessions[0] / "ws" / "other.jsonl")
        other.user("3 failed: budget over limit, in the other session", id="v1")
        return MemoryScope(session_file=settings.sessions[0] / "ws" / "s.jsonl")

    def test_memory_search_sees_only_the_pinned_session(self, settings: Settings, scope: MemoryScope) -> None:
        """With a scope, search_memory searches that session; without, every session."""
        pinned = call("search_memory", {"query": "budget over limit"}, settings, scope).structured
        everywhere = call("search_memory", {"query": "budget over limit"}, settings).structured
        assert pinned is not None and everywhere is not None
        assert (["sess-1"], 1) == (pinned["scope"], pinned["total"])
        assert (["sess-1", "sess-2"], 2) == (sorted(everywhere["scope"]), everywhere["total"])

    def test_arguments_cannot_widen_it(self, settings: Settings, scope: MemoryScope) -> None:
        """sessionId naming another session is the caller's to fix, in the model's words."""
        answer = call("search_memory", {"query": "budget", "sessionId": "sess-2"}, settings, scope)
        assert Failure.ARGUMENTS == answer.failure
        assert (
            "search_memory: unknown session 'sess-2': this memory search sees only the current session"
            == (answer.text)
        )

    def test_recall_outside_it_is_an_unknown_handle(self, settings: Settings, scope: MemoryScope) -> None:
        """A handle of another session's source does not recall inside the scope."""
        found = call("search_memory", {"query": "in the other session"}, settings).structured
        assert found is not None
        handle = found["hits"][0]["handle"]
        assert call("recall_memory", {"handle": handle}, settings).failure is None
        answer = call("recall_memory", {"handle": handle}, settings, scope)
        assert Failure.ARGUMENTS == answer.failure
        assert f"unknown memory handle {handle!r}" in answer.text

    def test_leaf_not_written_yet_is_temporary(self, settings: Settings, scope: MemoryScope) -> None:
        """A pinned leaf the session file does not hold yet is "temporarily unavailable", not "no match"."""
        ahead = MemoryScope(session_file=scope.session_file, leaf="not-written-yet")
        answer = call("search_memory", {"query": "budget"}, settings, ahead)
        assert Failure.UNAVAILABLE == answer.failure
        assert answer.text.startswith("search_memory is temporarily unavailable (NotReady: ")

    def test_only_the_pinned_file_is_read(self, settings: Settings, scope: MemoryScope) -> None:
        """A pinned call indexes its own session file, not every session under the roots."""
        call("search_memory", {"query": "budget"}, settings, scope)
        with SearchIndex(SearchIndex.default_path(settings.state_dir)) as index:
            indexed = [path for (path,) in index.conn.execute("SELECT path FROM mem_files")]
        assert [str(scope.session_file)] == indexed

    def test_history_tools_ignore_it(self, settings: Settings, scope: MemoryScope) -> None:
        """The history tools search the whole archive, scope or not."""
        answer = call("history_search", {"query": "budget"}, settings, scope)
        assert answer.failure is None


class TestUnavailable:
    def test_unopenable_index_is_temporary(self, settings: Settings, tmp_path: Path) -> None:
        """An index that cannot be opened (its folder is a file) is "temporarily unavailable"."""
        blocker = tmp_path / "not-a-folder"
        blocker.write_text("")
        settings.state_dir = blocker
        answer = call("search_memory", {"query": "budget"}, settings)
        assert Failure.UNAVAILABLE == answer.failure
        assert answer.structured is None
        assert answer.text.startswith("search_memory is temporarily unavailable (")
        assert "not a problem with your arguments" in answer.text

    @pytest.mark.slow
    def test_locked_database_is_temporary(self, settings: Settings) -> None:
        """A refresh that waits past the busy timeout for another writer is "temporarily unavailable"."""
        assert call("search_memory", {}, settings).failure is None  # the index exists and is current
        session = settings.sessions[0] / "ws" / "s.jsonl"
        later = PiSession("sess-2", file=session.with_name("later.jsonl"))
        later.user("a new session the next call must index", id="u1")
        with _writing(SearchIndex.default_path(settings.state_dir)):
            answer = call("search_memory", {"query": "budget"}, settings)
        assert Failure.UNAVAILABLE == answer.failure
        assert "database is locked" in answer.text
        assert call("search_memory", {"query": "budget"}, settings).failure is None


@contextmanager
def _writing(path: Path) -> Iterator[None]:
    """Another writer's transaction on the database (as the service's), held until the block ends."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()
