"""A tallied needle's totals and pages equal a full count, whatever happened to the session files since.

A literal search of a needle with many candidate texts keeps a tally (``memory/tally.py``): the
texts that hold it, kept by the writer as texts become visible. These tests tally every needle
(``TALLY_MIN`` lowered), drive session files through appends, ``/tree`` moves, compactions, forks,
rewrites and truncations, and compare each search with a count made from scratch: every source
on each file's branch walked from its entries, its whole text read and tested line by line.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pbot_watch.memory import query, stamps, tally
from pbot_watch.memory.handles import make_handle
from pbot_watch.memory.index import source_text, sync_memory_file
from pbot_watch.memory.query import _CONTEXT_ORDER, _desc, _max_rowid, _walked_scope, search_memory
from pbot_watch.search import tallies
from pbot_watch.search.index import SearchIndex
from pbot_watch.search.pages import MAX_MEMORY_PAGE
from tests.memory.test_kept_scope import STEPS, Corpus, Step
from tests.support.pi_sessions import PiSession

NEEDLES = ["econnreset", "timeout after", "question 1", "npm"]
"""Needles of more than three characters (the texts are read to confirm) and one of three (the index is exact)."""


def counted(index: SearchIndex, needle: str) -> list[str]:
    """The handles of every hit of ``needle`` in a literal search's order, counted from scratch."""
    snapshot = _max_rowid(index)
    rowids, scope = _walked_scope(index, None, None, snapshot)
    rows = {
        rowid: (session_id, entry_id, part, stamps.decode(stamp, stamp_text))
        for rowid, session_id, entry_id, part, stamp, stamp_text in index.conn.execute(
            "SELECT s.rowid, f.session_id, s.entry_id, s.part, s.stamp, s.stamp_text FROM mem_sources s "
            "JOIN mem_files f ON f.id = s.file"
        )
    }
    hits = [
        rowid
        for rowid in rowids
        if any(needle in line.lower() for line in source_text(index.conn, rowid).split("\n"))
    ]
    hits.sort(key=lambda r: (_CONTEXT_ORDER[scope.labels[r]], _desc(rows[r][3]), -r))
    return [make_handle(*rows[r][:3]) for r in hits]


def check(index: SearchIndex, needle: str) -> None:
    expected = counted(index, needle)
    result = search_memory(index, needle, limit=MAX_MEMORY_PAGE)
    assert result.total == len(expected), needle
    assert [hit.handle for hit in result.hits] == expected[:MAX_MEMORY_PAGE], needle
    if len(expected) > 3:  # a later page of the same order
        second = search_memory(
            index, needle, limit=2, after=search_memory(index, needle, limit=2).next_cursor
        )
        assert [hit.handle for hit in second.hits] == expected[2:4], needle


def asked(tmp_path: Path, exchanges: int) -> tuple[Corpus, PiSession]:
    """One session of ``exchanges`` questions and answers, each answer holding "retry the npm test"."""
    corpus = Corpus(tmp_path / "sessions")
    session = corpus.sessions[0][1]
    for n in range(exchanges):
        session.user(f"question {n} about ECONNRESET")
        session.assistant(f"answer {n}: retry the npm test")
    return corpus, session


