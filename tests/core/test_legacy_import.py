"""personal-bot's old user-level records move into their workspaces on ``pbot-watch index``.

The legacy folder here is built with pbot-watch's own indexer (pbot's format, checked against
pbot by the parity tests); ``test_pbot_legacy.py`` builds one with pbot's own code.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pbot_watch.archive.files import record_file_name
from tests.support.archive import archive_files, records
from tests.support.cli import invoke
from tests.support.pi_sessions import PiSession, jsonl, record_of
from tests.support.service import ServiceProcess


def legacy_record(session: PiSession, record_id: str, file: Path) -> dict[str, Any]:
    """What pbot before 0.2.3 kept in ``<agent dir>/pbot/history``: summaries ready, with ``workspace`` and ``file``."""
    record = record_of(jsonl([session.header(), *session.entries]), record_id=record_id)
    for node in record["nodes"]:
        if node["kind"] == "summary":
            node["text"], node["ready"] = f"pbot summary of {node['id']}", True
    nodes = record.pop("nodes")
    return {**record, "workspace": session.cwd, "file": str(file), "nodes": nodes}


def session_in(workspace: Path, sessions: Path, n: int, turns: int = 5) -> PiSession:
    session = PiSession(session_id=f"01a228f5-0000-7000-8000-00000000000{n}", cwd=str(workspace))
    for i in range(turns):
        session.turn(f"question {i} about marmalade{n}", f"answer {i}")
    path = sessions / f"s{n}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(jsonl([session.header(), *session.entries]))
    return session


def home(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The scratch user's Pi agent dir, its session root, and a workspace."""
    agent = Path(os.environ["PI_CODING_AGENT_DIR"])
    workspace = tmp_path / "work"
    workspace.mkdir()
    return agent, agent / "sessions", workspace


def write_legacy(agent: Path, record: dict[str, Any]) -> Path:
    folder = agent / "pbot" / "history"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / record_file_name(record["id"])
    path.write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")
    return path


