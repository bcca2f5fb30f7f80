"""Raw memory: sources of every message kind, scope along one branch, cursors, recall."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pbot_watch.memory.index import refresh_memory
from pbot_watch.memory.query import UnknownEntry, recall, search_memory
from pbot_watch.search.errors import BadCursor, BadRange, UnknownHandle
from pbot_watch.search.index import SearchIndex
from tests.support.paths import FIXTURES
from tests.support.pi_sessions import PiSession

BIG = "\n".join(f"row {i} of the long listing" for i in range(1, 3001)) + "\n"


@pytest.fixture
def session(tmp_path: Path) -> PiSession:
    """One session: a shared start, an abandoned branch (with a tool result) and the current one."""
    w = PiSession("sess-1", file=tmp_path / "sessions" / "ws" / "s.jsonl")
    w.user("Please check the budget validation", image=True, id="u1")
    start = w.assistant("Looking at it.", thinking="The user wants budget checks; 预算 matters", id="a1")
    w.user("run the tests", id="u2")
    w.assistant(None, calls=[("call-1", "bash", {"command": "npm test"})], id="a2")
    w.tool_result("zebra-output: 3 failed\n预算超出\n", call_id="call-1", name="bash", error=True, id="t1")
    w.assistant("Tests fail on the abandoned branch", id="a3")
    # Back to ``start``: the current branch, written last, so its tip is the default leaf.
    w.user("Instead, read the notes", parent=start, id="u3")
    w.assistant(None, calls=[("call-2", "read", {"path": "notes.txt"})], id="a4")
    w.tool_result(BIG, call_id="call-2", name="read", id="t2")
    w.bash("git status", "nothing to commit\n", id="b1")
    w.assistant("日本語のメモを読みました。東京 서울", id="a5")
    return w


@pytest.fixture
def roots(tmp_path: Path, session: PiSession) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
def index(tmp_path: Path, roots: Path) -> SearchIndex:
    idx = SearchIndex(tmp_path / "state" / "search.db")
    refresh_memory(idx, [roots])
    yield idx
    idx.close()


class TestSources:
    def test_kinds_and_labels(self, index: SearchIndex) -> None:
        """Listing without a query shows every source on the current path, newest first."""
        result = search_memory(index)
        kinds = [h.kind for h in result.hits]
        assert ["assistant", "bash", "tool", "user", "assistant", "thinking", "user"] == kinds
        tool = next(h for h in result.hits if h.kind == "tool")
        assert tool.label.startswith("toolResult read(notes.txt)")
        assert 3001 == tool.total_lines  # the call line plus 3000 result lines

    def test_image_stays_out(self, index: SearchIndex) -> None:
        """An image is one marker line, never its data."""
        user = search_memory(index, "budget validation").hits[0]
        page = recall(index, user.handle)
        assert "[image omitted]" in page.text
        assert "iVBOR" not in page.text

    def test_thinking_is_marked(self, index: SearchIndex) -> None:
        """Thinking is its own source kind, with a thinking section."""
        hit = search_memory(index, "wants budget").hits[0]
        assert "thinking" == hit.kind
        assert hit.section is not None and "thinking" == hit.section.title


class TestScope:
    def test_abandoned_branch_is_out_of_reach(self, index: SearchIndex) -> None:
        """A hit on the abandoned branch is not returned from the current leaf, by any mode."""
        assert 0 == search_memory(index, "zebra").total
        assert 0 == search_memory(index, "zebra", match="terms").total
        assert 0 == search_memory(index, "预算超出").total
        assert all(h.entry_id not in ("t1", "a3", "u2", "a2") for h in search_memory(index).hits)

    def test_leaf_on_the_other_branch_reaches_it(self, index: SearchIndex) -> None:
        """With --leaf on the abandoned branch, its tool call and result are found together."""
        hit = search_memory(index, "zebra", leaf="a3").hits[0]
        assert "tool" == hit.kind
        page = recall(index, hit.handle)
        assert page.text.startswith("bash: npm test\nzebra-output")
        assert ["call", "error"] == [s.title for s in page.sections]
        assert 0 == search_memory(index, "notes", leaf="a3", match="terms").total

    def test_in_handle_outside_scope_is_refused(self, index: SearchIndex) -> None:
        """--in cannot widen the scope: a handle from the other branch is unknown here."""
        handle = search_memory(index, "zebra", leaf="a3").hits[0].handle
        with pytest.raises(UnknownHandle):
            search_memory(index, "zebra", in_=handle)

    def test_unknown_leaf(self, index: SearchIndex) -> None:
        """A leaf that is no entry of the session is an error naming it."""
        with pytest.raises(UnknownEntry, match="nope"):
            search_memory(index, "x", session_id="sess-1", leaf="nope")


class TestSearch:
    def test_literal_hit_line_and_section(self, index: SearchIndex) -> None:
        """A literal hit gives the hit line, whole snippet lines and the section's range."""
        hit = search_memory(index, "ROW 1500 OF").hits[0]
        assert 1501 == hit.line  # line 1 is the call
        assert (1499, 1503) == hit.snippet_lines
        assert hit.section is not None and (2, 3001) == (hit.section.first_line, hit.section.last_line)
        assert "row 1500 of the long listing" in hit.snippet.split("\n")

    def test_cjk_one_and_two_characters(self, index: SearchIndex) -> None:
        """Chinese, Japanese and Korean words of one and two characters are found."""
        for query in ("预算", "预", "東京", "語", "서울", "서"):
            assert search_memory(index, query).total >= 1, query
            assert search_memory(index, query, match="terms").total >= 1, query

    def test_in_handle_lists_every_hit_line(self, index: SearchIndex) -> None:
        """With --in, each matching line of that source is a hit, paged by cursor."""
        tool = next(h for h in search_memory(index).hits if h.kind == "tool")
        first = search_memory(index, "of the long", in_=tool.handle)
        assert 3000 == first.total
        assert [2, 3] == [h.line for h in first.hits[:2]]
        assert first.next_cursor is not None
        second = search_memory(index, "of the long", in_=tool.handle, after=first.next_cursor)
        assert 22 == second.hits[0].line

    def test_cursor_is_stable_across_appends(
        self, index: SearchIndex, session: PiSession, roots: Path
    ) -> None:
        """A cursor keeps the first query's results: sources appended later do not shift pages."""
        first = search_memory(index, "", limit=2)
        session.user("appended later", id="u9")
        refresh_memory(index, [roots])
        second = search_memory(index, "", limit=2, after=first.next_cursor)
        fresh = search_memory(index, "", limit=50)
        assert first.total == second.total
        assert fresh.total == first.total + 1
        assert ["a5", "b1"] == [h.entry_id for h in first.hits]
        assert ["t2", "u3"] == [h.entry_id for h in second.hits]

    def test_cursor_for_another_query_is_refused(self, index: SearchIndex) -> None:
        """A cursor made for another query, or garbage, is a BadCursor."""
        cursor = search_memory(index, "", limit=1).next_cursor
        assert cursor is not None
        with pytest.raises(BadCursor, match="different query"):
            search_memory(index, "budget", after=cursor)
        with pytest.raises(BadCursor):
            search_memory(index, "", after="garbage!")

    def test_terms_ranks(self, index: SearchIndex) -> None:
        """Terms mode finds words in any order and reports a score."""
        hits = search_memory(index, "validation budget", match="terms").hits
        assert hits and hits[0].score is not None
        assert "budget" in hits[0].snippet.lower()

    def test_terms_ranking_kept_until_a_commit(
        self, tmp_path: Path, index: SearchIndex, session: PiSession, roots: Path
    ) -> None:
        """An open index answers a repeated unscoped terms search, and its next page, from the
        ranking it kept, and ranks again once anything is committed (here, by another connection
        and then by its own refresh): every answer equals a fresh connection's.
        """
        db = tmp_path / "state" / "search.db"

        def fresh(after: str | None = None) -> object:
            with SearchIndex(db) as other:
                return search_memory(other, "budget validation", match="terms", limit=1, after=after)

        first = search_memory(index, "budget validation", match="terms", limit=1)
        assert first.total >= 2 and first.next_cursor is not None
        assert first == search_memory(index, "budget validation", match="terms", limit=1) == fresh()
        second = search_memory(index, "budget validation", match="terms", limit=1, after=first.next_cursor)
        assert second == fresh(first.next_cursor) and second.hits != first.hits
        session.user("the budget validation passed", id="u9")
        with SearchIndex(db) as writer:
            refresh_memory(writer, [roots])
        grown = search_memory(index, "budget validation", match="terms", limit=1)
        assert grown.total == first.total + 1 and grown == fresh()
        session.user("budget validation once more", id="u10")
        refresh_memory(index, [roots])
        again = search_memory(index, "budget validation", match="terms", limit=1)
        assert again.total == first.total + 2 and again == fresh()


