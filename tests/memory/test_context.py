"""Memory search labels each hit historical or retained, and puts historical hits first."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pbot_watch.memory.index import refresh_memory
from pbot_watch.memory.query import search_memory
from pbot_watch.search.index import SearchIndex
from tests.support.pi_sessions import PiSession


def budget_session(path: Path) -> PiSession:
    """Four budget runs; a compaction keeps the last two (from u3 on) in the model's context."""
    w = PiSession("sess-c", file=path)
    for n in range(1, 5):
        w.user(f"check the budget, round {n}", id=f"u{n}")
        w.assistant(f"budget round {n} looks fine", id=f"a{n}")
        if n == 4:
            break
        if n == 2:
            w.compaction("u1", id="c0")  # an earlier compaction that kept everything
    return w


@pytest.fixture
def index(tmp_path: Path) -> Iterator[SearchIndex]:
    idx = SearchIndex(tmp_path / "search.db")
    yield idx
    idx.close()


def search(index: SearchIndex, root: Path, query: str, **options: object) -> list[tuple[str, str]]:
    refresh_memory(index, [root])
    return [(h.entry_id, h.context) for h in search_memory(index, query, **options).hits]  # type: ignore[arg-type]


class TestContextOrder:
    def test_historical_hits_come_first(self, tmp_path: Path, index: SearchIndex) -> None:
        """Hits that left the context at the latest compaction come before retained ones, each newest first."""
        w = budget_session(tmp_path / "s" / "s.jsonl")
        w.compaction("u3", id="c1")
        w.user("one more budget question", id="u5")
        hits = search(index, tmp_path / "s", "budget")
        assert [
            ("a2", "historical"),
            ("u2", "historical"),
            ("a1", "historical"),
            ("u1", "historical"),
            ("u5", "retained"),
            ("a4", "retained"),
            ("u4", "retained"),
            ("a3", "retained"),
            ("u3", "retained"),
        ] == hits

    def test_terms_mode_groups_too(self, tmp_path: Path, index: SearchIndex) -> None:
        """In terms mode the groups keep BM25 order inside them, historical first."""
        w = budget_session(tmp_path / "s" / "s.jsonl")
        w.compaction("u3", id="c1")
        contexts = [c for _e, c in search(index, tmp_path / "s", "budget round", match="terms")]
        assert ["historical"] * 4 + ["retained"] * 4 == contexts

    def test_without_compaction_everything_is_retained(self, tmp_path: Path, index: SearchIndex) -> None:
        """A branch that was never compacted, or whose compaction kept everything, is all retained."""
        budget_session(tmp_path / "s" / "s.jsonl")
        assert {"retained"} == {c for _e, c in search(index, tmp_path / "s", "budget")}

    def test_kept_entry_off_the_branch_keeps_nothing(self, tmp_path: Path, index: SearchIndex) -> None:
        """A compaction whose kept entry is not on the branch left everything before it, as in Pi."""
        w = budget_session(tmp_path / "s" / "s.jsonl")
        w.compaction("not-an-entry", id="c1")
        w.user("one more budget question", id="u5")
        hits = search(index, tmp_path / "s", "budget")
        assert ("u5", "retained") == hits[-1]
        assert {"historical"} == {c for _e, c in hits[:-1]}

    def test_a_compaction_on_another_branch_does_not_count(self, tmp_path: Path, index: SearchIndex) -> None:
        """Compacting an abandoned branch labels nothing on the current one."""
        w = budget_session(tmp_path / "s" / "s.jsonl")
        w.compaction("u3", id="c1")
        w.user("back to the budget, other branch", parent="a2", id="u9")
        hits = search(index, tmp_path / "s", "budget")
        assert {"retained"} == {c for _e, c in hits}
        assert "u9" == hits[0][0]

    def test_listing_is_labelled_not_regrouped(self, tmp_path: Path, index: SearchIndex) -> None:
        """Without a query, sources stay newest first, each with its label."""
        w = budget_session(tmp_path / "s" / "s.jsonl")
        w.compaction("u3", id="c1")
        hits = search(index, tmp_path / "s", "")
        assert ["c1", "a4", "u4", "a3", "u3", "c0"] == [e for e, _c in hits[:6]]
        assert ["retained"] * 5 + ["historical"] == [c for _e, c in hits[:6]]

    def test_cursor_keeps_the_first_pages_order(self, tmp_path: Path, index: SearchIndex) -> None:
        """A compaction written between two pages does not relabel or reorder the next page."""
        w = budget_session(tmp_path / "s" / "s.jsonl")
        refresh_memory(index, [tmp_path / "s"])
        whole = [(h.entry_id, h.context) for h in search_memory(index, "budget", limit=50).hits]
        first = search_memory(index, "budget", limit=3)
        w.compaction("u3", id="c1")
        refresh_memory(index, [tmp_path / "s"])
        second = search_memory(index, "budget", limit=50, after=first.next_cursor)
        paged = [(h.entry_id, h.context) for h in (*first.hits, *second.hits)]
        assert whole == paged
        fresh = search_memory(index, "budget", limit=50).hits
        assert "historical" == fresh[0].context
