"""Raw memory's tables: created on first use, rebuilt when of another version, kept up to date by reading only what was appended."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pbot_watch.archive.stamp import FileStamp
from pbot_watch.cli import main
from pbot_watch.memory import stamps, texts
from pbot_watch.memory.extract import LABEL_CHARS
from pbot_watch.memory.index import (
    MEMORY_SCHEMA_VERSION,
    MemorySync,
    count_sources,
    feed_memory,
    rebuild_memory,
    refresh_memory,
    source_text,
    sync_memory_file,
    text_bytes,
)
from pbot_watch.memory.query import recall, search_memory
from pbot_watch.memory.texts import CHUNK_LINES, CHUNK_SLOTS, OVERFLOW_CHUNKS, group_row, literal_document
from pbot_watch.pi.cursor import HEAD_BYTES, TAIL_BYTES
from pbot_watch.pi.entries import SessionReader
from pbot_watch.search.codec import PLAIN, TRAIN_TEXTS
from pbot_watch.search.index import INDEXED_CHARS, SearchIndex
from pbot_watch.sources import WholeDigest, cursor_at, iter_session_files
from tests.support.pi_sessions import PiSession


def session(root: Path) -> None:
    w = PiSession("sess-1", file=root / "ws" / "s.jsonl")
    w.user("run the tests", id="u1")
    w.assistant(None, calls=[("c1", "bash", {"command": "npm test"})], id="a1")
    w.tool_result("3 failed: budget over limit\n", call_id="c1", name="bash", error=True, id="t1")


class TestMemoryTables:
    def test_a_fresh_index_answers_without_a_refresh(self, tmp_path: Path) -> None:
        """A query on an index that never saw raw memory finds nothing instead of failing."""
        with SearchIndex(tmp_path / "search.db") as index:
            assert 0 == search_memory(index, "budget").total

    def test_another_version_is_rebuilt_with_the_same_handles(self, tmp_path: Path) -> None:
        """Tables of another memory version are dropped and refilled; handles stay the same."""
        session(tmp_path / "sessions")
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [tmp_path / "sessions"])
            before = [h.handle for h in search_memory(index).hits]
            index.conn.execute(
                "UPDATE meta SET value = ? WHERE key = 'memory_schema_version'",
                (str(MEMORY_SCHEMA_VERSION - 1),),
            )
        with SearchIndex(tmp_path / "search.db") as index:
            assert 0 == count_sources(index)
            refresh_memory(index, [tmp_path / "sessions"])
            assert before == [h.handle for h in search_memory(index).hits]
            assert len(before) == count_sources(index)


def memory_state(index: SearchIndex) -> dict[str, Any]:
    """Everything raw memory holds, without row ids or file paths (which differ between builds)."""
    conn = index.conn
    sources = sorted(
        (
            entry_id,
            part,
            kind,
            stamps.decode(stamp, stamp_text),
            label,
            sections,
            lines,
            capped,
            unanswered,
            source_text(conn, rowid),
        )
        for rowid, entry_id, part, kind, stamp, stamp_text, label, sections, lines, capped, unanswered in conn.execute(
            "SELECT s.rowid, s.entry_id, s.part, s.kind, s.stamp, s.stamp_text, s.label, s.sections, t.lines, t.capped, "
            "s.unanswered FROM mem_sources s JOIN mem_texts t ON t.rowid = s.text"
        )
    )
    entries = sorted(conn.execute("SELECT seq, entry_id, parent_id, kept FROM mem_entries"))
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.v_mem_terms USING fts5vocab(main, mem_terms, row)")
    vocabulary = {"mem_terms": sorted(conn.execute("SELECT term, doc, cnt FROM temp.v_mem_terms"))}
    return {"sources": sources, "entries": entries, "vocabulary": vocabulary, "literal": literal_state(index)}


def literal_state(index: SearchIndex) -> dict[str, Any]:
    """The literal index as far as it must be the same however raw memory was built.

    Which group a text joins depends on which file stored it first (a text two files share), so
    two builds may group differently. What must hold in every build: each text not capped is in
    one group, and each row holds exactly what its group's texts make, nothing left behind and
    nothing missing. That is checked by making every row again from the texts, in a table of the
    same kind, and comparing the two tables' vocabularies.
    """
    conn = index.conn
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.literal_again USING fts5(text, content='', columnsize=0, "
        "detail=none, tokenize='trigram case_sensitive 1')"
    )
    conn.execute("INSERT INTO temp.literal_again(literal_again) VALUES ('delete-all')")
    groups: dict[int, list[int]] = {}
    for text, group in conn.execute("SELECT rowid, grp FROM mem_texts WHERE grp IS NOT NULL ORDER BY rowid"):
        groups.setdefault(group, []).append(text)
    for group, members in groups.items():
        raw = text_bytes(conn, members)
        documents = [literal_document(raw[text].decode("utf-8", "surrogatepass")) or "" for text in members]
        if row := group_row(documents):
            conn.execute("INSERT INTO temp.literal_again(rowid, text) VALUES (?, ?)", (group, row))
    for name, schema in (("v_mem_literal", "main, mem_literal"), ("v_literal_again", "temp, literal_again")):
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{name} USING fts5vocab({schema}, row)")
    held = sorted(conn.execute("SELECT term, doc FROM temp.v_mem_literal"))
    again = sorted(conn.execute("SELECT term, doc FROM temp.v_literal_again"))
    assert held == again, "a literal row is not what its group's texts make"
    ungrouped = conn.execute("SELECT count(*) FROM mem_texts WHERE grp IS NULL AND NOT capped").fetchone()[0]
    return {"texts in no group": ungrouped, "groups": len(groups) > 0}


def index_rows(index: SearchIndex) -> tuple[int, int]:
    """Terms rows (chunks), and the texts they are of (every text has at least one)."""
    rows = [rowid for (rowid,) in index.conn.execute("SELECT rowid FROM mem_chunk_tokens")]
    texts = {rowid // CHUNK_SLOTS for rowid in rows if rowid < OVERFLOW_CHUNKS}
    return len(rows), len(texts)


def busy_session(path: Path, turns: int, output_lines: int = 3) -> PiSession:
    """A session of tool work: each turn a question, a call, its result and an answer."""
    w = PiSession("sess-busy", file=path)
    for i in range(turns):
        w.user(f"question {i}: run step {i}", id=f"u{i}")
        w.assistant(None, calls=[(f"c{i}", "bash", {"command": f"make step{i}"})], id=f"a{i}")
        output = "".join(f"step {i} output line {n}\n" for n in range(output_lines))
        w.tool_result(output, call_id=f"c{i}", name="bash", id=f"t{i}")
        w.assistant(f"step {i} done", id=f"r{i}")
    return w


@pytest.fixture(scope="module")
def big_session(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The bytes of a 20 MB session of tool work, written once for the tests that copy it."""
    path = tmp_path_factory.mktemp("big") / "s.jsonl"
    busy_session(path, turns=2000, output_lines=350)
    data = path.read_bytes()
    assert len(data) > 20_000_000
    return data