class TestRecall:
    def test_whole_lines_and_continuation(self, index: SearchIndex) -> None:
        """Recall returns whole lines from a line and says where to continue, to the end."""
        tool = next(h for h in search_memory(index).hits if h.kind == "tool")
        page = recall(index, tool.handle, 2)
        assert page.text.split("\n")[0] == "row 1 of the long listing"
        lines = page.text.split("\n")
        seen = len(lines)
        while page.next_line is not None:
            page = recall(index, tool.handle, page.next_line)
            seen += len(page.text.split("\n"))
        assert 3000 == seen
        assert 3001 == page.to_line

    def test_errors(self, index: SearchIndex) -> None:
        """An unknown handle and a line past the end are clear errors."""
        with pytest.raises(UnknownHandle):
            recall(index, "m1.bm9wZQ")
        with pytest.raises(UnknownHandle):
            recall(index, "not-a-handle")
        hit = search_memory(index).hits[0]
        with pytest.raises(BadRange, match="outside"):
            recall(index, hit.handle, 99)


class TestRealFixture:
    def test_tool_results_come_with_their_calls(self, tmp_path: Path) -> None:
        """In a real Pi file, each tool result is found with the call that produced it."""
        root = tmp_path / "s"
        root.mkdir()
        (root / "02.jsonl").write_bytes((FIXTURES / "real-v3" / "02-tool-calls.jsonl").read_bytes())
        with SearchIndex(tmp_path / "db" / "search.db") as idx:
            refresh_memory(idx, [root])
            hit = next(h for h in search_memory(idx, "line two of notes").hits if h.kind == "tool")
            page = recall(idx, hit.handle)
            assert page.text.startswith('read {"path": "notes.txt"}\nline one of notes')
            assert "line two of notes" in page.text


