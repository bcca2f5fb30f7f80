"""The service keeps cue ledgers from the entries it reads: a new Pi child loads them and gives the file's cues."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pbot_watch.archive.files import ArchiveStore
from pbot_watch.archive.stamp import FileStamp
from pbot_watch.indexer import Indexer
from pbot_watch.memory.cue_follow import FollowedCues, ledger_store
from pbot_watch.memory.cue_listener import CueLedgerFollower
from pbot_watch.memory.cues import ledger_cues
from tests.memory.test_cue_follow import entries_of, session_with_work
from tests.memory.test_cues import random_session
from tests.memory.work import Work, cues_of


def service(base: Path, saved_from: int = 0) -> tuple[CueLedgerFollower, Indexer]:
    """The service's reading side: the real indexer handing what it parses to the ledger follower."""
    follower = CueLedgerFollower(base / "state", saved_from=saved_from)
    return follower, Indexer(ArchiveStore(central=base / "archive"), on_entries=follower)


def read_all(indexer: Indexer, path: Path, budget: int | None = None) -> None:
    while indexer.read(path, budget).more:
        pass


def child(base: Path) -> FollowedCues:
    """A new Pi child's ledgers (``pi serve``): the saved ones of the state directory."""
    return FollowedCues(ledger_store(base / "state"), saved_from=0)


def leaves_of(path: Path, rng: random.Random) -> list[str | None]:
    """The current leaf, every compaction, and a few entries anywhere (a /tree move's new leaf)."""
    _, entries = entries_of(path)
    ids = [str(e["id"]) for e in entries if isinstance(e.get("id"), str)]
    compactions = [str(e["id"]) for e in entries if e.get("type") == "compaction"]
    return [None, *compactions, *rng.sample(ids, min(3, len(ids)))]


def assert_same_cues(ledgers: FollowedCues, path: Path, leaves: list[str | None]) -> None:
    for leaf in leaves:
        assert ledger_cues(ledgers.ledger(path), leaf=leaf, context_window=4000) == cues_of(
            path, leaf=leaf, context_window=4000
        )


