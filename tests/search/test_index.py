"""The search index's own work: localeCompare order as bytes, incremental FTS updates, bounded texts."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pbot_watch.history.jstext import locale_key
from pbot_watch.search.codec import PLAIN, TRAIN_TEXTS, ZSTD
from pbot_watch.search.index import (
    INDEXED_CHARS,
    NODE_DICTIONARY,
    RecordFolder,
    SearchIndex,
    general_sort_key,
    sort_key,
)
from pbot_watch.search.queries import _SESSIONS_FROM, read_node, search_history
from pbot_watch.search.ranking import Ranking
from tests.search.archive import exchange, load_records, pbot_search, write_record

KEYS = st.one_of(
    st.text(),
    st.text(alphabet=st.characters(max_codepoint=0x7F)),
    st.from_regex(r"20\d\d-[01]\d-[0-3]\dT[0-2]\d:[0-5]\d:[0-5]\d\.\d{3}Z", fullmatch=True),
)


class TestSortKey:
    @settings(max_examples=300, deadline=None)
    @given(KEYS)
    @example("2026-11-29T20:00:01.000Z")
    @example("Ab\x01c\x7f_-")
    def test_equals_the_general_encoding(self, value: str) -> None:
        """The ASCII fast path gives the bytes of the general encoding of locale_key."""
        assert general_sort_key(value) == sort_key(value)

    @settings(max_examples=300, deadline=None)
    @given(KEYS, KEYS)
    @example("abc", "aBc")
    @example("aBc", "abC")
    @example("a" * 300, "a" * 299 + "A")
    def test_orders_as_locale_key(self, a: str, b: str) -> None:
        """Byte order of the keys is the order of locale_key (localeCompare's), ties included."""
        assert (locale_key(a) < locale_key(b)) == (sort_key(a) < sort_key(b))
        assert (locale_key(a) == locale_key(b)) == (sort_key(a) == sort_key(b))

    def test_a_key_without_capitals_is_its_primary_weights(self) -> None:
        """A node id's key: one byte per character and an end (its case weights said nothing)."""
        node_id = "233aabac-f6c2-5e86-9c3d-cd4beffc81eb:0:32dae8f9"
        assert len(sort_key(node_id)) == len(node_id) + 1
        assert len(sort_key("2026-11-29T20:00:01.000Z")) == 24 + 1 + 2  # the T and the Z


WORDS = ["budget", "北京", "😀", "parseHTTP", "\ud83d", "review", "ÇA", ""]


def vocabulary(index: SearchIndex) -> dict[str, set[tuple[str, int, int]]]:
    """Every term of both FTS tables with its row and occurrence counts (row ids play no part)."""
    out = {}
    for table in ("nodes_literal", "nodes_terms"):
        index.conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.v_{table} USING fts5vocab(main, {table}, row)"
        )
        out[table] = set(index.conn.execute(f"SELECT term, doc, cnt FROM temp.v_{table}"))
    return out


class TestIncrementalUpdates:
    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(
        st.lists(
            st.tuples(
                st.sampled_from(["s1", "s2", "s3"]),
                st.lists(st.lists(st.sampled_from(WORDS), max_size=4).map(" ".join), max_size=6),
                st.booleans(),
            ),
            min_size=1,
            max_size=6,
        )
    )
    def test_rewritten_records_leave_the_fts_tables_as_a_fresh_build(
        self, tmp_path_factory: pytest.TempPathFactory, writes: list[tuple[str, list[str], bool]]
    ) -> None:
        """Records rewritten, shrunk, grown and deleted in turn: FTS holds what a rebuild holds."""
        tmp = tmp_path_factory.mktemp("incremental")
        folder = tmp / "archive"
        folder.mkdir()
        kept = SearchIndex(tmp / "kept.db")
        for session, texts, summarized in writes:
            exchanges = [
                exchange(f"e{i}", text, f"2026-11-0{1 + i % 9}T10:00:00.000Z") for i, text in enumerate(texts)
            ]
            for path in folder.glob("*.json"):
                if f'"{session}"' in path.read_text(encoding="utf-8"):
                    path.unlink()
            if exchanges:
                write_record(
                    folder,
                    session,
                    session.upper(),
                    [exchanges],
                    summaries={1: "sum 北京"} if summarized else None,
                )
            kept.update_from_archive([RecordFolder(folder, None)])
        fresh = SearchIndex(tmp / "fresh.db")
        fresh.rebuild([RecordFolder(folder, None)])
        assert vocabulary(fresh) == vocabulary(kept)
        kept.close()
        fresh.close()