class TestScopeProperty:
    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(parents=st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=25), data=st.data())
    def test_hits_are_exactly_the_path(
        self, tmp_path_factory: pytest.TempPathFactory, parents: list[int], data: st.DataObject
    ) -> None:
        """On a random tree, a search from any leaf finds every entry on its path and nothing else."""
        base = tmp_path_factory.mktemp("tree")
        w = PiSession("tree", file=base / "s" / "t.jsonl")
        ids: list[str] = []
        for i, p in enumerate(parents):
            parent = ids[p % len(ids)] if ids and p else (ids[-1] if ids else None)
            ids.append(w.user(f"marker word{i}x", parent=parent, id=f"e{i}"))
        leaf = data.draw(st.sampled_from(ids))
        by_id = {}
        with (base / "s" / "t.jsonl").open(encoding="utf-8") as handle:
            for line in handle.read().splitlines()[1:]:
                entry = json.loads(line)
                by_id[entry["id"]] = entry["parentId"]
        path, node = set(), leaf
        while node is not None:
            path.add(node)
            node = by_id[node]
        with SearchIndex(base / "search.db") as idx:
            refresh_memory(idx, [base / "s"])
            found = set()
            cursor = None
            while True:
                page = search_memory(idx, "marker", leaf=leaf, after=cursor, limit=50)
                found |= {h.entry_id for h in page.hits}
                cursor = page.next_cursor
                if cursor is None:
                    break
            assert path == found
            for entry in ids:
                hits = search_memory(idx, f"word{entry[1:]}x", leaf=leaf).total
                assert (1 if entry in path else 0) == hits
