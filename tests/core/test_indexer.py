"""The one pipeline: ``Indexer.sync`` on growing files and ``index_all`` over session roots."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from pbot_watch.archive.files import ArchiveStore
from pbot_watch.indexer import Indexer, IndexProgress, index_all
from tests.support.archive import records
from tests.support.cli import invoke
from tests.support.paths import FIXTURES
from tests.support.pi_sessions import PiSession


class TestSync:
    def test_appends_in_pieces_equal_whole_file(self, tmp_path: Path) -> None:
        """A file appended in pieces (cut mid-line and mid-character) ends with the whole file's record."""
        b = PiSession(cwd=str(tmp_path))
        for i in range(9):
            b.turn(f"question {i} 中文", f"answer {i} 😀")
        data = b.data()
        path = tmp_path / "s.jsonl"
        indexer = Indexer(ArchiveStore(central=tmp_path / "live"))
        path.write_bytes(b"")
        for cut in range(0, len(data), 997):
            with path.open("ab") as handle:
                handle.write(data[cut : cut + 997])
            indexer.sync(path)
        whole = tmp_path / "whole.jsonl"
        whole.write_bytes(data)
        Indexer(ArchiveStore(central=tmp_path / "once")).sync(whole)
        assert records(tmp_path / "once") == records(tmp_path / "live")

    def test_append_reads_only_new_bytes(self, tmp_path: Path) -> None:
        """After the first pass, a sync reads only what was appended."""
        b = PiSession(cwd=str(tmp_path))
        b.turn("first")
        path = b.write(tmp_path / "s.jsonl")
        indexer = Indexer(ArchiveStore(central=tmp_path / "a"))
        indexer.sync(path)
        size = path.stat().st_size
        b.turn("second")
        path.write_bytes(b.data())
        result = indexer.sync(path)
        assert (path.stat().st_size - size, False, "written") == (
            result.bytes_read,
            result.reread,
            result.outcome,
        )
        assert "idle" == indexer.sync(path).outcome

    def test_rewrite_in_place_reads_again(self, tmp_path: Path) -> None:
        """A shorter file (Pi's migration rewrite) is read again from the start."""
        b = PiSession(cwd=str(tmp_path))
        for i in range(3):
            b.turn(f"q{i}")
        path = b.write(tmp_path / "s.jsonl")
        indexer = Indexer(ArchiveStore(central=tmp_path / "a"))
        indexer.sync(path)
        shorter = PiSession(cwd=str(tmp_path))
        shorter.turn("only one")
        path.write_bytes(shorter.data())
        result = indexer.sync(path)
        assert result.reread
        record = next(iter(records(tmp_path / "a").values()))
        assert 2 == len(record["nodes"])  # type: ignore[arg-type]

    def test_deleted_file_keeps_its_record(self, tmp_path: Path) -> None:
        """A session file that disappears is forgotten; its record stays."""
        b = PiSession(cwd=str(tmp_path))
        b.turn("q")
        path = b.write(tmp_path / "s.jsonl")
        indexer = Indexer(ArchiveStore(central=tmp_path / "a"))
        indexer.sync(path)
        path.unlink()
        assert "gone" == indexer.sync(path).outcome
        assert 1 == len(records(tmp_path / "a"))

    def test_budget_reads_a_file_in_pieces(self, tmp_path: Path) -> None:
        """Reads bounded by a budget say when bytes remain, and end with the whole file's record."""
        b = PiSession(cwd=str(tmp_path))
        b.turn("x" * 5000, "answer")
        b.turn("second", "y" * 3000)
        path = b.write(tmp_path / "s.jsonl")
        indexer = Indexer(ArchiveStore(central=tmp_path / "pieces"))
        pieces = []
        while True:
            result = indexer.read(path, budget=1024)
            pieces.append(result.bytes_read)
            if not result.more:
                break
        indexer.save_session(result)
        Indexer(ArchiveStore(central=tmp_path / "once")).sync(path)
        assert (sum(pieces), max(pieces)) == (path.stat().st_size, 1024)
        assert records(tmp_path / "once") == records(tmp_path / "pieces")

    def test_reads_stop_at_the_size_at_open(self, tmp_path: Path) -> None:
        """A read never goes past the size the file had when it was opened (no endless file)."""
        b = PiSession(cwd=str(tmp_path))
        b.turn("q", "a")
        path = b.write(tmp_path / "s.jsonl")
        result = Indexer(ArchiveStore(central=tmp_path / "a")).read(path)
        assert (path.stat().st_size, False) == (result.bytes_read, result.more)

    def test_not_a_regular_file_is_unreadable(self, tmp_path: Path) -> None:
        """A folder, FIFO or device where a session was is reported, never opened for reading."""
        indexer = Indexer(ArchiveStore(central=tmp_path / "a"))
        folder, fifo, device = tmp_path / "f.jsonl", tmp_path / "p.jsonl", tmp_path / "d.jsonl"
        folder.mkdir()
        os.mkfifo(fifo)
        device.symlink_to("/dev/zero")
        outcomes = {p.name: (r.outcome, r.warnings) for p in (folder, fifo, device) if (r := indexer.read(p))}
        assert {
            "f.jsonl": (
                "unreadable",
                [f"{folder}: cannot read: a folder, not a regular file (only regular files are sessions)"],
            ),
            "p.jsonl": (
                "unreadable",
                [f"{fifo}: cannot read: a FIFO, not a regular file (only regular files are sessions)"],
            ),
            "d.jsonl": (
                "unreadable",
                [
                    f"{device}: cannot read: a character device, not a regular file (only regular files are sessions)"
                ],
            ),
        } == outcomes


