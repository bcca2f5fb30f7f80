"""search over the archive index: pbot's literal semantics exactly, terms by BM25, CJK, ranges, paging."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pbot_watch.search.errors import BadRange, QueryError
from pbot_watch.search.index import RecordFolder, SearchIndex
from pbot_watch.search.queries import search_history
from tests.search.archive import exchange, load_records, pbot_search, write_record

TEXTS = [
    "用户：\n我们明天去北京开会\n\n助手：\n好的，我会准备资料。",
    "用户：\n今日は東京で会議です\n\n助手：\nわかりました。",
    "用户：\n내일 서울에서 회의가 있습니다\n\n助手：\n알겠습니다.",
    "用户：\nFix the Budget validation overflow in parseHTTPResponse\n\n助手：\nDone: budget_limit is checked.",
    "用户：\nRun npm test please\n\n助手：\n3 tests failed: budget over limit",
    "用户：\nWhat is 1+1?\n\n助手：\n2",
    "用户：\nEmoji 😀 text with surrogate pairs 😀😀\n\n助手：\nok 😀",
    "用户：\nΣΊΣΥΦΟΣ and ÇA VA\n\n助手：\nnoted",
]


def build(folder: Path) -> list[dict[str, Any]]:
    """Three sessions over three days; the first has 9 exchanges (two level-1 summaries, one ready)."""
    first = [
        exchange(f"a{i}", TEXTS[i % len(TEXTS)], f"2026-11-0{1 + i // 5}T1{i % 10}:00:00.000Z")
        for i in range(9)
    ]
    write_record(folder, "session-a", "Alpha", [first], summaries={1: "Summary about 北京 and budget"})
    second = [exchange(f"b{i}", TEXTS[(i + 3) % len(TEXTS)], f"2026-11-05T0{i}:00:00.000Z") for i in range(5)]
    write_record(folder, "session-b", "Beta", [second])
    broken = [exchange("c0", "用户：\nno timestamp here\n\n助手：\nok", "")]
    write_record(folder, "session-c", "Gamma", [broken])
    return load_records(folder)


@pytest.fixture
def archive(tmp_path: Path) -> tuple[SearchIndex, list[dict[str, Any]], Path]:
    folder = tmp_path / "archive"
    records = build(folder)
    index = SearchIndex(tmp_path / "state" / "search.db")
    index.update_from_archive([RecordFolder(folder, None)])
    yield index, records, folder
    index.close()


def plain(result: Any) -> dict[str, Any]:
    """Our result reduced to pbot's fields."""
    keep = (
        "id",
        "kind",
        "sessionId",
        "name",
        "preview",
        "from",
        "to",
        "ready",
        "completed",
        "parents",
        "snippet",
    )
    data = result.model_dump(by_alias=True)
    return {
        "matches": [{k: m[k] for k in keep} for m in data["matches"]],
        "total": data["total"],
        "nextOffset": data["nextOffset"],
    }


