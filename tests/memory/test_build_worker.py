"""Raw memory built in the worker process: the same rows as stored inline, and nothing stops the other files."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pbot_watch.memory.build import WORKERS, MemoryBuilder, build_and_store, build_file, store_file
from pbot_watch.memory.index import dictionaries, held_text_keys, refresh_memory
from pbot_watch.memory.listener import BUILD_FROM, MemoryFollower
from pbot_watch.memory.query import search_memory
from pbot_watch.search.codec import TRAIN_TEXTS
from pbot_watch.search.index import SearchIndex
from pbot_watch.service.state import StateStore
from pbot_watch.service.tail import ArchiveWriter, Tailer
from tests.memory.test_index import busy_session, memory_state
from tests.service.test_odd_files import pasted_log
from tests.support.pi_sessions import PiSession
from tests.support.service import ServiceProcess, wait_for


def forked_session(path: Path) -> None:
    """A session with a fork, a call answered in a later read, a call never answered, a compaction."""
    w = PiSession("sess-fork", file=path)
    w.user("first question", id="u1")
    w.assistant(None, calls=[("c1", "bash", {"command": "ls"}), ("c2", "read", {"path": "a.py"})], id="a1")
    w.tool_result("a.py\nb.py\n", call_id="c1", name="bash", id="t1")
    w.assistant("two files", id="r1")
    w.user("a branch that was left", id="u2", parent="r1")
    w.user("the branch kept", id="u3", parent="r1")
    w.assistant("kept answer with the secret sk-ant-api03-" + "x" * 40, id="r3")


def stored_by_worker(index: SearchIndex, path: Path) -> None:
    """What the service does with a whole file: built in the worker's function, stored here."""
    build = build_file(path, *dictionaries(index))
    assert build.outcome == "built"
    store_file(index, build)