class TestIndexAll:
    def test_cycle_is_warned_and_other_sessions_indexed(self, tmp_path: Path) -> None:
        """A session with a parentId cycle is indexed with a warning; the other sessions are written too."""
        roots = tmp_path / "sessions"
        bad = PiSession(session_id="s-cycle", cwd=str(tmp_path))
        bad.user("q", id="cccc0001", parent=None)
        bad.assistant("a", id="cccc0002", parent="cccc0001")
        bad.user("loop", id="cccc0001", parent="cccc0002")
        bad.assistant("tail", id="cccc0003", parent="cccc0002")
        bad.write(roots / "a" / "bad.jsonl")
        good = PiSession(session_id="s-good", cwd=str(tmp_path))
        good.turn("fine")
        good.write(roots / "b" / "good.jsonl")
        report = index_all([roots], ArchiveStore(central=tmp_path / "archive"))
        assert (2, 2) == (report.sessions, report.written)
        assert any("cycle" in w and "bad.jsonl" in w for w in report.warnings)
        assert {"s-cycle", "s-good"} == set(records(tmp_path / "archive"))

    def test_missing_workspace_skipped_run_goes_on(self, tmp_path: Path) -> None:
        """A session whose cwd is gone is skipped with a warning naming it; the others are written."""
        roots = tmp_path / "sessions"
        gone = PiSession(session_id="s-gone", cwd=str(tmp_path / "deleted-project"))
        gone.turn("q")
        gone.write(roots / "gone.jsonl")
        here = tmp_path / "project"
        here.mkdir()
        live = PiSession(session_id="s-live", cwd=str(here))
        live.turn("q")
        live.write(roots / "live.jsonl")
        report = index_all([roots], ArchiveStore())
        assert (1, 1) == (report.written, report.skipped)
        assert any("deleted-project" in w and "no longer exists" in w for w in report.warnings)
        assert {"s-live"} == set(records(here / ".pi" / "pbot" / "history"))

    def test_malformed_lines_and_non_sessions_are_counted(self, tmp_path: Path) -> None:
        """Torn lines are counted, non-session JSONL files are counted apart, nothing is lost."""
        roots = tmp_path / "sessions"
        roots.mkdir()
        shutil.copy(FIXTURES / "onload" / "torn.after.jsonl", roots / "torn.jsonl")
        shutil.copy(FIXTURES / "onload" / "notpi.before.jsonl", roots / "notpi.jsonl")
        (roots / "empty.jsonl").write_bytes(b"")
        report = index_all([roots], ArchiveStore(central=tmp_path / "archive"))
        assert (3, 1, 1, 1) == (report.files, report.sessions, report.not_session, report.malformed)
        # Singular where the count is one.
        assert report.line() == (
            "1 session, 1 record written, 0 unchanged, 0 skipped, 0 without exchanges, 1 not a session, "
            "1 malformed line (3 files, 0.0 MB)"
        )

    def test_import_copy_with_same_session_id_makes_one_record(self, tmp_path: Path) -> None:
        """Two files with one session id (an /import copy) give one record holding both files' branches."""
        roots = tmp_path / "sessions"
        original = PiSession(session_id="s-same", cwd=str(tmp_path))
        original.turn("shared")
        copy = PiSession(
            session_id="s-same",
            cwd=str(tmp_path),
            entries=list(original.entries),
            leaf=original.leaf,
            counter=50,
        )
        original.turn("only in the original")
        copy.turn("only in the copy")
        original.write(roots / "a.jsonl")
        copy.write(roots / "b.jsonl")
        report = index_all([roots], ArchiveStore(central=tmp_path / "archive"))
        assert (1, 1) == (report.sessions, report.written)
        record = records(tmp_path / "archive")["s-same"]
        texts = [n["text"] for n in record["nodes"] if n["kind"] == "exchange"]  # type: ignore[attr-defined]
        assert 3 == len(texts)

    def test_second_pass_writes_nothing(self, tmp_path: Path) -> None:
        """Every real fixture indexed twice: the second pass finds every record unchanged."""
        roots = tmp_path / "sessions"
        shutil.copytree(FIXTURES, roots)
        first = index_all([roots], ArchiveStore(central=tmp_path / "archive"))
        second = index_all([roots], ArchiveStore(central=tmp_path / "archive"))
        assert (first.written, 0, first.written) == (first.sessions, second.written, second.unchanged)


