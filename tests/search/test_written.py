"""The index fed from the writer's hand-over (``update_written``) equals the index read from the files."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pbot_watch.archive.atomic import write_atomic
from pbot_watch.archive.files import ArchiveStore
from pbot_watch.archive.fresh import FreshRecords, Written
from pbot_watch.archive.marks import WrittenMarks
from pbot_watch.history.project import SessionFile
from pbot_watch.search.index import NodeTexts, SearchIndex
from pbot_watch.search.literal import literal_match
from tests.support.pi_sessions import PiSession

STEPS = st.lists(st.sampled_from(("turn", "turn", "tool", "open", "tree", "name")), min_size=2, max_size=30)


def contents(db: Path) -> tuple[list[Any], ...]:
    """Everything a query reads of the history tables, row ids left out (they may differ)."""
    conn = sqlite3.connect(db)
    conn.create_function("node_text", 2, NodeTexts(conn).unpack)
    try:
        nodes = conn.execute(
            "SELECT r.path, n.id, n.kind, n.level, n.from_, n.to_, n.ready, n.completed, n.searchable, n.capped, "
            "n.entry_ids, n.children, n.parents, n.seq, node_text(t.text, t.packed), t.text_json FROM nodes n "
            "JOIN node_texts t ON t.rowid = n.rowid JOIN records r ON r.rowid = n.record ORDER BY r.path, n.id"
        ).fetchall()
        records = conn.execute(
            "SELECT path, id, session_id, name, workspace, ino, size, mtime_ns FROM records ORDER BY path"
        ).fetchall()
        # What each literal and terms query finds, by node id: the contentless tables, probed.
        found = [
            sorted(
                row[0]
                for row in conn.execute(
                    f"SELECT n.id FROM {table} f JOIN nodes n ON n.rowid = f.rowid WHERE {table} MATCH ?",
                    (word,),
                )
            )
            for table, word in (
                ("nodes_literal", literal_match("answer")),
                ("nodes_literal", literal_match("more")),
                ("nodes_terms", "answer"),
                ("nodes_terms", "tool"),
            )
        ]
        return nodes, records, found
    finally:
        conn.close()


class Grower:
    """A session grown step by step, its record saved after each step by a store that hands over."""

    def __init__(self, tmp_path: Path) -> None:
        self.session = PiSession()
        self.state = SessionFile()
        self.fed = 0
        self.answers: list[str] = []
        self.fresh = FreshRecords()
        self.store = ArchiveStore(central=tmp_path / "archive", fresh=self.fresh)
        self.cwd = str(tmp_path / "project")
        self.n = 0

    def turns(self, count: int) -> Path:
        """``count`` turns appended, each saved; the record's path."""
        path = None
        for _ in range(count):
            path = self.step("turn")
        assert path is not None
        return path

    def step(self, what: str) -> Path | None:
        b, n = self.session, self.n
        self.n += 1
        if what == "turn":
            self.answers.append(b.turn(f"question {n}", f"answer {n} more")[1])
        elif what == "tool":
            b.user(f"run tool {n}")
            b.assistant("calling", "toolUse", tool=True)
            b.tool_result(f"tool out {n}")
            self.answers.append(b.assistant(f"answer {n}"))
        elif what == "open":
            b.user(f"open question {n}")
        elif what == "tree" and self.answers:
            b.branch_at(self.answers[n % len(self.answers)])
        elif what == "name":
            b.info(f"name {n}")
        data = b.data()
        self.state.feed(data[self.fed :])
        self.fed = len(data)
        history = self.state.history()
        if history is None:
            return None
        outcome, path = self.store.save(history, self.cwd)
        return path if outcome == "written" else None


def _ends_as_reference(tmp_path: Path, live: SearchIndex, path: Path, found: Written) -> None:
    """``live`` (``live.db``) takes the hand-over ``found`` and holds what an index built from the file does."""
    assert live.update_written(path, found)
    live.close()
    reference = SearchIndex(tmp_path / "ref.db")
    reference.update_record(path)
    reference.close()
    assert contents(tmp_path / "live.db")[0] == contents(tmp_path / "ref.db")[0]
    assert contents(tmp_path / "live.db")[2] == contents(tmp_path / "ref.db")[2]


def _names_a_few_nodes(found: Written | None) -> None:
    """The hand-over of one appended turn says what it changed against a base, and that is a few nodes."""
    assert found is not None
    assert found.base is not None
    assert found.changed is not None
    assert 0 < len(found.changed) < len(found.record["nodes"]) // 4
    assert found.delta is not None
    assert found.delta.changed == found.changed
    # Summaries follow the exchanges in the list: those of the grown branch move one place on.
    assert len(found.delta.removed | found.delta.moved) < len(found.record["nodes"]) // 3