class TestSameRows:
    @pytest.mark.parametrize("make", [forked_session, lambda p: busy_session(p, turns=400)])
    def test_worker_build_equals_the_inline_build(self, tmp_path: Path, make: object) -> None:
        """Sources, texts, entries, calls, the branch and both FTS vocabularies are the same.

        The busy session has more texts than ``TRAIN_TEXTS``: a dictionary is trained midway in both.
        """
        path = tmp_path / "sessions" / "s.jsonl"
        make(path)  # type: ignore[operator]
        with SearchIndex(tmp_path / "inline.db") as index:
            refresh_memory(index, [path.parent])
            inline = memory_state(index)
            inline_hits = [(h.label, h.line) for h in search_memory(index, "step 3").hits]
        with SearchIndex(tmp_path / "worker.db") as index:
            stored_by_worker(index, path)
            assert memory_state(index) == inline
            assert [(h.label, h.line) for h in search_memory(index, "step 3").hits] == inline_hits
            assert not refresh_memory(index, [path.parent])  # the cursor is current: nothing to read

    def test_the_worker_stores_what_it_built_itself(self, tmp_path: Path) -> None:
        """``build_and_store`` (the worker's job) writes the inline build's rows and carries none back."""
        path = tmp_path / "sessions" / "s.jsonl"
        busy_session(path, turns=400)
        with SearchIndex(tmp_path / "inline.db") as index:
            refresh_memory(index, [path.parent])
            inline = memory_state(index)
        state = tmp_path / "state"
        build = build_and_store(path, state)
        assert build.stored and not build.sources and not build.links
        with SearchIndex(SearchIndex.default_path(state)) as index:
            assert memory_state(index) == inline

    def test_texts_the_index_holds_get_no_rows_and_the_store_is_the_same(self, tmp_path: Path) -> None:
        """A copy of a stored session (Pi's fork writes one): its texts are held, so the worker makes
        no rows for them, and what both files store equals the inline build of both."""
        first, copy = tmp_path / "sessions" / "a.jsonl", tmp_path / "sessions" / "b.jsonl"
        w = busy_session(copy, turns=60)
        first.write_bytes(copy.read_bytes())
        w.user("only in the copy", id="u-copy")
        with SearchIndex(tmp_path / "inline.db") as index:
            refresh_memory(index, [first.parent])
            inline = memory_state(index)
        state = tmp_path / "state"
        assert build_and_store(first, state).stored
        with SearchIndex(SearchIndex.default_path(state)) as index:
            build = build_file(copy, *dictionaries(index), held=lambda keys: held_text_keys(index, keys))
            [new] = [source for source in build.sources if source.rows is not None]
            assert new.text == "only in the copy"
            assert len(build.sources) > 100
            store_file(index, build)
            assert memory_state(index) == inline

    def test_rows_the_worker_cannot_store_come_back_to_the_service(self, tmp_path: Path) -> None:
        """A failed insert (here a trigger that aborts, as a full disk would) loses nothing: the
        rows come back, and the service stores them once the index takes writes again.
        """
        path = tmp_path / "sessions" / "s.jsonl"
        forked_session(path)
        with SearchIndex(tmp_path / "inline.db") as index:
            refresh_memory(index, [path.parent])
            inline = memory_state(index)
        state = tmp_path / "state"
        db = SearchIndex.default_path(state)
        with SearchIndex(db) as index:
            dictionaries(index)  # the memory tables
            index.conn.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON mem_sources BEGIN SELECT RAISE(ABORT, 'no room'); END"
            )
        build = build_and_store(path, state)
        assert not build.stored and build.sources
        with SearchIndex(db) as index:
            assert memory_state(index)["sources"] == []
            index.conn.execute("DROP TRIGGER refuse")
            store_file(index, build)
            assert memory_state(index) == inline

    def test_a_second_file_packs_with_the_trained_dictionary(self, tmp_path: Path) -> None:
        """The worker is given the database's dictionary: texts after the first file use it."""
        first, second = tmp_path / "sessions" / "a.jsonl", tmp_path / "sessions" / "b.jsonl"
        busy_session(first, turns=TRAIN_TEXTS // 2)
        busy_session(second, turns=50)
        with SearchIndex(tmp_path / "worker.db") as index:
            stored_by_worker(index, first)
            current = dictionaries(index)[1]
            assert current is not None
            build = build_file(second, *dictionaries(index))
            packed = {s.rows.packed for s in build.sources if s.rows is not None and len(s.text) >= 64}
            assert packed <= {0, current}

    def test_a_file_appended_after_the_worker_read_it_is_read_on(self, tmp_path: Path) -> None:
        """Bytes written between the worker's read and the store are read by the follower's store."""
        state = tmp_path / "state"
        state.mkdir()
        path = tmp_path / "sessions" / "s.jsonl"
        w = busy_session(path, turns=20)
        follower = MemoryFollower(state, build_from=0)
        try:
            follower.sync(path)
            assert follower.pending() == 1
            w.user("zqxlate question", id="late")
            wait_collected(follower)
            hits = follower.index.use(lambda index: search_memory(index, "zqxlate").hits)
            assert [h.label for h in hits] == ["user zqxlate question"]
        finally:
            follower.close()


def wait_collected(follower: MemoryFollower, timeout: float = 60.0) -> list[Path]:
    stored: list[Path] = []
    deadline = time.monotonic() + timeout
    while follower.pending() and time.monotonic() < deadline:
        stored += follower.collect(time.monotonic() + 1)
        time.sleep(0.02)
    assert not follower.pending()
    return stored


class TestHostileFiles:
    def test_fifo_unreadable_and_gone_files_do_not_stop_the_others(self, tmp_path: Path) -> None:
        """A FIFO, a file it may not read, a file deleted before its turn: the other files are built."""
        state = tmp_path / "state"
        state.mkdir()
        root = tmp_path / "sessions"
        good = root / "good.jsonl"
        busy_session(good, turns=5)
        fifo = root / "fifo.jsonl"
        os.mkfifo(fifo)
        gone = root / "gone.jsonl"
        busy_session(gone, turns=2)
        locked = root / "locked.jsonl"
        busy_session(locked, turns=2)
        locked.chmod(0)
        errors: list[str] = []
        follower = MemoryFollower(state, build_from=0)
        follower.on_error = errors.append
        try:
            builder = follower.builder()
            for path in (fifo, gone, locked, good):
                builder.add(path)
            gone.unlink()
            follower.collect(time.monotonic())
            stored = wait_collected(follower)
            assert stored == [fifo, gone, locked, good]
            hits = follower.index.use(lambda index: search_memory(index, "step 4").hits)
            assert hits
            readable = os.access(locked, os.R_OK)  # root reads a mode-000 file
            assert bool(errors) == (not readable)
        finally:
            locked.chmod(0o644)
            follower.close()

    def test_a_50_mb_line_is_built_and_the_next_file_too(self, tmp_path: Path) -> None:
        """A pasted 50 MB log (one line) is built whole in the worker, and the file after it is built."""
        state = tmp_path / "state"
        state.mkdir()
        root = tmp_path / "sessions"
        huge = PiSession("sess-huge", file=root / "huge.jsonl")
        huge.user("please read this log:\n" + pasted_log(50), id="u1")
        huge.assistant("zqxread the log", id="r1")
        assert (root / "huge.jsonl").stat().st_size > 50_000_000
        after = root / "after.jsonl"
        busy_session(after, turns=5)
        follower = MemoryFollower(state, build_from=0)
        try:
            builder = follower.builder()
            builder.add(root / "huge.jsonl")
            builder.add(after)
            follower.collect(time.monotonic())
            assert wait_collected(follower, timeout=300) == [root / "huge.jsonl", after]
            found = follower.index.use(lambda index: [h.label for h in search_memory(index, "zqxread").hits])
            assert found == ["assistant zqxread the log"]
            assert follower.index.use(lambda index: search_memory(index, "step 4").hits)
            assert follower.index.use(lambda index: search_memory(index, "id=654321 ").total) == 1
        finally:
            follower.close()

    def test_a_huge_paste_after_the_header_goes_to_the_worker(self, tmp_path: Path) -> None:
        """A read of a 9 MB paste that is most of its file is not extracted on the reading thread
        (every other session's append would wait for it): the worker rebuilds the file, rows as inline."""
        path = tmp_path / "sessions" / "ws" / "s.jsonl"
        w = PiSession("sess-paste", file=path)
        w.user("a first small question", id="u0")
        state_dir = tmp_path / "state"
        follower = MemoryFollower(state_dir, build_from=BUILD_FROM)
        state = StateStore(state_dir)
        tailer = Tailer(ArchiveWriter(central=tmp_path / "archive"), state, 10, on_entries=follower)
        try:
            tailer.sync([path])
            assert (follower.fed, follower.pending()) == (1, 0)  # a young session's lines: stored at once
            w.user("please read this log:\n" + pasted_log(9), id="u1")
            w.assistant("zqxread the log", id="r1")
            for _ in range(50):  # the service's visits: a line over a read's budget takes several
                tailer.sync([path])
                if follower.pending():
                    break
            assert follower.pending() == 1
            wait_collected(follower)
            with SearchIndex(tmp_path / "inline.db") as index:
                refresh_memory(index, [path.parent])
                inline = memory_state(index)
            assert follower.index.use(memory_state) == inline
        finally:
            follower.close()
            state.close()

    def test_a_killed_worker_is_replaced_and_its_file_tried_again(self, tmp_path: Path) -> None:
        """The worker killed mid-build: a new one builds the file, and the queue goes on."""
        state = tmp_path / "state"
        state.mkdir()
        root = tmp_path / "sessions"
        paths = [root / f"s{n}.jsonl" for n in range(3)]
        for path in paths:
            busy_session(path, turns=200, output_lines=50)
        follower = MemoryFollower(state, build_from=0)
        try:
            builder = follower.builder()
            for path in paths:
                builder.add(path)
            follower.collect(time.monotonic())  # submits the first files
            killed = kill_worker(builder)
            stored = wait_collected(follower)
            assert stored == paths
            assert builder.counts.worker_restarts >= killed
            held = follower.index.use(
                lambda index: index.conn.execute("SELECT count(*) FROM mem_files").fetchone()
            )
            assert held == (3,)
        finally:
            follower.close()


def kill_worker(builder: MemoryBuilder) -> int:
    """SIGKILL the worker process (once it exists); 1 when one was killed."""
    pool = getattr(builder, "_pool", None)
    deadline = time.monotonic() + 30
    while pool is not None and time.monotonic() < deadline:
        processes = list(getattr(pool, "_processes", {}).values())
        if processes and processes[0].pid:
            os.kill(processes[0].pid, signal.SIGKILL)
            return 1
        time.sleep(0.01)
    return 0


def held_paths(db: Path) -> list[str]:
    """The files raw memory holds, in the order they were first stored (their ids), straight from SQLite."""
    if not db.exists():
        return []
    conn = sqlite3.connect(db)
    try:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'mem_files'").fetchone() is None:
            return []
        return [path for (path,) in conn.execute("SELECT path FROM mem_files WHERE size >= 0 ORDER BY id")]
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def sessions_of_ages(root: Path, count: int, turns: int) -> list[Path]:
    """``count`` sessions above the worker's threshold, the first one the newest (by mtime)."""
    paths = []
    for n in range(count):
        path = root / "ws" / f"s{n}.jsonl"
        w = PiSession(f"sess-{n}", file=path)
        for i in range(turns):
            w.user(f"question {i} of {n}", id=f"u{i}")
            w.assistant(None, calls=[(f"c{i}", "bash", {"command": f"make step{i}"})], id=f"a{i}")
            w.tool_result(
                "".join(f"step {i} line {k}\n" for k in range(20)), call_id=f"c{i}", name="bash", id=f"t{i}"
            )
            w.assistant(f"step {i} done", id=f"r{i}")
        os.utime(path, ns=((10 + count - n) * 10**17, (10 + count - n) * 10**17))
        paths.append(path)
    return paths


def test_two_workers_store_side_by_side_what_one_inline_build_holds(tmp_path: Path) -> None:
    """Two workers build and store at once (SQLite's write lock orders their stores): every file is
    held as one inline build holds it, and the builds come back in the order they were queued."""
    root = tmp_path / "sessions"
    paths = sessions_of_ages(root, 6, turns=60)
    state = tmp_path / "state"
    state.mkdir()
    builder = MemoryBuilder(state, in_flight=4, workers=2)
    done: list[Path] = []
    try:
        for path in paths:
            builder.add(path)
        deadline = time.monotonic() + 120
        while len(done) < len(paths) and time.monotonic() < deadline:
            builder.submit()
            ready = builder.ready()
            if ready is None:
                time.sleep(0.02)
                continue
            path, build = ready
            assert build is not None and build.stored
            done.append(path)
    finally:
        builder.close()
    assert done == paths
    with SearchIndex(SearchIndex.default_path(state)) as index:
        built = memory_state(index)
    with SearchIndex(tmp_path / "inline.db") as index:
        refresh_memory(index, [root])
        assert built == memory_state(index)


@pytest.mark.slow
class TestTheServiceBuilds:
    def test_newest_first_and_a_kill_minus_9_loses_nothing(self, tmp_path: Path) -> None:
        """Files are stored newest first (``WORKERS`` at a time); killed mid-build, the next start builds the rest, and the
        result is what one inline build of the same files holds.
        """
        root = tmp_path / "sessions"
        paths = sessions_of_ages(root, 6, turns=300)
        assert all(path.stat().st_size >= BUILD_FROM for path in paths)
        state = tmp_path / "state"
        db = state / "search.db"
        with ServiceProcess([root], tmp_path / "archive", state_dir=state).start(wait=False) as service:
            wait_for(lambda: len(held_paths(db)) >= 2, 120, "two files built")
            service.kill()
        first = held_paths(db)
        # Newest first, WORKERS at a time: a file may be stored before the one queued just ahead of it.
        assert set(first) <= {str(p) for p in paths[: len(first) + WORKERS - 1]}
        with ServiceProcess([root], tmp_path / "archive", state_dir=state).start(wait=False) as service:
            service.wait_status(
                lambda s: s.catch_up is not None and s.catch_up.finished is not None,
                "the catch-up",
                timeout=180,
            )
            assert sorted(held_paths(db)) == sorted(str(p) for p in paths)
            assert 0 == service.stop()
        with SearchIndex(db) as index:
            built = memory_state(index)
        with SearchIndex(tmp_path / "inline.db") as index:
            refresh_memory(index, [root])
            assert built == memory_state(index)


BUILT_CALLS = """
import sys
from pathlib import Path
from pbot_watch.memory.build import build_file
print(repr(build_file(Path(sys.argv[1]), {}, None).calls))
"""


def test_a_files_call_rows_are_the_same_whatever_the_hash_seed(tmp_path: Path) -> None:
    """Built in two processes with other hash seeds, a file gives the same ``mem_calls`` rows in the same order."""
    path = tmp_path / "s.jsonl"
    w = PiSession("sess-calls", file=path)
    w.user("run them all", id="u1")
    w.assistant(None, calls=[(f"call-{n}", "bash", {"command": f"echo {n}"}) for n in range(12)])
    for n in range(12):
        w.tool_result(f"out {n}", call_id=f"call-{n}", name="bash")
    for n in range(12):  # results whose calls were never seen
        w.tool_result(f"orphan {n}", call_id=f"lost-{n}", name="bash")
    w.assistant("done")
    outputs = {
        subprocess.run(
            [sys.executable, "-c", BUILT_CALLS, str(path)],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outputs) == 1
    assert "lost-0" in next(iter(outputs))


def test_a_slow_file_at_the_head_does_not_idle_the_other_worker(tmp_path: Path) -> None:
    """Builds finished behind an unfinished one do not hold its slots: while one worker builds a
    big file, the other builds every small file queued after it (they wait to be taken in order).
    """
    root = tmp_path / "sessions"
    big = root / "ws" / "big.jsonl"
    busy_session(big, turns=1500, output_lines=250)
    small = sessions_of_ages(root, 5, turns=10)
    state = tmp_path / "state"
    state.mkdir()
    db = SearchIndex.default_path(state)
    builder = MemoryBuilder(state, in_flight=2, workers=2)
    held_before_big: list[str] = []
    try:
        for path in [big, *small]:
            builder.add(path)
        deadline = time.monotonic() + 120
        while str(big) not in (held := held_paths(db)) and time.monotonic() < deadline:
            builder.submit()
            held_before_big = held
            time.sleep(0.02)
        taken = []
        while len(taken) < 6 and time.monotonic() < deadline:
            builder.submit()
            ready = builder.ready()
            if ready is None:
                time.sleep(0.02)
                continue
            taken.append(ready[0])
    finally:
        builder.close()
    assert sorted(held_before_big) == sorted(str(p) for p in small)
    assert taken == [big, *small]


@pytest.mark.parametrize("redact", [True, False])
def test_the_workers_redact_as_the_service_is_set_to(tmp_path: Path, redact: bool) -> None:
    """``[privacy] redact = false`` reaches the spawned workers: a file they build holds what an
    inline read of it holds, the secret kept or redacted alike."""
    from pbot_watch.redact import policy

    path = tmp_path / "sessions" / "s.jsonl"
    forked_session(path)
    state = tmp_path / "state"
    state.mkdir()
    policy.configure(redact)
    try:
        with SearchIndex(tmp_path / "inline.db") as index:
            refresh_memory(index, [path.parent])
            inline = memory_state(index)
        builder = MemoryBuilder(state, in_flight=1, workers=1)
        try:
            builder.add(path)
            builder.submit()
            ready = wait_for(builder.ready, 60, "the worker's build")
        finally:
            builder.close()
    finally:
        policy.configure(True)
    assert ready[1] is not None and ready[1].stored
    with SearchIndex(SearchIndex.default_path(state)) as index:
        assert memory_state(index) == inline
        texts = [h.snippet for h in search_memory(index, "secret").hits]
    assert texts and all(("[redacted:" in t) == redact for t in texts)