def copy_of(data: bytes, path: Path) -> PiSession:
    """A session appending to a copy of a ``busy_session`` file of 2000 turns."""
    path.parent.mkdir(parents=True, exist_ok=True)
    w = PiSession("sess-busy", leaf="r1999", clock=8000)
    path.write_bytes(data)
    w.file = path
    return w


class TestRefreshChecks:
    """``refresh_memory``'s per-query check: a stat per file against what raw memory holds."""

    def test_the_files_held_are_named_as_their_paths_are_and_an_unchanged_one_is_not_read(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """From a relative root (``.``) too: held under ``str`` of the ``Path`` ``iter_session_files``
        gives, so the next refresh finds every file unchanged and reads nothing."""
        session(tmp_path / "sessions")
        PiSession("sess-2", file=tmp_path / "sessions" / "s2.jsonl").user("a flat one", id="u1")
        monkeypatch.chdir(tmp_path / "sessions")
        root = Path(".")
        with SearchIndex(tmp_path / "search.db") as index:
            assert 2 == refresh_memory(index, [root])
            held = sorted(path for (path,) in index.conn.execute("SELECT path FROM mem_files"))
            assert sorted(str(p) for p in iter_session_files(root)) == held == ["s2.jsonl", "ws/s.jsonl"]
            again = MemorySync()
            assert 0 == refresh_memory(index, [root], again)
            assert (0, 0) == (again.files_read, again.bytes_read)

    def test_a_changed_file_is_read_and_a_gone_one_forgotten(self, tmp_path: Path) -> None:
        """A touch (same size, new mtime) is read again (a same-size rewrite cannot be ruled out
        without a whole fingerprint); a file deleted leaves; a new one comes in."""
        session(tmp_path / "sessions")
        path = tmp_path / "sessions" / "ws" / "s.jsonl"
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [tmp_path / "sessions"])
            os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
            touched = MemorySync()
            assert 1 == refresh_memory(index, [tmp_path / "sessions"], touched)
            assert (1, 1) == (touched.files_read, search_memory(index, "budget").total)
            PiSession("sess-2", file=tmp_path / "sessions" / "s2.jsonl").user("a walnut", id="u1")
            path.unlink()
            assert 1 == refresh_memory(
                index, [tmp_path / "sessions"]
            )  # the new one read, the gone one dropped
            assert ["sess-2"] == [s for (s,) in index.conn.execute("SELECT session_id FROM mem_files")]
            assert (0, 1) == (search_memory(index, "budget").total, search_memory(index, "walnut").total)