class TestLegacyImport:
    def test_index_imports_keeps_summaries_and_old_copies(self, tmp_path: Path) -> None:
        """A live session and a gone one: both land in the workspace, summaries ready, old copies untouched."""
        agent, sessions, workspace = home(tmp_path)
        live = session_in(workspace, sessions, 1)
        gone = session_in(workspace, sessions, 2)
        legacy = [
            write_legacy(agent, legacy_record(live, "pbot-live", sessions / "s1.jsonl")),
            write_legacy(agent, legacy_record(gone, "pbot-gone", sessions / "s2.jsonl")),
        ]
        (sessions / "s2.jsonl").unlink()
        before = {p: p.read_bytes() for p in legacy}

        first = invoke("index")
        assert 0 == first.returncode, first.stderr
        assert "2 imported from pbot's old history" in first.stdout
        held = records(workspace / ".pi" / "pbot" / "history")
        assert {live.session_id, gone.session_id} == set(held)
        for session_id, record_id in ((live.session_id, "pbot-live"), (gone.session_id, "pbot-gone")):
            record = held[session_id]
            assert record["id"] == record_id
            assert "file" not in record and "workspace" not in record
            summaries = [n for n in record["nodes"] if n["kind"] == "summary"]
            assert summaries and all(n["ready"] and n["text"].startswith("pbot summary") for n in summaries)
        assert before == {p: p.read_bytes() for p in legacy}

        found = json.loads(invoke("search", "pbot summary", "--json").stdout)
        assert {"pbot-live", "pbot-gone"} == {m["id"].split(":")[0] for m in found["matches"]}
        exchange = json.loads(invoke("search", "question 0 about marmalade2", "--json").stdout)["matches"][0]
        page = json.loads(invoke("read", exchange["id"], "--json").stdout)
        assert exchange["id"].startswith("pbot-gone:0:") and "marmalade2" in page["text"]
        assert any(p["preview"].startswith("pbot summary") for p in page["parents"])

        files = archive_files(workspace / ".pi" / "pbot" / "history")
        second = invoke("index")
        assert 0 == second.returncode, second.stderr
        assert "0 records written" in second.stdout and "0 imported" in second.stdout
        assert files == archive_files(workspace / ".pi" / "pbot" / "history")

    def test_newer_workspace_record_kept_and_file_field_dropped(self, tmp_path: Path) -> None:
        """A workspace record of the session wins; its legacy ``file`` goes, its nodes and summaries stay."""
        agent, sessions, workspace = home(tmp_path)
        session = session_in(workspace, sessions, 3)
        (sessions / "s3.jsonl").unlink()  # only the records are left
        newer = legacy_record(session, "in-workspace", Path("/old/place.jsonl"))
        del newer["workspace"]
        newer["nodes"][0]["text"] += " (newer)"
        folder = workspace / ".pi" / "pbot" / "history"
        folder.mkdir(parents=True)
        (folder / "in-workspace.json").write_text(json.dumps(newer), encoding="utf-8")
        write_legacy(agent, legacy_record(session, "legacy-copy", sessions / "s3.jsonl"))

        result = invoke("index")
        assert 0 == result.returncode, result.stderr
        assert "0 imported" in result.stdout
        held = records(folder)
        assert ["in-workspace"] == [r["id"] for r in held.values()]
        kept = held[session.session_id]
        assert "file" not in kept
        assert kept["nodes"] == newer["nodes"]

    def test_damaged_legacy_file_is_a_warning(self, tmp_path: Path) -> None:
        """A torn legacy file is named on stderr; the other records are imported."""
        agent, sessions, workspace = home(tmp_path)
        session = session_in(workspace, sessions, 4)
        write_legacy(agent, legacy_record(session, "good", sessions / "s4.jsonl"))
        torn = agent / "pbot" / "history" / "torn.json"
        torn.write_text('{"id": "torn", "sessionId": "x", "nod', encoding="utf-8")
        result = invoke("index")
        assert 0 == result.returncode, result.stderr
        assert "1 imported" in result.stdout
        assert f"warning: pbot's old history {torn}: not a readable record" in result.stderr
        assert torn.read_text(encoding="utf-8").endswith('"nod')

    def test_central_archive_takes_them_with_their_workspace(self, tmp_path: Path) -> None:
        """With --archive the legacy records join the central archive, where search finds them."""
        agent, sessions, workspace = home(tmp_path)
        session = session_in(workspace, sessions, 5)
        write_legacy(agent, legacy_record(session, "central-one", sessions / "s5.jsonl"))
        (sessions / "s5.jsonl").unlink()
        archive = tmp_path / "archive"
        result = invoke("index", "--archive", str(archive))
        assert 0 == result.returncode, result.stderr
        held = records(archive)[session.session_id]
        assert held["workspace"] == str(workspace) and "file" not in held
        found = json.loads(invoke("search", "pbot summary", "--archive", str(archive), "--json").stdout)
        assert found["matches"] and all(m["id"].startswith("central-one") for m in found["matches"])
        assert not (workspace / ".pi").exists()

    def test_no_legacy_folder_says_nothing(self, tmp_path: Path) -> None:
        """Without pbot's old folder the index line is as before."""
        _, sessions, workspace = home(tmp_path)
        session_in(workspace, sessions, 6)
        result = invoke("index")
        assert 0 == result.returncode, result.stderr
        assert "imported" not in result.stdout


@pytest.mark.slow
def test_service_first_run_imports_and_status_counts(tmp_path: Path) -> None:
    """``pbot-watch run`` imports at start; ``status`` says how many; the records are searchable."""
    agent, sessions, workspace = home(tmp_path)
    live = session_in(workspace, sessions, 7)
    gone = session_in(workspace, sessions, 8)
    write_legacy(agent, legacy_record(live, "svc-live", sessions / "s7.jsonl"))
    write_legacy(agent, legacy_record(gone, "svc-gone", sessions / "s8.jsonl"))
    (sessions / "s8.jsonl").unlink()
    with ServiceProcess([sessions], None).start() as service:
        status = service.wait_status(lambda s: s.legacy_imported is not None, "the import")
        assert 2 == status.legacy_imported
        shown = invoke("status")
        assert "legacy     2 imported from pbot's old history" in shown.stdout
        held = records(workspace / ".pi" / "pbot" / "history")
        assert {"svc-live", "svc-gone"} == {r["id"] for r in held.values()}
        assert all(n["ready"] for r in held.values() for n in r["nodes"])
        assert 0 == service.stop()
    files = archive_files(workspace / ".pi" / "pbot" / "history")
    with ServiceProcess([sessions], None).start() as service:
        assert 0 == service.wait_status(lambda s: s.legacy_imported is not None, "the import").legacy_imported
        assert 0 == service.stop()
    assert files == archive_files(workspace / ".pi" / "pbot" / "history")