class TestServicePreparedLedgers:
    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(seed=st.integers(0, 10_000), data=st.data())
    def test_a_child_loading_the_services_ledger_gives_the_cues_of_the_file(
        self, tmp_path_factory: pytest.TempPathFactory, seed: int, data: st.DataObject
    ) -> None:
        """Appended in any pieces, read with any budget, the service's state evicted or not: the file's cues.

        Sessions with compactions, recalls, /tree moves and their summaries; every compaction
        and some entries anywhere as the leaf. Saved after every read, the ledger leaves the
        child nothing to read.
        """
        base = tmp_path_factory.mktemp("service")
        whole = base / "whole.jsonl"
        random_session(whole, seed, moves=True)
        raw = whole.read_bytes()
        path = base / "sessions" / "s.jsonl"
        path.parent.mkdir()
        path.touch()
        follower, indexer = service(base)
        save_every = data.draw(st.sampled_from([1, 300, 1 << 20]))
        follower.cues.save_every = save_every
        written = 0
        for cut in [*sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=8))), len(raw)]:
            with path.open("ab") as out:
                out.write(raw[written:cut])
            written = cut
            if data.draw(st.booleans()):
                indexer.forget(path)  # evicted: the service reads the file from its start again
            read_all(indexer, path, data.draw(st.none() | st.integers(1, len(raw))))
        follower.close()
        pi = child(base)
        assert_same_cues(pi, path, leaves_of(path, random.Random(seed)))
        if save_every == 1:
            assert pi.bytes_read == 0
        assert follower.cues.bytes_read == 0  # every byte came from the service's own parse

    def test_the_child_reads_only_what_was_appended_after_the_saved_ledger(self, tmp_path: Path) -> None:
        path = tmp_path / "sessions" / "s.jsonl"
        work = session_with_work(path)
        follower, indexer = service(tmp_path)
        read_all(indexer, path)
        before = path.stat().st_size
        work.run("npm run build", "error TS2304: Cannot find name 'x'.\n", error=True)
        work.compact()
        grown = path.stat().st_size - before
        pi = child(tmp_path)
        assert ledger_cues(pi.ledger(path)) == cues_of(path)
        assert pi.bytes_read == grown
        read_all(indexer, path)  # the service reads the append too: its ledger follows
        assert follower.cues.bytes_read == 0
        follower.close()
        assert ledger_cues(child(tmp_path).ledger(path)) == cues_of(path)

    @pytest.mark.parametrize("how", ["replaced", "rewritten in place"])
    def test_a_rewritten_file_gets_a_new_ledger(self, tmp_path: Path, how: str) -> None:
        path = tmp_path / "sessions" / "s.jsonl"
        session_with_work(path)
        follower, indexer = service(tmp_path)
        read_all(indexer, path)
        other = tmp_path / "other.jsonl"
        work = Work(other, session="sess-other")
        work.run("cargo test", "test result: FAILED\n", error=True)
        work.compact()
        if how == "replaced":
            os.replace(other, path)
        else:
            path.write_bytes(other.read_bytes())
        read_all(indexer, path)
        follower.close()
        state = ledger_cues(child(tmp_path).ledger(path))
        assert state == cues_of(path)
        assert state.session_id == "sess-other"

    def test_a_ledger_saved_before_a_restart_is_taken_up_where_it_stopped(self, tmp_path: Path) -> None:
        """A new service reading the file whole skips what the saved ledger holds; one resuming past it
        reads from the ledger's own cursor, once."""
        path = tmp_path / "sessions" / "s.jsonl"
        work = session_with_work(path)
        first, indexer = service(tmp_path)
        read_all(indexer, path)
        first.close()
        work.run("ls", "a\nb\n")
        second, indexer = service(tmp_path)
        read_all(indexer, path)  # from the start (a service holding no state of the file)
        assert second.cues.bytes_read == 0
        assert second.cues.taken == 1
        second.close()
        saved = path.stat().st_size

        work.run("ls -la", "total 0\n")  # read by a service that saved no ledger of it (stopped)
        resumed = Indexer(ArchiveStore(central=tmp_path / "archive"))
        read_all(resumed, path)  # where the service's cursor stands after a restart
        work.compact()
        third = CueLedgerFollower(tmp_path / "state", saved_from=0)
        resumed.on_entries = third
        read_all(resumed, path)  # entries from past the saved ledger: it reads from its own cursor
        assert third.cues.bytes_read == path.stat().st_size - saved
        third.close()
        pi = child(tmp_path)
        assert ledger_cues(pi.ledger(path)) == cues_of(path)
        assert pi.bytes_read == 0

    def test_small_files_are_left_to_the_child(self, tmp_path: Path) -> None:
        path = tmp_path / "sessions" / "s.jsonl"
        session_with_work(path)
        follower, indexer = service(tmp_path, saved_from=16 << 20)
        read_all(indexer, path)
        follower.close()
        assert follower.cues.taken == 0
        assert not ledger_store(tmp_path / "state").exists()

    def test_stale_names_the_big_files_without_a_current_ledger_and_sync_saves_it(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "sessions" / "s.jsonl"
        session_with_work(path)
        follower = CueLedgerFollower(tmp_path / "state", saved_from=0)
        st = path.stat()
        stamps = {path: FileStamp(st.st_ino, st.st_size, st.st_mtime_ns)}
        assert follower.stale(stamps) == [path]
        assert follower.sync(path) == st.st_size
        assert follower.stale(stamps) == []
        (saved,) = ledger_store(tmp_path / "state").iterdir()
        saved.write_bytes(saved.read_bytes()[:-5])  # cut short
        assert follower.stale(stamps) == []  # its head still reads: the child refuses the body
        saved.write_bytes(b"garbage")
        assert follower.stale(stamps) == [path]
        assert ledger_cues(child(tmp_path).ledger(path)) == cues_of(path)

    def test_a_file_gone_before_the_ledger_reads_it_is_no_error(self, tmp_path: Path) -> None:
        follower = CueLedgerFollower(tmp_path / "state", saved_from=0)
        assert follower.sync(tmp_path / "gone.jsonl") == 0