class TestIncremental:
    def test_an_append_costs_only_the_new_bytes(self, tmp_path: Path, big_session: bytes) -> None:
        """After a 20 MB session is indexed, syncing an appended turn reads that turn and the cursor's windows."""
        path = tmp_path / "sessions" / "ws" / "s.jsonl"
        w = copy_of(big_session, path)
        with SearchIndex(tmp_path / "search.db") as index:
            first = MemorySync()
            refresh_memory(index, [tmp_path / "sessions"], first)
            size = path.stat().st_size
            w.user("the appended needle question", id="late")
            appended = path.stat().st_size - size
            again = MemorySync()
            refresh_memory(index, [tmp_path / "sessions"], again)
            # The whole file once, then the fingerprint windows of the old and the new cursor.
            assert size + HEAD_BYTES + TAIL_BYTES == first.bytes_read
            assert appended + 2 * (HEAD_BYTES + TAIL_BYTES) == again.bytes_read
            assert 1 == search_memory(index, "appended needle").total

    def test_an_append_through_the_cli_costs_about_what_a_search_with_nothing_new_costs(
        self, tmp_path: Path, big_session: bytes
    ) -> None:
        """``memory search`` after an append to a 20 MB session reads under 2 MB more than with nothing appended.

        Measured on everything the process reads (``/proc/self/io``): the session files, and
        the database pages every search reads anyway; reading the session again would add 20 MB.
        The append's write reads a page or more of each table it changes (16 KB pages): 0.99 MB
        in all with a literal row per text, 1.01 MB with ``mem_groups`` beside it.
        """
        path = tmp_path / "sessions" / "ws" / "s.jsonl"
        w = copy_of(big_session, path)
        env = {
            "PBOT_WATCH_STATE_DIR": str(tmp_path / "state"),
            "PBOT_WATCH_SESSIONS": str(tmp_path / "sessions"),
        }
        runner = CliRunner()
        args = ["memory", "search", "needle", "--json"]

        def search() -> tuple[int, int]:
            before = bytes_read_so_far()
            result = runner.invoke(main, args, env=env)
            assert 0 == result.exit_code, result.output
            return bytes_read_so_far() - before, json.loads(result.output)["total"]

        search()  # imports, and the first read of the whole file
        nothing_new, found = search()
        assert 0 == found
        w.user("the appended needle question", id="late")
        after_append, found = search()
        assert 1 == found
        assert after_append - nothing_new < 2_000_000, (after_append, nothing_new)

    def test_a_result_appended_later_comes_with_its_call(self, tmp_path: Path) -> None:
        """A call read alone is "no result"; when its result is appended, the result brings the call."""
        path = tmp_path / "sessions" / "s.jsonl"
        w = PiSession("sess-1", file=path)
        w.user("run the tests", id="u1")
        w.assistant(None, calls=[("c1", "bash", {"command": "npm test"})], id="a1")
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [tmp_path / "sessions"])
            assert ["toolCall bash(npm test) → no result"] == [
                h.label for h in search_memory(index, "npm test").hits
            ]
            w.tool_result("3 failed: budget over limit\n", call_id="c1", name="bash", error=True, id="t1")
            refresh_memory(index, [tmp_path / "sessions"])
            hits = search_memory(index, "npm test").hits
            assert ["toolResult bash(npm test) ✗ 3 failed: budget over limit [1 line]"] == [
                h.label for h in hits
            ]
            assert recall(index, hits[0].handle).text.startswith("bash: npm test\n3 failed")

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(
        st.lists(
            st.tuples(
                st.sampled_from(["user", "call", "result", "bash", "compaction", "answer"]), st.integers(0, 3)
            ),
            min_size=1,
            max_size=14,
        ),
        st.lists(st.integers(min_value=1, max_value=400), max_size=8),
        st.sampled_from([1, 3, texts.GROUP_ENTRIES]),
    )
    def test_a_file_read_in_pieces_gives_what_reading_it_whole_gives(
        self,
        tmp_path_factory: pytest.TempPathFactory,
        steps: list[tuple[str, int]],
        cuts: list[int],
        group: int,
    ) -> None:
        """Appended in any pieces, even mid-line, and synced after each: the index holds what one read
        of the whole file gives (literal groups of ``group`` entries too: a group an append joins is
        written again with it, one a replaced call leaves without it)."""
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(texts, "GROUP_ENTRIES", group)
            self._pieces_and_whole(tmp_path_factory, steps, cuts)

    def _pieces_and_whole(
        self, tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int]], cuts: list[int]
    ) -> None:
        base = tmp_path_factory.mktemp("pieces")
        whole = base / "whole" / "s.jsonl"
        w = PiSession("sess-p", file=whole)
        for n, (kind, k) in enumerate(steps):
            if kind == "user":
                w.user(f"question {k} about σίσυφος 北京", id=f"e{n}")
            elif kind == "call":
                w.assistant(f"calling {k}", calls=[(f"c{k}", "bash", {"command": f"run {k}"})], id=f"e{n}")
            elif kind == "result":
                w.tool_result(f"output of {k}\nsecond line\n", call_id=f"c{k}", error=k == 2, id=f"e{n}")
            elif kind == "bash":
                w.bash(f"ls {k}", "a\nb\n", code=k, id=f"e{n}")
            elif kind == "compaction":
                w.compaction(f"e{max(0, n - k)}", id=f"e{n}")
            else:
                w.assistant(f"answer {k}", thinking="hmm", id=f"e{n}")
        data = whole.read_bytes()
        pieces = base / "pieces" / "s.jsonl"
        pieces.parent.mkdir()
        offsets = sorted({min(c * 7, len(data)) for c in cuts} | {len(data)})
        with SearchIndex(base / "pieces.db") as index:
            done = 0
            for end in offsets:
                with pieces.open("ab") as handle:
                    handle.write(data[done:end])
                done = end
                refresh_memory(index, [pieces.parent])
            incremental = memory_state(index)
        with SearchIndex(base / "whole.db") as index:
            refresh_memory(index, [whole.parent])
            assert memory_state(index) == incremental

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(cut=st.integers(0, 24), group=st.sampled_from([1, 3, texts.GROUP_ENTRIES]))
    def test_a_cut_file_and_a_gone_one_leave_no_trace_in_the_literal_groups(
        self, tmp_path_factory: pytest.TempPathFactory, cut: int, group: int
    ) -> None:
        """A file cut short and one deleted: every index holds what a fresh build of what is left holds.

        The texts that go leave their literal groups (a contentless row is taken out only with
        exactly what it was made of): a trigram left behind, or one taken twice, shows here.
        """
        base = tmp_path_factory.mktemp("cut")
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(texts, "GROUP_ENTRIES", group)
            path = base / "sessions" / "s.jsonl"
            busy_session(path, turns=6)  # 24 entries: calls answered and not yet
            PiSession("sess-other", file=base / "sessions" / "other.jsonl").user("another walnut", id="o1")
            with SearchIndex(base / "live.db") as index:
                refresh_memory(index, [base / "sessions"])
                lines = path.read_bytes().splitlines(keepends=True)
                path.write_bytes(b"".join(lines[: cut + 1]))  # the header and ``cut`` entries
                (base / "sessions" / "other.jsonl").unlink()
                refresh_memory(index, [base / "sessions"])
                live = memory_state(index)
                assert (
                    0
                    == index.conn.execute("SELECT count(*) FROM mem_groups WHERE slot IS NULL").fetchone()[0]
                )
            with SearchIndex(base / "fresh.db") as index:
                refresh_memory(index, [base / "sessions"])
                assert memory_state(index) == live

    def test_the_service_feeds_entries_it_parsed(self, tmp_path: Path) -> None:
        """feed_memory with entries parsed elsewhere gives what syncing the file gives; a gap is refused."""
        path = tmp_path / "sessions" / "s.jsonl"
        w = busy_session(path, turns=3)
        reader = SessionReader()
        first = path.read_bytes()
        entries = reader.feed(first)
        assert reader.header is not None
        stamp = FileStamp.of(path.stat())
        with path.open("rb") as handle:
            cursor = cursor_at(handle.fileno(), os.fstat(handle.fileno()), reader.consumed, WholeDigest())
        with SearchIndex(tmp_path / "fed.db") as index:
            assert feed_memory(index, path, reader.header, entries, start=0, cursor=cursor, stamp=stamp)
            w.user("one more question", id="late")
            more = reader.feed(path.read_bytes()[len(first) :])
            with path.open("rb") as handle:
                later = cursor_at(handle.fileno(), os.fstat(handle.fileno()), reader.consumed, WholeDigest())
            stamp = FileStamp.of(path.stat())
            assert not feed_memory(index, path, reader.header, more, start=1, cursor=later, stamp=stamp)
            assert feed_memory(index, path, reader.header, more, start=len(first), cursor=later, stamp=stamp)
            fed = memory_state(index)
            assert not sync_memory_file(index, path)  # the cursor is current: nothing to read
        with SearchIndex(tmp_path / "synced.db") as index:
            refresh_memory(index, [tmp_path / "sessions"])
            assert memory_state(index) == fed

    def test_a_rewritten_file_is_read_again_and_unchanged_sources_keep_their_rows(
        self, tmp_path: Path
    ) -> None:
        """A file replaced by a longer one with the same beginning rewritten is read from 0; handles stay."""
        path = tmp_path / "sessions" / "s.jsonl"
        busy_session(path, turns=3)
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [tmp_path / "sessions"])
            rows = dict(index.conn.execute("SELECT entry_id || ':' || part, rowid FROM mem_sources"))
            text = path.read_text(encoding="utf-8").replace(
                "question 2: run step 2", "QUESTION 2: run step 2"
            )
            path.write_text(text + "\n", encoding="utf-8")
            sync = MemorySync()
            refresh_memory(index, [tmp_path / "sessions"], sync)
            assert sync.bytes_read >= len(text)
            after = dict(index.conn.execute("SELECT entry_id || ':' || part, rowid FROM mem_sources"))
            assert {k: v for k, v in rows.items() if k != "u2:0"} == {
                k: v for k, v in after.items() if k != "u2:0"
            }
            (hit,) = search_memory(index, "QUESTION 2:").hits
            assert recall(index, hit.handle).text.startswith("QUESTION 2: run step 2")

    def test_a_same_size_rewrite_is_read_again(self, tmp_path: Path) -> None:
        """An edit in place that keeps the file's length, seen by its new mtime, is read again."""
        path = tmp_path / "sessions" / "s.jsonl"
        busy_session(path, turns=3)
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [tmp_path / "sessions"])
            data = path.read_bytes()
            mtime = path.stat().st_mtime_ns
            path.write_bytes(data.replace(b"question 1:", b"QUESTION 1:"))
            os.utime(path, ns=(mtime + 1_000_000_000, mtime + 1_000_000_000))
            refresh_memory(index, [tmp_path / "sessions"])
            (hit,) = search_memory(index, "QUESTION 1:").hits
            assert recall(index, hit.handle).text.startswith("QUESTION 1:")


