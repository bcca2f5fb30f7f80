"""The history index's literal search without trigram positions: confirmed from the texts, common needles tallied.

Every answer is compared with pbot's own scan of the records (``tests/search/archive.py``), as
the writers change them under a tally: a tally that missed a node a writer added, or kept one
whose text changed, would give another total or page.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pbot_watch.search import literal
from pbot_watch.search.index import RecordFolder, SearchIndex
from pbot_watch.search.queries import search_history
from tests.search.archive import exchange, load_records, pbot_search, write_record
from tests.search.test_history_search import plain

NEEDLES = ("needle", "edle n", "ÇA VA", "σς", "北京東", "abc")


@pytest.fixture
def tally_all(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every needle with a candidate is tallied, so the writers' side is what answers."""
    monkeypatch.setattr(literal, "TALLY_MIN", 1)


def session(folder: Path, name: str, texts: list[str]) -> Path:
    """Write session ``name``'s record of these exchange texts; its path."""
    branch = [
        exchange(f"{name}e{i}", t, f"2026-11-{1 + i % 27:02d}T00:00:{i % 60:02d}.000Z")
        for i, t in enumerate(texts)
    ]
    record = write_record(folder, name, name.upper(), [branch], summaries={1: f"summary of {texts[0]}"})
    return folder / f"{record['id']}.json"


def same_as_pbot(index: SearchIndex, folder: Path, needle: str) -> None:
    index.update_from_archive([RecordFolder(folder, None)])
    records = load_records(folder)
    for offset in (0, 3):
        for session_id in (None, "s1"):
            expected = pbot_search(records, needle, session_id=session_id, offset=offset, limit=3)
            found = search_history(index, needle, session_id=session_id, offset=offset, limit=3)
            assert expected == plain(found), (needle, offset, session_id)


def tallies(index: SearchIndex) -> dict[str, int]:
    return dict(
        index.conn.execute(
            "SELECT t.needle, count(n.node) FROM node_tallies t LEFT JOIN node_tally_nodes n ON n.tally = t.id "
            "GROUP BY t.id"
        )
    )


class TestTallies:
    def test_a_tally_follows_every_write(self, tmp_path: Path, tally_all: None) -> None:
        """Added, changed and removed records keep every tallied needle's hits pbot's."""
        folder = tmp_path / "archive"
        session(folder, "s1", ["a needle here", "no match", "NEEDLE in caps"])
        s2 = session(folder, "s2", ["needle again", "ça va bien"])
        with SearchIndex(tmp_path / "search.db") as index:
            for needle in NEEDLES:
                same_as_pbot(index, folder, needle)
            assert {"needle", "ça va"} <= set(tallies(index))  # "edle n": no candidate yet
            session(folder, "s3", ["one more needle", "edle nothing", "Ça va?"])  # a record comes
            for needle in NEEDLES:
                same_as_pbot(index, folder, needle)
            session(folder, "s1", ["the needle went", "no match", "nothing now"])  # a text changes
            for needle in NEEDLES:
                same_as_pbot(index, folder, needle)
            s2.unlink()  # a record goes
            for needle in NEEDLES:
                same_as_pbot(index, folder, needle)
            assert tallies(index)["needle"] == search_history(index, "needle").total  # no capped node here

    def test_a_rebuild_fills_the_tallies_again(self, tmp_path: Path, tally_all: None) -> None:
        folder = tmp_path / "archive"
        session(folder, "s1", ["a needle here", "needle two"])
        with SearchIndex(tmp_path / "search.db") as index:
            same_as_pbot(index, folder, "needle")
            before = tallies(index)
            index.rebuild([RecordFolder(folder, None)])
            assert before == tallies(index)
            same_as_pbot(index, folder, "needle")

    def test_no_tally_is_kept_from_a_read_older_than_a_write(self, tmp_path: Path, tally_all: None) -> None:
        """A node text written between the read of the candidates and the tally would be missing from it."""
        folder = tmp_path / "archive"
        session(folder, "s1", ["a needle here"])
        with SearchIndex(tmp_path / "search.db") as index:
            index.update_from_archive([RecordFolder(folder, None)])
            seen = literal._generation(index.conn)
            session(folder, "s2", ["another needle"])
            index.update_from_archive([RecordFolder(folder, None)])
            assert literal._register(index.conn, "needle", {1}, seen) is None
            assert tallies(index) == {}
            same_as_pbot(index, folder, "needle")
            assert set(tallies(index)) == {"needle"}

    def test_a_search_while_the_service_writes_answers_without_a_tally(
        self, tmp_path: Path, tally_all: None
    ) -> None:
        """The write lock is held elsewhere: the search confirms, answers pbot's hits, and keeps nothing."""
        folder = tmp_path / "archive"
        session(folder, "s1", ["a needle here", "needle two", "none"])
        with SearchIndex(tmp_path / "search.db") as index:
            index.update_from_archive([RecordFolder(folder, None)])
            writer = sqlite3.connect(tmp_path / "search.db", isolation_level=None)
            writer.execute("BEGIN IMMEDIATE")
            try:
                records = load_records(folder)
                assert pbot_search(records, "needle") == plain(search_history(index, "needle"))
                assert tallies(index) == {}
            finally:
                writer.execute("ROLLBACK")
                writer.close()

    def test_the_tallies_are_bounded(
        self, tmp_path: Path, tally_all: None, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from pbot_watch.search import tallies as shared

        monkeypatch.setattr(shared, "MAX_TALLIES", 2)
        folder = tmp_path / "archive"
        session(folder, "s1", ["alpha beta gamma delta"])
        with SearchIndex(tmp_path / "search.db") as index:
            for needle in ("alpha", "beta", "gamma", "delta"):
                same_as_pbot(index, folder, needle)
            assert len(tallies(index)) == 2


ALPHABET = "abcAB 北京😀ΣσςİiÇç.+"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(["s1", "s2", "s3"]), st.lists(st.text(ALPHABET, max_size=12), max_size=4)),
        min_size=1,
        max_size=5,
    ),
    needle=st.text(ALPHABET, min_size=3, max_size=5),
)
@pytest.mark.slow
def test_tallied_search_is_pbots_after_random_writes(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, steps: list[Any], needle: str
) -> None:
    """Random records written, rewritten and emptied after the needle was tallied: pbot's answer each time."""
    monkeypatch.setattr(literal, "TALLY_MIN", 1)
    base = tmp_path_factory.mktemp("tallied")
    folder = base / "archive"
    session(folder, "s1", [f"x{needle}y", needle.upper()])
    with SearchIndex(base / "search.db") as index:
        same_as_pbot(index, folder, needle)
        for name, texts in steps:
            path = session(folder, name, texts or ["gone"])
            if not texts:
                path.unlink()
            same_as_pbot(index, folder, needle)
