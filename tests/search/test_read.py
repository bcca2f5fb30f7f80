"""read: pbot's text paging in UTF-16 units, surrogate pairs, parents, children pages, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from pbot_watch.search.errors import BadRange, QueryError, UnknownNode
from pbot_watch.search.index import RecordFolder, SearchIndex
from pbot_watch.search.queries import page_text, read_node
from tests.search.archive import exchange, write_record


class TestPageText:
    TEXT = "ab\U0001f600cd"  # UTF-16: a b D83D DE00 c d

    def test_offset_on_low_surrogate_steps_back(self) -> None:
        """An offset inside a pair starts at the pair."""
        assert ("\U0001f600cd", 6, None) == page_text(self.TEXT, 3, 100)

    def test_end_inside_pair_steps_back(self) -> None:
        """A page that would end inside a pair ends before it."""
        assert ("ab", 6, 2) == page_text(self.TEXT, 0, 3)

    def test_one_unit_page_on_pair_takes_the_pair(self) -> None:
        """A one-unit page starting at a pair takes the whole pair (pbot's end += 1)."""
        assert ("\U0001f600", 6, 4) == page_text(self.TEXT, 2, 1)

    def test_offset_at_end_is_empty(self) -> None:
        """Reading at the very end gives an empty page, not an error."""
        assert ("", 6, None) == page_text(self.TEXT, 6, 10)

    def test_offset_past_end_is_an_error(self) -> None:
        """An offset past the end is a BadRange that names the length."""
        with pytest.raises(BadRange, match="past the end"):
            page_text(self.TEXT, 7, 10)

    def test_pages_concatenate_to_the_text(self) -> None:
        """Following nextOffset with any limit reads the whole text, no pair split."""
        text = "x😀" * 50 + "終わり😀"
        for limit in (1, 2, 3, 7):
            out, offset = [], 0
            while True:
                piece, _, nxt = page_text(text, offset, limit)
                out.append(piece)
                if nxt is None:
                    break
                offset = nxt
            assert text == "".join(out)


@pytest.fixture
def index(tmp_path: Path) -> SearchIndex:
    folder = tmp_path / "archive"
    long_text = "用户：\n" + "😀" * 7000 + "\n\n助手：\nend"
    branch = [
        exchange(
            f"e{i}", long_text if i == 0 else f"用户：\nq{i}\n\n助手：\na{i}", f"2026-11-01T00:{i:02d}:00Z"
        )
        for i in range(90)
    ]
    write_record(folder, "s1", "Long", [branch], summaries={1: "level one"})
    forks = [
        [exchange(f"f{i}", f"用户：\nfork {i}\n\n助手：\nok", f"2026-11-02T00:{i:02d}:00Z")]
        for i in range(45)
    ]
    write_record(folder, "s2", "Forks", forks)
    idx = SearchIndex(tmp_path / "search.db")
    idx.update_from_archive([RecordFolder(folder, None)])
    yield idx
    idx.close()


def node_id(index: SearchIndex, kind: str, entry: str | None = None) -> str:
    sql = "SELECT id FROM nodes WHERE kind = ?" + (" AND id LIKE ?" if entry else "") + " ORDER BY id"
    return index.conn.execute(sql, (kind, f"%:{entry}") if entry else (kind,)).fetchone()[0]


class TestReadNode:
    def test_default_page_and_continuation(self, index: SearchIndex) -> None:
        """12,000 units by default; nextOffset continues; no pair is split."""
        first = read_node(index, node_id(index, "exchange", "e0"))
        assert 12000 == len(first.text.encode("utf-16-le")) // 2
        assert 14013 == first.total_length
        second = read_node(index, first.id, offset=first.next_offset or 0)
        assert second.next_offset is None
        assert first.text + second.text == "用户：\n" + "😀" * 7000 + "\n\n助手：\nend"

    def test_parents_children_and_source(self, index: SearchIndex) -> None:
        """A summary lists its parent and its four children with previews; the source names entries."""
        summary = node_id(index, "summary")
        page = read_node(index, summary)
        assert 4 == len(page.children)
        assert all(child.kind == "exchange" and child.preview for child in page.children)
        assert "s1" == page.source.session_id
        assert 2 == len(page.source.entry_ids)
        assert page.parents and page.parents[0].kind in ("session", "summary")

    def test_children_paged_by_twenty(self, index: SearchIndex) -> None:
        """The session node's children come 20 at a time with nextChildrenOffset."""
        session = index.conn.execute("SELECT id FROM records WHERE name = 'Forks'").fetchone()[0]
        first = read_node(index, session)
        assert 20 == len(first.children)
        assert 20 == first.next_children_offset
        pages = [first]
        while pages[-1].next_children_offset is not None:
            pages.append(read_node(index, session, children_offset=pages[-1].next_children_offset))
        ids = [c.id for p in pages for c in p.children]
        assert 45 == len(ids) == len(set(ids))
        assert 3 == len(pages)

    def test_preview_is_collapsed_and_short(self, index: SearchIndex) -> None:
        """Previews are 100 UTF-16 units with whitespace runs collapsed."""
        page = read_node(index, node_id(index, "summary"))
        for child in page.children:
            assert "\n" not in child.preview
            assert len(child.preview.encode("utf-16-le", "surrogatepass")) // 2 <= 100

    def test_unknown_node(self, index: SearchIndex) -> None:
        """An unknown id is UnknownNode with a message saying to search again."""
        with pytest.raises(UnknownNode, match="search again"):
            read_node(index, "nope")

    def test_bad_limits(self, index: SearchIndex) -> None:
        """limit is 1..24000; offsets are not negative; an offset past the end is BadRange."""
        exchange_id = node_id(index, "exchange", "e5")
        with pytest.raises(QueryError, match="between 1 and 24000"):
            read_node(index, exchange_id, limit=24001)
        with pytest.raises(QueryError):
            read_node(index, exchange_id, children_offset=-1)
        with pytest.raises(BadRange, match="past the end"):
            read_node(index, exchange_id, offset=10_000)