class TestLiteralIsPbot:
    @pytest.mark.parametrize(
        "query",
        [
            "budget",
            "BUDGET",
            "  budget  ",
            "北京",
            "京",
            "東京",
            "は",
            "서울",
            "회",
            "😀",
            "1",
            "+1",
            "?",
            "a",
            "σίσυφος",
            "ça",
            "用户",
            "summary",
        ],
    )
    def test_same_answer_as_pbot(
        self, archive: tuple[SearchIndex, list[dict[str, Any]], Path], query: str
    ) -> None:
        """Each query (CJK of one and two characters, short latin, emoji, case) gives pbot's answer."""
        index, records, _ = archive
        expected = pbot_search(records, query, limit=50)
        assert expected["total"] > 0
        assert expected == plain(search_history(index, query, limit=50))

    def test_no_query_lists_sessions_with_dates(
        self, archive: tuple[SearchIndex, list[dict[str, Any]], Path]
    ) -> None:
        """No query lists session nodes newest first; a session with no date is left out, as in pbot."""
        index, records, _ = archive
        result = search_history(index)
        assert ["Beta", "Alpha"] == [m.name for m in result.matches]
        assert pbot_search(records) == plain(result)

    def test_ranges_intersect(self, archive: tuple[SearchIndex, list[dict[str, Any]], Path]) -> None:
        """from/to keep nodes whose span intersects the range (the summaries spanning it too)."""
        index, records, _ = archive
        for from_, to in [
            ("2026-11-02", "2026-11-02T23:59:59Z"),
            ("2026-11-01T12:00:00Z", None),
            (None, "2026-11-01T11:30:00Z"),
        ]:
            expected = pbot_search(records, "用户", from_=from_, to=to, limit=50)
            assert expected == plain(search_history(index, "用户", from_=from_, to=to, limit=50))
        kinds = {
            m.kind
            for m in search_history(index, "summary", from_="2026-11-01", to="2026-11-01T23:00:00Z").matches
        }
        assert {"summary"} == kinds

    def test_paging(self, archive: tuple[SearchIndex, list[dict[str, Any]], Path]) -> None:
        """offset/limit page through the same order; nextOffset is null on the last page."""
        index, records, _ = archive
        seen = []
        offset: int | None = 0
        while offset is not None:
            page = search_history(index, "用户", offset=offset, limit=3)
            assert pbot_search(records, "用户", offset=offset, limit=3) == plain(page)
            seen.extend(m.id for m in page.matches)
            offset = page.next_offset
        assert len(seen) == len(set(seen)) == page.total

    def test_session_filter(self, archive: tuple[SearchIndex, list[dict[str, Any]], Path]) -> None:
        """--session keeps one session's nodes."""
        index, records, _ = archive
        result = search_history(index, "用户", session_id="session-b", limit=50)
        assert {"session-b"} == {m.session_id for m in result.matches}
        assert pbot_search(records, "用户", session_id="session-b", limit=50) == plain(result)

    @pytest.mark.parametrize(
        ("from_", "to"), [("yesterday", None), (None, "2026-13-01"), ("", None), ("2026-11-05", "2026-11-01")]
    )
    def test_bad_ranges(
        self, archive: tuple[SearchIndex, list[dict[str, Any]], Path], from_: str | None, to: str | None
    ) -> None:
        """Unparseable or inverted ranges are errors that say what to use."""
        index, _, _ = archive
        with pytest.raises(BadRange, match="time"):
            search_history(index, "x", from_=from_, to=to)

    def test_limit_bounds(self, archive: tuple[SearchIndex, list[dict[str, Any]], Path]) -> None:
        """limit is 1..50 as in pbot's tool; offset is not negative."""
        index, _, _ = archive
        with pytest.raises(QueryError, match="between 1 and 50"):
            search_history(index, "x", limit=51)
        with pytest.raises(QueryError, match="offset"):
            search_history(index, "x", offset=-1)

    def test_unready_summary_is_not_searched(
        self, archive: tuple[SearchIndex, list[dict[str, Any]], Path]
    ) -> None:
        """Only ready summaries are searched; the result says level and kind and points down."""
        index, _records, _ = archive
        hits = search_history(index, "Summary about", limit=50).matches
        assert 1 == len(hits)
        hit = hits[0]
        assert ("summary", 1) == (hit.kind, hit.level)
        assert 4 == len(hit.children) == len(hit.exchanges)
        assert all(":0:" in e for e in hit.exchanges)


