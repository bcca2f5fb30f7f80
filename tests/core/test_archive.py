"""The archive on disk: where records go, finding them by sessionId, writing only changes, atomically."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pbot_watch.archive.atomic import write_atomic
from pbot_watch.archive.files import ArchiveStore, WorkspaceSkipped
from pbot_watch.archive.locations import HISTORY_SUBDIR
from tests.support.pi_sessions import PiSession, history_of

SESSION = "01a228f5-0000-7000-8000-00000000abcd"


def history(turns: int = 5, session_id: str = SESSION) -> Any:
    b = PiSession(session_id=session_id)
    for i in range(turns):
        b.turn(f"q{i}", f"a{i}")
    return history_of(b.data())


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def pbot_record(workspace: Path, **extra: Any) -> Path:
    """A record as pbot 0.2.3 left it: random UUID id, one summary ready, the legacy ``file`` field."""
    store = ArchiveStore()
    _, path = store.save(history(), str(workspace))
    record = json.loads(path.read_text())
    old_id = record["id"]
    text = path.read_text().replace(old_id, "9f1c2d3e-4b5a-4c6d-8e7f-a0b1c2d3e4f5")
    record = json.loads(text)
    for node in record["nodes"]:
        if node["kind"] == "summary":
            node.update(text="pbot wrote this summary", ready=True)
    record = {
        "id": record["id"],
        "sessionId": record["sessionId"],
        "name": record["name"],
        "file": "/old/path/session.jsonl",
        **extra,
        "nodes": record["nodes"],
    }
    path.unlink()
    target = path.with_name(record["id"] + ".json")
    target.write_text(json.dumps(record, ensure_ascii=False))
    return target


class TestWhereRecordsGo:
    def test_workspace_folder_and_modes(self, tmp_path: Path) -> None:
        """Records go to <cwd>/.pi/pbot/history/<recordId>.json; folders we create are 0700, files 0600."""
        workspace = tmp_path / "project"
        workspace.mkdir()
        outcome, path = ArchiveStore().save(history(), str(workspace))
        assert "written" == outcome
        assert workspace / HISTORY_SUBDIR == path.parent
        assert 0o600 == mode(path)
        for folder in (workspace / ".pi", workspace / ".pi" / "pbot", workspace / HISTORY_SUBDIR):
            assert 0o700 == mode(folder)
        assert path.name == json.loads(path.read_text())["id"] + ".json"

    def test_central_archive_carries_workspace(self, tmp_path: Path) -> None:
        """In a central folder each record names its workspace, before the nodes."""
        central = tmp_path / "archive"
        _, path = ArchiveStore(central=central).save(history(), "/somewhere/project")
        record = json.loads(path.read_text())
        assert central == path.parent
        assert ["id", "sessionId", "name", "workspace", "nodes"] == list(record)
        assert "/somewhere/project" == record["workspace"]

    def test_missing_workspace_is_skipped(self, tmp_path: Path) -> None:
        """A cwd that no longer exists is skipped with a message naming it."""
        with pytest.raises(WorkspaceSkipped, match="no longer exists"):
            ArchiveStore().save(history(), str(tmp_path / "gone"))

    @pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
    def test_unwritable_workspace_is_skipped(self, tmp_path: Path) -> None:
        """A workspace we may not write into is skipped, not crashed on."""
        workspace = tmp_path / "readonly"
        workspace.mkdir()
        workspace.chmod(0o500)
        try:
            with pytest.raises(WorkspaceSkipped, match="not writable"):
                ArchiveStore().save(history(), str(workspace))
        finally:
            workspace.chmod(0o700)

    def test_workspace_where_no_folder_can_be_made_is_skipped(self, tmp_path: Path) -> None:
        """A file where ``.pi`` should be (even root cannot make a folder there) skips the workspace."""
        workspace = tmp_path / "blocked"
        workspace.mkdir()
        (workspace / ".pi").write_text("not a folder")
        with pytest.raises(WorkspaceSkipped, match="not writable"):
            ArchiveStore().save(history(), str(workspace))

    def test_include_and_exclude_globs(self, tmp_path: Path) -> None:
        """Only included workspaces get records; excluded ones never do."""
        for name in ("work-a", "work-b", "private"):
            (tmp_path / name).mkdir()
        store = ArchiveStore(include=(str(tmp_path / "work-*"),), exclude=("*/work-b",))
        assert "written" == store.save(history(), str(tmp_path / "work-a"))[0]
        with pytest.raises(WorkspaceSkipped, match="excluded"):
            store.save(history(), str(tmp_path / "work-b"))
        with pytest.raises(WorkspaceSkipped, match="not included"):
            store.save(history(), str(tmp_path / "private"))


class TestFindAndReuse:
    def test_second_save_is_unchanged(self, tmp_path: Path) -> None:
        """The same history saved twice writes once; the file is not touched the second time."""
        store = ArchiveStore(central=tmp_path)
        _, path = store.save(history(), "/w")
        before = path.stat().st_mtime_ns, path.stat().st_ino
        assert "unchanged" == store.save(history(), "/w")[0]
        assert ArchiveStore(central=tmp_path).save(history(), "/w")[0] == "unchanged"
        assert before == (path.stat().st_mtime_ns, path.stat().st_ino)

    def test_pbot_record_keeps_id_drops_file_keeps_summaries(self, tmp_path: Path) -> None:
        """A pbot-written record (random id, legacy ``file``) is found by sessionId and updated in place."""
        workspace = tmp_path / "project"
        workspace.mkdir()
        path = pbot_record(workspace)
        outcome, saved = ArchiveStore().save(history(turns=6), str(workspace))
        record = json.loads(saved.read_text())
        assert ("written", path) == (outcome, saved)
        assert "9f1c2d3e-4b5a-4c6d-8e7f-a0b1c2d3e4f5" == record["id"]
        assert "file" not in record
        summary = next(n for n in record["nodes"] if n["kind"] == "summary")
        assert ("pbot wrote this summary", True) == (summary["text"], summary["ready"])
        assert [path] == list(path.parent.glob("*.json"))

    def test_unknown_record_fields_are_kept(self, tmp_path: Path) -> None:
        """Fields another tool added to a record survive our rewrite (before the nodes)."""
        workspace = tmp_path / "project"
        workspace.mkdir()
        path = pbot_record(workspace, tags=["x"])
        ArchiveStore().save(history(turns=6), str(workspace))
        assert ["id", "sessionId", "name", "tags", "nodes"] == list(json.loads(path.read_text()))

    def test_record_changed_on_disk_is_read_back(self, tmp_path: Path) -> None:
        """A summary written by someone else after our last save is kept by our next save."""
        store = ArchiveStore(central=tmp_path)
        _, path = store.save(history(turns=5), "/w")
        record = json.loads(path.read_text())
        for node in record["nodes"]:
            if node["kind"] == "summary":
                node.update(text="written by pbot meanwhile", ready=True)
        write_atomic(path, json.dumps(record).encode())
        store.save(history(turns=6), "/w")
        summary = next(n for n in json.loads(path.read_text())["nodes"] if n["kind"] == "summary")
        assert "written by pbot meanwhile" == summary["text"]

    def test_unreadable_file_under_our_name_is_kept_aside(self, tmp_path: Path) -> None:
        """A torn file holding the new record's name is renamed, never overwritten."""
        store = ArchiveStore(central=tmp_path)
        _, path = store.save(history(), "/w")
        path.write_text("{torn")
        os.utime(tmp_path, ns=(1, 1))  # the folder index must notice the change
        outcome, again = store.save(history(), "/w")
        assert ("written", path) == (outcome, again)
        assert 1 == len(list(tmp_path.glob("*.unreadable-*")))