def bytes_read_so_far() -> int:
    """Bytes this process has read through read(2) and friends (Linux ``/proc/self/io``)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


class TestStoredOnce:
    def test_a_forked_session_keeps_its_parent_texts_once_and_both_find_them(self, tmp_path: Path) -> None:
        """A fork repeats its parent's entries (same ids): its sources share the parent's texts."""
        parent = busy_session(tmp_path / "sessions" / "parent.jsonl", turns=4, output_lines=40)
        parent.write(tmp_path / "sessions" / "parent.jsonl")
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [tmp_path / "sessions"])
            alone = index.conn.execute("SELECT count(*), sum(length(data)) FROM mem_texts").fetchone()
            chunks = index_rows(index)[0]
            fork = parent.fork("sess-fork")
            fork.user("question 9: a fork of its own", id="u9")
            fork.write(tmp_path / "sessions" / "fork.jsonl")
            refresh_memory(index, [tmp_path / "sessions"])
            texts, stored = index.conn.execute("SELECT count(*), sum(length(data)) FROM mem_texts").fetchone()
            assert texts == alone[0] + 1  # only the fork's own question is a new text
            assert stored < alone[1] + 100
            assert index_rows(index) == (chunks + 1, texts)  # its index rows once too
            literal = "SELECT count(*) FROM mem_literal WHERE mem_literal MATCH 'ine 39'"
            # One row for the parent's texts (a group: texts.GROUP_ENTRIES), none for the fork's sources of them.
            assert index.conn.execute(literal).fetchone()[0] == 1
            found = search_memory(index, "step 2 output line 39")
            assert {"sess-busy", "sess-fork"} == {hit.session_id for hit in found.hits}
            assert all("step 2 output line 39" in recall(index, hit.handle).text for hit in found.hits)
            # The parent goes: its texts stay for the fork, and leave with the fork's last source.
            (tmp_path / "sessions" / "parent.jsonl").unlink()
            refresh_memory(index, [tmp_path / "sessions"])
            (hit,) = search_memory(index, "step 2 output line 39").hits
            assert hit.session_id == "sess-fork"
            assert "step 2 output line 39" in recall(index, hit.handle).text
            assert texts == index.conn.execute("SELECT count(*) FROM mem_texts").fetchone()[0]
            (tmp_path / "sessions" / "fork.jsonl").unlink()
            refresh_memory(index, [tmp_path / "sessions"])
            assert (0, 0) == index.conn.execute("SELECT count(*), total(refs) FROM mem_texts").fetchone()

    def test_a_label_and_sections_the_text_gives_are_not_stored_and_read_back_the_same(
        self, tmp_path: Path
    ) -> None:
        """A message's label is its kind and its text shortened, its one section its kind over every
        line: the row keeps neither, and a hit shows what extraction made.
        """
        w = PiSession("sess-1", file=tmp_path / "sessions" / "s.jsonl")
        w.user("why does the build   fail\nwhen the cache is cold " + "word " * 40, id="u1")
        w.assistant(None, calls=[("c1", "bash", {"command": "make"})], id="a1")
        w.tool_result("make: *** no rule\nto make target", call_id="c1", name="bash", id="t1")
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [tmp_path / "sessions"])
            stored = dict(
                index.conn.execute("SELECT entry_id, label IS NULL AND sections IS NULL FROM mem_sources")
            )
            assert stored == {"u1": 1, "t1": 0}
            user = next(h for h in search_memory(index, "cache is cold").hits)
            assert user.label.startswith("user why does the build fail when the cache is cold word word")
            assert len(user.label) == len("user ") + LABEL_CHARS and user.label.endswith("…")
            assert user.section is not None
            assert (user.section.title, user.section.first_line, user.section.last_line) == ("user", 1, 2)
            tool = next(h for h in search_memory(index, "no rule").hits)
            assert tool.label.startswith("toolResult bash(make) → make: *** no rule")
            assert tool.section is not None and tool.section.title == "result"

    def test_a_long_text_has_terms_rows_past_its_own_slots_and_they_leave_with_it(
        self, tmp_path: Path
    ) -> None:
        """A text of more than CHUNK_SLOTS chunks has its further chunks named in mem_chunks: a terms
        search finds a word in them on its line, and the text takes every chunk with it.
        """
        path = tmp_path / "sessions" / "s.jsonl"
        w = PiSession("sess-1", file=path)
        w.user("show the log", id="u1")
        w.assistant(None, calls=[("c1", "bash", {"command": "cat log"})], id="a1")
        lines = [f"entry {n} ordinary" for n in range(CHUNK_SLOTS * CHUNK_LINES + 50)]
        lines[-20] = "entry 250 zanzibar"
        w.tool_result("\n".join(lines), call_id="c1", name="bash", id="t1")
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [tmp_path / "sessions"])
            assert index.conn.execute("SELECT count(*) FROM mem_chunks").fetchone()[0] > 0
            (hit,) = search_memory(index, "zanzibar", match="terms").hits
            assert hit.entry_id == "t1" and hit.snippet is not None and "entry 250 zanzibar" in hit.snippet
            path.write_text(path.read_text(encoding="utf-8").split("\n", 1)[0] + "\n", encoding="utf-8")
            refresh_memory(index, [tmp_path / "sessions"])
            assert 0 == search_memory(index, "zanzibar", match="terms").total
            assert (0, 0) == index_rows(index)
            assert 0 == index.conn.execute("SELECT count(*) FROM mem_chunks").fetchone()[0]

    def test_a_text_repeated_in_one_session_is_stored_once(self, tmp_path: Path) -> None:
        """The same tool output printed twice is one text; each source still has it."""
        w = PiSession("sess-1", file=tmp_path / "sessions" / "s.jsonl")
        for i in range(2):
            w.user(f"run the tests, take {i}", id=f"u{i}")
            w.assistant(None, calls=[(f"c{i}", "bash", {"command": "npm test"})], id=f"a{i}")
            w.tool_result("3 failed: budget over limit\n" * 30, call_id=f"c{i}", name="bash", id=f"t{i}")
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [tmp_path / "sessions"])
            assert 2 == search_memory(index, "budget over limit").total
            shared = index.conn.execute("SELECT count(*) FROM mem_texts WHERE refs > 1").fetchone()[0]
            assert shared >= 1
            texts = index.conn.execute("SELECT count(*) FROM mem_texts").fetchone()[0]
            assert index_rows(index)[1] == texts  # the shared output is chunked once


class TestCompression:
    def test_texts_are_packed_with_a_dictionary_trained_on_the_first_ones(self, tmp_path: Path) -> None:
        """Past TRAIN_TEXTS texts a dictionary is trained, the first texts packed again with it, and
        every text, a huge one streamed line by line too, reads back exactly.
        """
        path = tmp_path / "sessions" / "s.jsonl"
        w = busy_session(path, turns=TRAIN_TEXTS // 3 + 50, output_lines=6)
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [tmp_path / "sessions"])
            ((ident, size),) = index.conn.execute("SELECT id, length(data) FROM mem_dicts").fetchall()
            assert size > 0
            packed = dict(index.conn.execute("SELECT packed, count(*) FROM mem_texts GROUP BY packed"))
            assert set(packed) <= {PLAIN, ident}
            first = search_memory(index, "step 0 output line 5").hits[0]
            assert recall(index, first.handle).text.endswith("step 0 output line 5")
            log = "".join(f"log line {n} of a pasted log\n" for n in range(INDEXED_CHARS // 20))
            w.user("a pasted log", id="u-log")
            w.tool_result(log, call_id="c-log", name="bash", id="t-log")
            refresh_memory(index, [tmp_path / "sessions"])
            last = INDEXED_CHARS // 20 - 1
            (hit,) = search_memory(index, f"log line {last} of a").hits
            assert hit.line == last + 1  # a capped source: streamed through the dictionary
            assert (ident, 1) == index.conn.execute("SELECT max(id), count(*) FROM mem_dicts").fetchone()
            (stored,) = index.conn.execute(
                "SELECT length(t.data) FROM mem_texts t JOIN mem_sources s ON s.text = t.rowid "
                "WHERE s.entry_id = 't-log'"
            ).fetchone()
            assert stored < len(log) / 4

    def test_a_rebuild_trains_its_dictionary_again(self, tmp_path: Path) -> None:
        """Rebuilt raw memory forgets the old dictionary (it holds pieces of the old texts)."""
        busy_session(tmp_path / "sessions" / "s.jsonl", turns=TRAIN_TEXTS // 3 + 50)
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [tmp_path / "sessions"])
            (old,) = index.conn.execute("SELECT hash FROM mem_dicts").fetchone()
            (tmp_path / "sessions" / "s.jsonl").unlink()
            busy_session(tmp_path / "sessions" / "t.jsonl", turns=TRAIN_TEXTS // 3 + 50, output_lines=5)
            rebuild_memory(index, [tmp_path / "sessions"])
            ((new,),) = index.conn.execute("SELECT hash FROM mem_dicts").fetchall()
            assert new != old
            after = search_memory(index, "output line 4")
            assert after.total > 0
            assert all("output line 4" in recall(index, h.handle).text for h in after.hits)


class TestHugeMessage:
    def test_a_huge_line_is_stored_whole_and_found_by_literal_search_anywhere(self, tmp_path: Path) -> None:
        """A pasted log longer than INDEXED_CHARS: literal search finds its end, recall returns it whole."""
        line = "".join(f"log record {n} " for n in range(INDEXED_CHARS // 10)) + "the tail marker"
        w = PiSession("sess-huge", file=tmp_path / "sessions" / "s.jsonl")
        w.user(line, id="u1")
        w.user("a short one with the tail marker too", id="u2")
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [tmp_path / "sessions"])
            assert [1] == [
                capped
                for (capped,) in index.conn.execute(
                    "SELECT t.capped FROM mem_sources s JOIN mem_texts t ON t.rowid = s.text WHERE s.entry_id = 'u1'"
                )
            ]
            assert 2 == search_memory(index, "TAIL MARKER").total
            assert ["u1"] == [h.entry_id for h in search_memory(index, "log record 1 ").hits]
            hit = next(h for h in search_memory(index, "tail marker").hits if h.entry_id == "u1")
            assert line == recall(index, hit.handle, max_chars=10).text
            # Terms search sees the first INDEXED_CHARS characters only.
            assert 1 == search_memory(index, "record", match="terms").total
            assert 1 == search_memory(index, "marker", match="terms").total


class TestTermsLayout:
    def test_the_terms_index_keeps_no_positions_and_its_totals_follow_every_change(
        self, tmp_path: Path
    ) -> None:
        """mem_terms is positionless; each terms row has its length, and the totals BM25 averages
        over equal a recount after appends, a rewrite that drops sources, and a rebuild.
        """
        path = tmp_path / "sessions" / "s.jsonl"
        with SearchIndex(tmp_path / "search.db") as index:

            def recount() -> tuple[int, int]:
                return index.conn.execute(
                    "SELECT count(*), coalesce(sum(tokens), 0) FROM mem_chunk_tokens"
                ).fetchone()

            def stats() -> tuple[int, int]:
                return index.conn.execute("SELECT rows, tokens FROM mem_terms_stats").fetchone()

            w = busy_session(path, turns=3, output_lines=40)
            refresh_memory(index, [tmp_path / "sessions"])
            (sql,) = index.conn.execute("SELECT sql FROM sqlite_master WHERE name = 'mem_terms'").fetchone()
            assert "detail=none" in sql
            first = stats()
            assert first == recount() and first[0] == index_rows(index)[0] and first[1] > 0
            w.user("question 9: one more", id="u9")
            w.write(path)
            refresh_memory(index, [tmp_path / "sessions"])
            assert stats() == recount() and stats()[0] > first[0]
            busy_session(path, turns=1)  # rewritten shorter: most sources leave
            refresh_memory(index, [tmp_path / "sessions"])
            assert stats() == recount() and stats()[0] < first[0]
            rebuild_memory(index, [tmp_path / "sessions"])
            assert stats() == recount()
            path.unlink()
            refresh_memory(index, [tmp_path / "sessions"])
            assert stats() == recount() == (0, 0)

    def test_a_shorter_chunk_holding_the_word_ranks_first(self, tmp_path: Path) -> None:
        """Terms ranking without positions: a rarer word weighs more, and of two chunks holding
        the same words the shorter one scores higher, as BM25 has it.
        """
        w = PiSession("sess-1", file=tmp_path / "sessions" / "s.jsonl")
        w.user("the flaky cache " + "filler " * 60, id="u1")
        w.user("the flaky cache", id="u2")
        w.user("only flaky here", id="u3")
        for n in range(8):
            w.user(f"unrelated note {n} about the build", id=f"n{n}")
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [tmp_path / "sessions"])
            hits = {
                h.entry_id: h.score or 0.0 for h in search_memory(index, "flaky cache", match="terms").hits
            }
            assert next(iter(hits)) == "u2" and set(hits) == {"u1", "u2", "u3"}
            assert hits["u2"] > hits["u1"]  # the same words, in fewer others