class TestTerms:
    def test_ranks_by_bm25(self, archive: tuple[SearchIndex, list[dict[str, Any]], Path]) -> None:
        """Terms mode finds words in any order and ranks the better match first."""
        index, _, _ = archive
        result = search_history(index, "overflow budget validation", match="terms", limit=50)
        assert result.matches
        assert "overflow" in result.matches[0].snippet
        scores = [m.score for m in result.matches]
        assert scores == sorted(scores, reverse=True)

    def test_identifier_part_and_cjk(self, archive: tuple[SearchIndex, list[dict[str, Any]], Path]) -> None:
        """An identifier part and a two-character CJK word are found."""
        index, _, _ = archive
        assert search_history(index, "http response", match="terms").total > 0
        assert search_history(index, "北京", match="terms").total > 0
        assert search_history(index, "서울", match="terms").total > 0

    def test_punctuation_only_finds_nothing(
        self, archive: tuple[SearchIndex, list[dict[str, Any]], Path]
    ) -> None:
        """A terms query without words has no hits (and no error)."""
        index, _, _ = archive
        assert 0 == search_history(index, "?!", match="terms").total


class TestFreshness:
    def test_rebuild_gives_the_same_results(
        self, archive: tuple[SearchIndex, list[dict[str, Any]], Path], tmp_path: Path
    ) -> None:
        """An index rebuilt from the archive alone answers exactly as the incrementally kept one."""
        index, _, folder = archive
        queries = ["budget", "京", "😀", "", "review"]
        before = [search_history(index, q, limit=50) for q in queries]
        fresh = SearchIndex(tmp_path / "other" / "search.db")
        fresh.rebuild([RecordFolder(folder, None)])
        assert before == [search_history(fresh, q, limit=50) for q in queries]
        fresh.close()

    def test_changed_and_removed_records(
        self, archive: tuple[SearchIndex, list[dict[str, Any]], Path]
    ) -> None:
        """A rewritten record replaces its nodes; a deleted one disappears; nothing else is re-read."""
        index, _, folder = archive
        write_record(
            folder,
            "session-b",
            "Beta",
            [[exchange("b0", "用户：\nbrand new words\n\n助手：\nyes", "2026-11-06T00:00:00Z")]],
        )
        report = index.update_from_archive([RecordFolder(folder, None)])
        assert 1 == report.records_updated
        assert 1 == search_history(index, "brand new").total
        assert 0 == search_history(index, "budget", session_id="session-b").total
        for path in folder.glob("*.json"):
            if '"session-b"' in path.read_text():
                path.unlink()
        index.update_from_archive([RecordFolder(folder, None)])
        assert 0 == search_history(index, "brand new").total
        assert 0 == index.update_from_archive([RecordFolder(folder, None)]).records_updated

    def test_torn_record_keeps_the_old_content(
        self, archive: tuple[SearchIndex, list[dict[str, Any]], Path]
    ) -> None:
        """A record file that is not valid JSON does not wipe what was indexed from it."""
        index, _, folder = archive
        total = search_history(index, "用户").total
        path = next(folder.glob("*.json"))
        path.write_text('{"id": "torn', encoding="utf-8")
        index.update_from_archive([RecordFolder(folder, None)])
        assert total == search_history(index, "用户").total

    def test_schema_version_mismatch_rebuilds(self, tmp_path: Path) -> None:
        """A database of another version (or not a database) is replaced, not migrated."""
        path = tmp_path / "search.db"
        path.write_bytes(b"not a database at all")
        with SearchIndex(path) as index:
            assert 0 == index.counts()["records"]


ALPHABET = "abcAB 北京東京서울😀ΣσςİiÇç.+\n"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    texts=st.lists(st.text(alphabet=ALPHABET, min_size=0, max_size=30), min_size=1, max_size=9),
    query=st.text(alphabet=ALPHABET, min_size=0, max_size=4),
)
@pytest.mark.slow
def test_literal_matches_pbot_on_random_archives(
    tmp_path_factory: pytest.TempPathFactory, texts: list[str], query: str
) -> None:
    """For random texts and queries (CJK, surrogate pairs, case folding), literal search is pbot's."""
    base = tmp_path_factory.mktemp("prop")
    folder = base / "archive"
    branch = [exchange(f"e{i}", t, f"2026-11-0{1 + i % 3}T00:00:0{i}.000Z") for i, t in enumerate(texts)]
    write_record(folder, "s", "S", [branch], summaries={1: "Sum"})
    records = load_records(folder)
    with SearchIndex(base / "search.db") as index:
        index.update_from_archive([RecordFolder(folder, None)])
        assert pbot_search(records, query, limit=50) == plain(search_history(index, query, limit=50))


