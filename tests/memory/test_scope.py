"""A pinned scope: the caller's session branch, which the search and recall arguments only narrow."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pbot_watch.memory.index import refresh_memory
from pbot_watch.memory.query import MemoryScope, UnknownEntry, recall, search_memory
from pbot_watch.search.errors import BadCursor, NotReady, QueryError, UnknownHandle
from pbot_watch.search.index import SearchIndex
from tests.support.pi_sessions import PiSession


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """sess-1: a shared start, an abandoned branch (a zebra tool result) and the current branch;
    sess-2: another session that mentions both the budget and the zebra."""
    root = tmp_path / "sessions"
    w = PiSession("sess-1", file=root / "ws" / "one.jsonl")
    w.user("Please check the budget validation", id="u1")
    start = w.assistant("Looking at the budget.", id="a1")
    w.user("run the tests", id="u2")
    w.assistant(None, calls=[("call-1", "bash", {"command": "npm test"})], id="a2")
    w.tool_result("zebra-output: 3 failed\n", call_id="call-1", name="bash", error=True, id="t1")
    w.assistant("Tests fail on the abandoned branch", id="a3")
    w.user("Instead, read the budget notes", parent=start, id="u3")
    w.assistant("The budget notes say 40 per day.", id="a4")
    other = PiSession("sess-2", file=root / "ws" / "two.jsonl")
    other.user("the budget of the zebra project", id="v1")
    other.assistant("Zebra's budget is fine.", id="v2")
    return root


@pytest.fixture
def index(tmp_path: Path, root: Path) -> Iterator[SearchIndex]:
    idx = SearchIndex(tmp_path / "state" / "search.db")
    refresh_memory(idx, [root])
    yield idx
    idx.close()


def current(root: Path) -> MemoryScope:
    """sess-1's current branch, pinned by its file."""
    return MemoryScope(session_file=root / "ws" / "one.jsonl")


def entries(index: SearchIndex, query: str, **options: object) -> list[str]:
    return [h.entry_id for h in search_memory(index, query, **options).hits]  # type: ignore[arg-type]


class TestPinnedSearch:
    def test_sees_only_the_pinned_branch(self, index: SearchIndex, root: Path) -> None:
        """Pinned to sess-1's current branch, neither sess-2 nor the abandoned branch is searched."""
        assert {"v2", "v1", "a4", "u3", "a1", "u1"} == set(entries(index, "budget"))
        assert ["a4", "u3", "a1", "u1"] == entries(index, "budget", pinned=current(root))
        assert [] == entries(index, "zebra", pinned=current(root))
        assert ["sess-1"] == search_memory(index, "budget", pinned=current(root)).scope

    def test_pinned_by_session_id(self, index: SearchIndex) -> None:
        """A session id pins the same branch as its file."""
        assert ["a4", "u3", "a1", "u1"] == entries(index, "budget", pinned=MemoryScope(session_id="sess-1"))

    def test_pinned_leaf_picks_the_branch(self, index: SearchIndex, root: Path) -> None:
        """A pinned leaf on the abandoned branch searches that branch, and only it."""
        pinned = MemoryScope(session_file=root / "ws" / "one.jsonl", leaf="a3")
        assert ["t1"] == entries(index, "zebra", pinned=pinned)
        assert ["a1", "u1"] == entries(index, "budget", pinned=pinned)

    def test_another_session_id_is_refused(self, index: SearchIndex, root: Path) -> None:
        """sessionId cannot reach another session; naming the pinned one changes nothing."""
        with pytest.raises(QueryError, match="sees only the current session"):
            search_memory(index, "zebra", session_id="sess-2", pinned=current(root))
        assert ["a4", "u3", "a1", "u1"] == entries(index, "budget", session_id="sess-1", pinned=current(root))

    def test_leaf_argument_only_narrows(self, index: SearchIndex, root: Path) -> None:
        """A leaf on the pinned branch narrows it; a leaf on the abandoned branch is unknown."""
        assert ["a1", "u1"] == entries(index, "budget", leaf="a1", pinned=current(root))
        with pytest.raises(UnknownEntry, match="unknown leaf entry 'a3' on this session's branch"):
            search_memory(index, "zebra", leaf="a3", pinned=current(root))

    def test_in_handle_from_elsewhere_is_unknown(self, index: SearchIndex, root: Path) -> None:
        """in= cannot open a source of another session or of the abandoned branch."""
        for handle in (
            search_memory(index, "zebra's").hits[0].handle,
            search_memory(index, "zebra", leaf="a3").hits[0].handle,
        ):
            with pytest.raises(UnknownHandle):
                search_memory(index, "zebra", in_=handle, pinned=current(root))

    def test_session_not_indexed_yet_has_nothing(self, index: SearchIndex, root: Path) -> None:
        """A pinned session without a session file yet (Pi writes it late) is searched and empty."""
        pinned = MemoryScope(session_file=root / "ws" / "three.jsonl", leaf="x1")
        result = search_memory(index, "budget", pinned=pinned)
        assert (0, []) == (result.total, result.scope)

    def test_pinned_leaf_not_indexed_yet_is_not_ready(self, index: SearchIndex, root: Path) -> None:
        """A pinned leaf the indexed file does not hold yet is "not ready", not "no match"."""
        pinned = MemoryScope(session_file=root / "ws" / "one.jsonl", leaf="a9")
        with pytest.raises(NotReady, match="'a9'"):
            search_memory(index, "budget", pinned=pinned)

    def test_cursor_belongs_to_its_scope(self, index: SearchIndex, root: Path) -> None:
        """A cursor made in the pinned scope continues there, and nowhere else."""
        first = search_memory(index, "budget", limit=2, pinned=current(root))
        assert first.next_cursor is not None
        second = search_memory(index, "budget", limit=2, after=first.next_cursor, pinned=current(root))
        assert ["a1", "u1"] == [h.entry_id for h in second.hits]
        with pytest.raises(BadCursor):
            search_memory(index, "budget", limit=2, after=first.next_cursor)
        unpinned = search_memory(index, "budget", limit=2)
        assert unpinned.next_cursor is not None
        with pytest.raises(BadCursor):
            search_memory(index, "budget", limit=2, after=unpinned.next_cursor, pinned=current(root))

    def test_a_scope_names_a_session(self) -> None:
        """A scope with neither a session file nor a session id is a programming error."""
        with pytest.raises(ValueError, match="names a session file or a session id"):
            MemoryScope(leaf="a1")


class TestPinnedRecall:
    def test_recalls_a_source_on_the_branch(self, index: SearchIndex, root: Path) -> None:
        """A handle found in the pinned scope recalls as usual."""
        hit = search_memory(index, "40 per day", pinned=current(root)).hits[0]
        assert "The budget notes say 40 per day." in recall(index, hit.handle, pinned=current(root)).text

    def test_handle_from_elsewhere_is_unknown(self, index: SearchIndex, root: Path) -> None:
        """Recall of another session's or the abandoned branch's source is "unknown handle"."""
        for handle in (
            search_memory(index, "zebra's").hits[0].handle,
            search_memory(index, "zebra", leaf="a3").hits[0].handle,
        ):
            assert recall(index, handle).text  # known to the unpinned index
            with pytest.raises(UnknownHandle):
                recall(index, handle, pinned=current(root))