@pytest.fixture
def tally_all(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every needle with a candidate is tallied (the corpus is small)."""
    monkeypatch.setattr(query, "TALLY_MIN", 1)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_a_tally_equals_a_full_count_after_any_changes(
    tmp_path_factory: Any, tally_all: None, steps: list[Step]
) -> None:
    root = tmp_path_factory.mktemp("tally")
    corpus = Corpus(root / "sessions")
    with SearchIndex(root / "search.db") as index:

        def same() -> None:
            for needle in NEEDLES:
                check(index, needle)

        corpus.play(index, steps, same)
        if any(counted(index, needle) for needle in NEEDLES):
            assert index.conn.execute("SELECT 1 FROM mem_tallies").fetchone(), "searches were tallied"


def test_a_tally_is_read_instead_of_the_texts(tmp_path: Path, tally_all: None) -> None:
    corpus, session = asked(tmp_path, 5)
    with SearchIndex(tmp_path / "search.db") as index:
        corpus.sync(index)
        assert search_memory(index, "retry the").total == 5
        found = tally.tallied(index.conn, "retry the")
        assert found is not None
        assert found.total == 5
        held = {t for (t,) in index.conn.execute(tally.TALLIED_TEXTS, (found.ident,))}
        assert len(held) == 5
        # An append the writer tests against the tally; no text read again to count it.
        session.assistant("answer 5: retry the npm test")
        corpus.sync(index)
        assert len({t for (t,) in index.conn.execute(tally.TALLIED_TEXTS, (found.ident,))}) == 6
        again = tally.tallied(index.conn, "retry the")
        assert again is not None
        assert again.total == 6
        check(index, "retry the")


def test_a_search_does_not_wait_for_the_write_lock_to_tally(tmp_path: Path, tally_all: None) -> None:
    corpus = Corpus(tmp_path / "sessions")
    session = corpus.sessions[0][1]
    session.user("question about ECONNRESET")
    session.assistant("answer: retry the npm test")
    with SearchIndex(tmp_path / "search.db") as index:
        corpus.sync(index)
        writer = sqlite3.connect(tmp_path / "search.db", isolation_level=None)
        try:
            writer.execute("BEGIN IMMEDIATE")  # the service is writing
            result = search_memory(index, "npm test")
            assert result.total == 1
            assert tally.tallied(index.conn, "npm test") is None
            writer.execute("ROLLBACK")
        finally:
            writer.close()
        assert search_memory(index, "npm test").total == 1
        assert tally.tallied(index.conn, "npm test") is not None


def test_tallies_are_bounded_least_recently_used_first(
    tmp_path: Path, tally_all: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tallies, "MAX_TALLIES", 3)
    corpus = Corpus(tmp_path / "sessions")
    session = corpus.sessions[0][1]
    for n in range(5):
        session.user(f"question {n}0 about ECONNRESET")
    with SearchIndex(tmp_path / "search.db") as index:
        corpus.sync(index)
        for n in range(5):
            assert search_memory(index, f"question {n}0").total == 1
        kept = [n for (n,) in index.conn.execute("SELECT needle FROM mem_tallies ORDER BY id")]
        assert kept == ["question 20", "question 30", "question 40"]
        assert not index.conn.execute(
            "SELECT 1 FROM mem_tally_texts WHERE tally NOT IN (SELECT id FROM mem_tallies)"
        ).fetchone()


def test_a_compaction_another_process_writes_relabels_the_next_search(
    tmp_path: Path, tally_all: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(query, "WALK_FROM", 1)  # the page walked, its boundaries kept between searches
    corpus, session = asked(tmp_path, 6)
    with SearchIndex(tmp_path / "search.db") as reader, SearchIndex(tmp_path / "search.db") as writer:
        corpus.sync(writer)
        assert {hit.context for hit in search_memory(reader, "retry the").hits} == {"retained"}
        session.compaction(corpus.ids(session)[6])
        corpus.sync(writer)
        check(reader, "retry the")
        assert {hit.context for hit in search_memory(reader, "retry the").hits} == {"historical", "retained"}


def test_the_writer_tests_each_new_text_against_every_tally_as_a_search_would(
    tmp_path: Path, tally_all: None
) -> None:
    corpus = Corpus(tmp_path / "sessions")
    session = corpus.sessions[0][1]
    session.user("Ärger mit ECONNRESET")
    session.assistant("ärger: Retry The npm test")
    needles = ["ärger", "econnreset", "retry the", "npm"]
    with SearchIndex(tmp_path / "search.db") as index:
        corpus.sync(index)
        for needle in needles:
            check(index, needle)  # each tallied
        assert len(index.conn.execute("SELECT id FROM mem_tallies").fetchall()) == len(needles)
        session.user("ÄRGER again, no reset")  # upper case outside ASCII: lower-cased by decoding
        session.assistant("RETRY THE NPM TEST")
        session.user("nothing of the kind")
        corpus.sync(index)
        for needle in needles:
            check(index, needle)


def test_every_character_that_lower_cases_into_ascii_is_named() -> None:
    """``ascii_stays`` looks for these alone: another would let an ASCII needle be missed."""
    found = [
        ch
        for ch in map(chr, range(0x80, sys.maxunicode + 1))
        if not 0xD800 <= ord(ch) < 0xE000 and any(c.isascii() for c in ch.lower())
    ]
    assert tuple(found) == tallies.LOWERS_INTO_ASCII


LOWERING = "abkiI K\u212a\u0130\u0307ıİßΣσς配置Ä\ud800."
"""Characters whose lower case is ASCII or is not one character, ASCII's, others, a lone surrogate."""


@settings(max_examples=300, deadline=None)
@given(text=st.text(LOWERING, max_size=12), needle=st.text(LOWERING, min_size=1, max_size=3))
def test_a_text_holds_a_needle_as_a_lower_cased_line_would(text: str, needle: str) -> None:
    """``holds``, and the writer's test of several needles at once, say what lower-casing the text says."""
    needles = [needle.lower(), needle.lower() + "k", "\u00e4" + needle.lower()]
    raw = text.encode("utf-8", "surrogatepass")
    expected = {ident for ident, each in enumerate(needles, 1) if each in text.lower()}
    assert {
        ident
        for ident, each in enumerate(needles, 1)
        if tallies.holds(raw, each, each.encode("utf-8", "surrogatepass"))
    } == expected
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE mem_tallies(id INTEGER PRIMARY KEY, needle TEXT NOT NULL)")
    storable = [each for each in dict.fromkeys(needles) if "\ud800" not in each]  # SQLite takes UTF-8 only
    conn.executemany("INSERT INTO mem_tallies(id, needle) VALUES (?, ?)", enumerate(storable, 1))
    writer = tally.TallyWriter(conn)
    writer.visible_bytes(7, raw)
    held = {
        conn.execute("SELECT needle FROM mem_tallies WHERE id = ?", (ident,)).fetchone()[0]
        for ident, _ in writer.rows
    }
    assert held == {needles[ident - 1] for ident in expected} & set(storable)


@pytest.mark.parametrize("moments", [("version",), ("read",), ("version", "read")])
def test_a_tally_registered_after_a_writer_committed_holds_what_it_wrote(
    tmp_path: Path, tally_all: None, moments: tuple[str, ...]
) -> None:
    """The service appends (and forks) while a search runs: the tally that search registers holds
    the texts written since, not only those up to its snapshot or those it read.

    The writer commits as the search reads the database's version (after its snapshot: the
    search reads these sources but does not show them), or as it reads the candidates (then the
    tally is completed in its write transaction), or both.
    """
    corpus, session = asked(tmp_path, 4)
    with SearchIndex(tmp_path / "search.db") as index, SearchIndex(tmp_path / "search.db") as writer:
        corpus.sync(index)
        armed: list[str] = []
        written: list[str] = []

        def traced(statement: str) -> None:
            if statement.startswith("BEGIN"):  # registering: the writer would wait for it
                moments_left.clear()
            elif statement.startswith("PRAGMA data_version") and "version" in moments_left:
                moments_left.remove("version")
                armed.append(statement)
            elif "WHERE v.text IN (" in statement and "read" in moments_left:
                moments_left.remove("read")
                armed.append(statement)

        def midway() -> int:
            if armed:
                armed.clear()
                session.assistant(f"answer {len(written)}: retry the npm test again")
                corpus.new_session(session).user("a forked retry the npm test")
                corpus.sync(writer)
                written.append("written")
            return 0

        for needle in ("retry the", "npm"):  # the texts read to confirm, and the index exact
            written.clear()
            moments_left = list(moments)
            index.conn.set_trace_callback(traced)
            index.conn.set_progress_handler(midway, 1)
            try:
                search_memory(index, needle)
            finally:
                index.conn.set_trace_callback(None)
                index.conn.set_progress_handler(None, 0)
            assert len(written) == len(moments), "the writer committed during the search"
            assert tally.tallied(index.conn, needle) is not None
            check(index, needle)


def test_a_needle_with_a_lone_surrogate_is_counted_never_tallied(tmp_path: Path, tally_all: None) -> None:
    """A query's lone surrogate (JSON's ``\\ud800``, as an MCP client may send) cannot be a
    tally's key in SQLite: such a needle is counted from the texts every time, as exactly."""
    session = PiSession(cwd=str(tmp_path))
    for n in range(5):
        session.turn(f"question {n} ab\ud800cd", f"answer {n}")
    path = tmp_path / "sessions" / "s.jsonl"
    path.parent.mkdir(parents=True)
    # As Node's JSON.stringify writes a lone surrogate: escaped.
    path.write_bytes(b"".join(json.dumps(entry).encode() + b"\n" for entry in session.lines()))
    with SearchIndex(tmp_path / "search.db") as index:
        sync_memory_file(index, path)
        for _ in range(2):
            result = search_memory(index, "b\ud800c")
            assert result.total == 5
            assert "ab\ud800cd" in result.hits[0].snippet
        assert tally.tallied(index.conn, "b\ud800c") is None
        assert not index.conn.execute("SELECT 1 FROM mem_tallies").fetchone()
        tally.forget_tally(index.conn, "b\ud800c")  # nothing to drop, and no error