class TestPlans:
    """Rare needles sort every hit, common ones walk newest first; both must be pbot's answer."""

    @pytest.fixture
    def big(self, tmp_path: Path) -> tuple[SearchIndex, list[dict[str, Any]]]:
        folder = tmp_path / "archive"
        for s in range(3):
            branch = [
                exchange(
                    f"s{s}e{i}",
                    f"用户：\ncommon words {i} {'needle-rare' if i == 77 and s == 1 else ''} 数据\n\n助手：\nok",
                    f"2026-11-{1 + i % 28:02d}T{s:02d}:{i % 60:02d}:00.000Z",
                )
                for i in range(120)
            ]
            write_record(
                folder, f"session-{s}", f"S{s}", [branch], summaries={1: "common summary", 2: "数据 summary"}
            )
        index = SearchIndex(tmp_path / "search.db")
        index.update_from_archive([RecordFolder(folder, None)])
        return index, load_records(folder)

    @pytest.mark.parametrize("query", ["needle-rare", "common", "数据", "数", "ok"])
    @pytest.mark.parametrize("session", [None, "session-1"])
    def test_rare_and_common(
        self, big: tuple[SearchIndex, list[dict[str, Any]]], query: str, session: str | None
    ) -> None:
        """Each plan, with and without a filter, on several pages, is pbot's answer."""
        index, records = big
        for offset in (0, 20, 300):
            expected = pbot_search(records, query, session_id=session, offset=offset, limit=20)
            assert expected == plain(
                search_history(index, query, session_id=session, offset=offset, limit=20)
            )

    @pytest.mark.parametrize(
        ("session", "from_", "to"),
        [(None, None, None), (None, "2026-03-01", "2026-06-30"), ("session-17", None, None)],
        ids=["all", "range", "one session"],
    )
    def test_session_list_is_pbots(
        self, tmp_path: Path, session: str | None, from_: str | None, to: str | None
    ) -> None:
        """Without a query, 60 sessions list, page and filter exactly as pbot's scan of their records."""
        folder = tmp_path / "archive"
        for s in range(60):
            day = f"2026-{1 + s % 12:02d}-{1 + s % 28:02d}"
            branch = [
                exchange(f"l{s}e{i}", f"用户：\nq {i}\n\n助手：\na", f"{day}T10:{i:02d}:00.000Z")
                for i in range(5)
            ]
            write_record(folder, f"session-{s}", f"S{s}", [branch])
        index = SearchIndex(tmp_path / "search.db")
        index.update_from_archive([RecordFolder(folder, None)])
        records = load_records(folder)
        for offset in (0, 20, 40, 59, 80):  # 80: past the end, where no row carries the total
            expected = pbot_search(
                records, "", session_id=session, from_=from_, to=to, offset=offset, limit=20
            )
            actual = search_history(
                index, "", session_id=session, from_=from_, to=to, offset=offset, limit=20
            )
            assert expected == plain(actual)

    def test_terms_order_same_with_and_without_filter(
        self, big: tuple[SearchIndex, list[dict[str, Any]]]
    ) -> None:
        """A filter that keeps everything does not change the terms ranking (ties newest first)."""
        index, _ = big
        plain_ids = [m.id for m in search_history(index, "common 数据", match="terms", limit=50).matches]
        filtered = search_history(index, "common 数据", match="terms", limit=50, from_="2000-01-01")
        assert plain_ids == [m.id for m in filtered.matches]