class TestNewestFirst:
    def sessions_with_mtimes(self, root: Path, ages: dict[str, int]) -> None:
        """One session file per name, modified ``ages[name]`` hours ago."""
        now = 1_800_000_000
        for name, hours in ages.items():
            b = PiSession(session_id=f"s-{name}", cwd=str(root))
            b.turn(f"question in {name}")
            path = b.write(root / "sessions" / f"{name}.jsonl")
            os.utime(path, (now - hours * 3600, now - hours * 3600))

    def test_sessions_are_read_newest_first(self, tmp_path: Path) -> None:
        """The session modified last is read first, whatever the file names' order."""
        self.sessions_with_mtimes(tmp_path, {"a": 5, "b": 1, "c": 9, "d": 3})
        order: list[str] = []
        index_all(
            [tmp_path / "sessions"],
            ArchiveStore(central=tmp_path / "archive"),
            lambda state: order.append(state.last.stem) if state.last else None,
        )
        assert ["b", "d", "a", "c"] == order

    def test_progress_counts_files_and_bytes(self, tmp_path: Path) -> None:
        """Progress ends at every file and every byte, and starts with the totals known."""
        self.sessions_with_mtimes(tmp_path, {"a": 2, "b": 1})
        (tmp_path / "sessions" / "not-a-session.jsonl").write_text('{"type": "note"}\n')
        states: list[IndexProgress] = []
        index_all(
            [tmp_path / "sessions"],
            ArchiveStore(central=tmp_path / "archive"),
            lambda state: states.append(IndexProgress(**vars(state))),
        )
        size = sum(p.stat().st_size for p in (tmp_path / "sessions").glob("[ab].jsonl"))
        assert (1, 3, 0, size) == (
            states[0].files_done,
            states[0].files_total,
            states[0].bytes_done,
            states[0].bytes_total,
        )
        assert (3, 3, size, size) == (
            states[-1].files_done,
            states[-1].files_total,
            states[-1].bytes_done,
            states[-1].bytes_total,
        )


class TestIndexCommandWarnings:
    def test_skipped_workspace_warns_on_stderr_and_exits_zero(self, tmp_path: Path) -> None:
        """The CLI names a skipped workspace on stderr and still succeeds."""
        roots = tmp_path / "sessions"
        gone = PiSession(cwd=str(tmp_path / "nowhere"))
        gone.turn("q")
        gone.write(roots / "x.jsonl")
        result = invoke("index", "--sessions", str(roots))
        assert 0 == result.returncode, result.stderr
        assert "nowhere no longer exists" in result.stderr
        assert "1 skipped" in result.stdout


class TestWriteFailures:
    def test_failed_record_write_is_reported_and_others_land(self, tmp_path: Path) -> None:
        """A real EFBIG on one record (file size limit) skips that session with a warning; the other is written."""
        roots = tmp_path / "sessions"
        small = PiSession(session_id="s-small", cwd=str(tmp_path))
        small.turn("short")
        small.write(roots / "small.jsonl")
        big = PiSession(session_id="s-big", cwd=str(tmp_path))
        for i in range(40):
            big.turn(f"long {i} " + "x" * 4000)
        big.write(roots / "big.jsonl")
        archive = tmp_path / "archive"
        script = textwrap.dedent(
            f"""
            import json, resource, signal
            from pathlib import Path
            from pbot_watch.archive.files import ArchiveStore
            from pbot_watch.indexer import index_all
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
            report = index_all([Path({str(roots)!r})], ArchiveStore(central=Path({str(archive)!r})))
            print(json.dumps({{"written": report.written, "skipped": report.skipped, "warnings": report.warnings}}))
            """
        )
        result = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
        )
        assert 0 == result.returncode, result.stderr
        report = json.loads(result.stdout)
        assert (1, 1) == (report["written"], report["skipped"])
        assert any("s-big" in w for w in report["warnings"])
        assert {"s-small"} == set(records(archive))
        assert [] == [p for p in archive.iterdir() if p.suffix != ".json"]