class TestFromTheWriter:
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(steps=STEPS, taken=st.lists(st.booleans(), min_size=1, max_size=30))
    def test_hand_overs_give_the_index_the_files_give(
        self, tmp_path_factory: Any, steps: list[str], taken: list[bool]
    ) -> None:
        """Appends, /tree moves, renames; hand-overs taken at once or left to merge: after each
        take the index holds what an index made from the record files holds."""
        tmp_path = tmp_path_factory.mktemp("written")
        grower = Grower(tmp_path)
        live = SearchIndex(tmp_path / "live.db")
        written: set[Path] = set()
        for n, what in enumerate(steps):
            path = grower.step(what)
            if path is not None:
                written.add(path)
            if not taken[n % len(taken)] and n < len(steps) - 1:
                continue  # the listener is behind: writes pile up and merge
            for record in sorted(written):
                found = grower.fresh.take(record)
                assert found is not None
                live.update_written(record, found)
            written.clear()
            reference = SearchIndex(tmp_path / f"ref{n}.db")
            for record in sorted((tmp_path / "archive").glob("*.json")):
                reference.update_record(record)
            reference.close()
            assert contents(tmp_path / "live.db")[0] == contents(tmp_path / f"ref{n}.db")[0]
            assert contents(tmp_path / "live.db")[2] == contents(tmp_path / f"ref{n}.db")[2]
        live.close()

    def test_a_file_rewritten_since_is_read(self, tmp_path: Path) -> None:
        """Another tool rewrote the record after our write: its content is indexed, not ours."""
        grower = Grower(tmp_path)
        live = SearchIndex(tmp_path / "live.db")
        for _ in range(3):
            path = grower.step("turn")
        assert path is not None
        found = grower.fresh.take(path)
        assert found is not None
        live.update_written(path, found)
        path = grower.step("turn")
        assert path is not None
        record = json.loads(path.read_text())
        record["nodes"][0]["text"] = "rewritten by another tool"
        write_atomic(path, json.dumps(record).encode())
        os.utime(path, ns=(1, 1))
        found = grower.fresh.take(path)
        assert found is not None
        assert live.update_written(path, found)
        texts = [row[-2] for row in contents(tmp_path / "live.db")[0]]
        assert "rewritten by another tool" in texts
        live.close()

    def test_an_append_rewrites_only_its_nodes(self, tmp_path: Path) -> None:
        """The hand-over of an append names only the nodes it changed, not the whole record."""
        grower = Grower(tmp_path)
        grower.fresh.take(grower.turns(40))
        path = grower.turns(1)
        _names_a_few_nodes(grower.fresh.take(path))

    @pytest.mark.parametrize("marked", [False, True])
    def test_the_first_write_after_its_state_was_dropped_names_what_changed(
        self, tmp_path: Path, marked: bool
    ) -> None:
        """The service drops what it holds of the files a catch-up read (``forget_cached``); the
        next append to one names its change against the record it reads back (the whole record
        was handed over, and compared node by node in the index, before), and the index ends equal."""
        marks = WrittenMarks(tmp_path / "marks") if marked else None
        grower = Grower(tmp_path)
        grower.store.marks = marks
        live = SearchIndex(tmp_path / "live.db")
        path = grower.turns(40)
        found = grower.fresh.take(path)
        assert found is not None
        live.update_written(path, found)
        grower.store.forget_cached()
        path = grower.turns(1)
        found = grower.fresh.take(path)
        _names_a_few_nodes(found)
        assert found is not None
        assert grower.store.encoder.from_file == (
            len(found.record["nodes"]) - len(found.changed or ()) if marked else 0
        )
        _ends_as_reference(tmp_path, live, path, found)

    @pytest.mark.parametrize("marked", [False, True])
    def test_the_first_write_after_a_start_names_what_changed_since_the_file(
        self, tmp_path: Path, marked: bool
    ) -> None:
        """A new service (its store knows no write yet) tells the change against the record it
        read from disk (its nodes' JSON kept when it is marked as ours): the index, which held
        that file, rewrites only those nodes and ends equal."""
        marks = WrittenMarks(tmp_path / "marks") if marked else None
        grower = Grower(tmp_path)
        grower.store.marks = marks
        live = SearchIndex(tmp_path / "live.db")
        live.update_record(grower.turns(40))
        grower.fresh = FreshRecords()
        grower.store = ArchiveStore(
            central=tmp_path / "archive", fresh=grower.fresh, marks=marks
        )  # restarted
        path = grower.turns(1)
        found = grower.fresh.take(path)
        _names_a_few_nodes(found)
        assert grower.store.encoder.from_file == (
            len(found.record["nodes"]) - len(found.changed) if marked else 0
        )
        assert found is not None
        _ends_as_reference(tmp_path, live, path, found)


def test_writes_nobody_took_are_kept_within_a_byte_bound(tmp_path: Path) -> None:
    """A listener that falls behind (a first run's catch-up) costs reads of files, not memory:
    the oldest writes go once their bytes pass the bound, the newest is kept whatever its size."""
    growers = [Grower(tmp_path) for _ in range(3)]
    for n, grower in enumerate(growers):
        grower.session = PiSession(session_id=f"01a228f5-0000-7000-8000-00000000000{n + 1}")
    sizes = [growers[0].turns(30).stat().st_size, growers[1].turns(20).stat().st_size]
    fresh = FreshRecords(kept_bytes=sizes[1] + 100)
    for grower in growers:
        grower.fresh = fresh
        grower.store = ArchiveStore(central=tmp_path / "archive", fresh=fresh)
    paths = [grower.turns(1) for grower in growers]
    assert fresh.take(paths[0]) is None
    newest = fresh.take(paths[2])
    assert newest is not None
    assert newest.size == paths[2].stat().st_size
    assert fresh.take(paths[1]) is None

    alone = FreshRecords(kept_bytes=1)
    growers[0].store = ArchiveStore(central=tmp_path / "archive", fresh=alone)
    growers[0].fresh = alone
    path = growers[0].turns(1)
    assert alone.take(path) is not None