class TestCappedText:
    def test_a_text_longer_than_the_index_sees_is_searched_exactly(self, tmp_path: Path) -> None:
        """A node over INDEXED_CHARS has no trigram row, yet literal search finds its end as pbot does."""
        folder = tmp_path / "archive"
        log = "".join(f"record {n} " for n in range(INDEXED_CHARS // 8)) + "tail marker"
        exchanges = [
            exchange("e0", "用户：\n" + log, "2026-11-01T10:00:00.000Z"),
            exchange("e1", "用户：\nanother tail marker here", "2026-11-02T10:00:00.000Z"),
        ]
        write_record(folder, "s1", "S1", [exchanges])
        with SearchIndex(tmp_path / "search.db") as index:
            index.update_from_archive([RecordFolder(folder, None)])
            capped = index.conn.execute("SELECT count(*) FROM nodes WHERE capped").fetchone()[0]
            assert 1 == capped
            records = load_records(folder)
            for query in ["TAIL MARKER", "record 1 ", "户", "用户", "xyz"]:
                for session in (None, "s1"):
                    ours = search_history(index, query, session_id=session)
                    expected = pbot_search(records, query)
                    assert (expected["total"], [m["id"] for m in expected["matches"]]) == (
                        ours.total,
                        [m.id for m in ours.matches],
                    )
            # The terms index sees the head of the long text only (neighbours off: that rule
            # lifts e0 for sitting next to e1, not for holding the term).
            beside = Ranking(neighbours=0.0)
            assert ["e1"] == [
                m.id.rsplit(":", 1)[-1]
                for m in search_history(index, "marker", match="terms", ranking=beside).matches
            ]


def whole_text(index: SearchIndex, node_id: str) -> str:
    """A node's text as ``read`` gives it, page after page."""
    pieces: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = read_node(index, node_id, offset=offset, limit=20_000)
        pieces.append(page.text)
        offset = page.next_offset
    return "".join(pieces)


class TestPackedTexts:
    def test_each_kind_of_text_reads_back_exactly(self, tmp_path: Path) -> None:
        """A text of PACK_FROM characters or more is kept packed; a short one, a capped one (read
        in pieces) and one holding half a character stay plain; every one reads, searches and
        snippets as the record has it."""
        folder = tmp_path / "archive"
        texts = {
            "short": "用户：\nhi",
            "packed": "用户：\n" + "a paragraph of prose about the packed marker. " * 40,
            "half": "用户：\nhalf \ud83d of an emoji beside the half marker " * 3,
            "capped": "用户：\n" + "capped log line " * (INDEXED_CHARS // 16) + "capped marker",
        }
        exchanges = [
            exchange(name, text, f"2026-11-0{n + 1}T10:00:00.000Z")
            for n, (name, text) in enumerate(texts.items())
        ]
        write_record(folder, "s1", "S1", [exchanges])
        with SearchIndex(tmp_path / "search.db") as index:
            index.update_from_archive([RecordFolder(folder, None)])
            stored = {
                node_id.rsplit(":", 1)[-1]: packed
                for node_id, packed in index.conn.execute(
                    "SELECT n.id, t.packed FROM nodes n JOIN node_texts t ON t.rowid = n.rowid WHERE n.kind = 'exchange'"
                )
            }
            assert {"short": PLAIN, "packed": ZSTD, "half": PLAIN, "capped": PLAIN} == stored
            records = load_records(folder)
            for name, text in texts.items():
                node_id = (
                    next(m.id for m in search_history(index, f"{name} marker").matches)
                    if name != "short"
                    else None
                )
                if node_id is not None:
                    assert text == whole_text(index, node_id)
                for query in (f"{name} marker", "marker", "用户", "hi"):
                    ours = search_history(index, query)
                    expected = pbot_search(records, query)
                    assert (expected["total"], [m["snippet"] for m in expected["matches"]]) == (
                        ours.total,
                        [m.snippet for m in ours.matches],
                    )

    def test_the_dictionary_is_trained_once_and_the_texts_after_it_use_it(self, tmp_path: Path) -> None:
        """TRAIN_TEXTS node texts in, one dictionary is trained in the same write; texts written
        after it are packed with it and those before stay readable; a rebuild keeps it."""
        folder = tmp_path / "archive"
        prose = "the service reads the session, writes its record and indexes the exchange {n} "
        exchanges = [
            exchange(
                f"e{n}",
                "用户：\n" + prose.format(n=n) * 3,
                f"2026-11-01T10:{n // 60 % 60:02d}:{n % 60:02d}.000Z",
            )
            for n in range(TRAIN_TEXTS + 200)
        ]
        write_record(folder, "s1", "S1", [exchanges[:TRAIN_TEXTS]])
        with SearchIndex(tmp_path / "search.db") as index:
            index.update_from_archive([RecordFolder(folder, None)])
            assert [NODE_DICTIONARY] == [i for (i,) in index.conn.execute("SELECT id FROM node_dicts")]
            write_record(folder, "s2", "S2", [exchanges[TRAIN_TEXTS:]])
            index.update_from_archive([RecordFolder(folder, None)])
            kinds = dict(index.conn.execute("SELECT packed, count(*) FROM node_texts GROUP BY packed"))
            assert kinds.get(NODE_DICTIONARY, 0) >= 200 and kinds.get(ZSTD, 0) >= TRAIN_TEXTS
            records = load_records(folder)
            for query in ("exchange 7 ", f"exchange {TRAIN_TEXTS + 150} ", "indexes the"):
                ours = search_history(index, query, limit=5)
                expected = pbot_search(records, query, limit=5)
                assert (expected["total"], [m["snippet"] for m in expected["matches"]]) == (
                    ours.total,
                    [m.snippet for m in ours.matches],
                )
            index.rebuild([RecordFolder(folder, None)])
            assert 1 == index.conn.execute("SELECT count(*) FROM node_dicts").fetchone()[0]
            assert (
                index.conn.execute(
                    "SELECT count(*) FROM node_texts WHERE packed = ?", (NODE_DICTIONARY,)
                ).fetchone()[0]
                > TRAIN_TEXTS
            )


class TestSessionListPlan:
    def test_the_session_list_reads_only_session_nodes(self, tmp_path: Path) -> None:
        """Listing sessions walks the partial index of session nodes, not every record or node."""
        folder = tmp_path / "archive"
        folder.mkdir()
        for number in range(3):
            write_record(
                folder, f"s{number}", f"S{number}", [[exchange("e1", "hello", "2026-11-01T10:00:00.000Z")]]
            )
        index = SearchIndex(tmp_path / "search.db")
        index.rebuild([RecordFolder(folder, None)])
        sql = (
            f"SELECT n.rowid FROM {_SESSIONS_FROM} WHERE n.kind = 'session' AND n.from_ms IS NOT NULL "
            "ORDER BY n.to_key DESC, n.id_key"
        )
        plan = [row[-1] for row in index.conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
        assert 3 == len(search_history(index, "").matches)
        index.close()
        assert (
            "SCAN n USING COVERING INDEX nodes_sessions" in plan
            or "SCAN n USING INDEX nodes_sessions" in plan
        )