class TestAtomicWrite:
    def test_write_failing_midway_leaves_old_record(self, tmp_path: Path) -> None:
        """A real EFBIG (file size limit) mid-write: the old record is intact and no temp file is left."""
        folder = tmp_path / "history"
        folder.mkdir()
        target = folder / "record.json"
        target.write_text('{"old": true}')
        script = textwrap.dedent(
            f"""
            import resource, signal, sys
            from pathlib import Path
            from pbot_watch.archive.atomic import write_atomic
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
            try:
                write_atomic(Path({str(target)!r}), b"x" * 100000)
            except OSError as error:
                print(error.errno)
                sys.exit(3)
            """
        )
        result = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
        )
        assert 3 == result.returncode, result.stderr
        assert '{"old": true}' == target.read_text()
        assert [target] == list(folder.iterdir())

    def test_retry_after_failure_succeeds(self, tmp_path: Path) -> None:
        """After a failed write, the next write replaces the file normally."""
        target = tmp_path / "record.json"
        target.write_text("old")
        write_atomic(target, b"new")
        assert "new" == target.read_text()
        assert 0o600 == mode(target)


class TestGrowingRecord:
    """A record written again after each append: only what changed is redone, the bytes are the same."""

    def test_each_write_is_the_whole_record_as_json_would_write_it(self, tmp_path: Path) -> None:
        """Central archive (workspace field), provenance, non-ASCII text, /tree branches:
        every write after an append holds the bytes ``dumps_utf8`` gives for the same record."""
        from pbot_watch.history.jstext import dumps_utf8
        from pbot_watch.history.project import SessionFile

        store = ArchiveStore(central=tmp_path / "archive", provenance=("laptop", "ana"))
        b = PiSession(session_id=SESSION)
        answers = [b.turn(f"q{i} 😀 中文", f"a{i}")[1] for i in range(9)]
        state = SessionFile()
        fed = 0
        reused: list[int] = []
        for step in range(12):
            if step == 5:
                b.branch_at(answers[3])
            b.turn(f"more {step}", f"answer {step}")
            data = b.data()
            state.feed(data[fed:])
            fed = len(data)
            found = state.history()
            assert found is not None
            outcome, path = store.save(found, str(tmp_path / "ws"))
            assert outcome == "written"
            written = path.read_bytes()
            assert written == dumps_utf8(json.loads(written)) + b"\n"
            assert json.loads(written)["workspace"] == str(tmp_path / "ws")
            reused.append(store._encoder.reused)
        assert reused[0] == 0
        assert min(reused[1:]) > 0

    def test_a_record_changed_by_another_tool_is_the_start_of_the_next_write(self, tmp_path: Path) -> None:
        """A summary written into the file meanwhile (the summarizer, pbot) is kept by the next write."""
        store = ArchiveStore()
        workspace = tmp_path / "ws"
        workspace.mkdir()
        _, path = store.save(history(8), str(workspace))
        record = json.loads(path.read_text())
        summary = next(n for n in record["nodes"] if n["kind"] == "summary")
        summary.update(text="what happened", ready=True)
        write_atomic(path, json.dumps(record).encode())
        os.utime(path, ns=(1, 1))  # another stamp, whatever the clock's resolution
        store.save(history(9), str(workspace))
        after = {n["id"]: n for n in json.loads(path.read_text())["nodes"]}
        assert after[summary["id"]]["text"] == "what happened"

    def test_lone_surrogates_are_escaped_as_in_a_whole_encoding(self, tmp_path: Path) -> None:
        """A node text cut through an emoji: the kept piece holds JSON's escape, like the whole record."""
        from pbot_watch.archive.encode import RecordEncoder
        from pbot_watch.history.jstext import dumps_utf8

        node = {"id": "rec:0:a", "text": "cut \ud83d"}
        record = {"id": "rec", "name": "n \udc00", "nodes": [node, {"id": "rec", "text": ""}]}
        encoder = RecordEncoder()
        path = tmp_path / "rec.json"
        assert encoder.encode(path, record) == dumps_utf8(record) + b"\n"
        grown = {**record, "nodes": [node, {"id": "rec:0:b", "text": "more"}, {"id": "rec", "text": ""}]}
        assert encoder.encode(path, grown) == dumps_utf8(grown) + b"\n"
        assert encoder.reused == 2  # the same node object, and an equal one


def test_a_record_we_wrote_gives_back_each_nodes_json() -> None:
    """The nodes' spans of our own encoding are their encodings; what msgspec refuses is left to read_record."""
    from pbot_watch.archive.files import read_own_record
    from pbot_watch.history.jstext import dumps_utf8

    nodes = [{"id": "rec:0:a", "text": 'é \u2028 "q" 1.5', "n": 1.5}, {"id": "rec", "text": ""}]
    record = {"id": "rec", "sessionId": "s", "name": "n", "nodes": nodes}
    found = read_own_record(dumps_utf8(record) + b"\n")
    assert found is not None
    value, pieces = found
    assert value == record
    assert list(value) == list(record)
    assert pieces == [dumps_utf8(node) for node in nodes]
    cut = {**record, "nodes": [{"id": "rec:0:a", "text": "cut \ud83d"}]}
    assert read_own_record(dumps_utf8(cut)) is None
