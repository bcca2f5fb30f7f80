"""search, read, memory search, recall and reindex as a person runs them."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import invoke, modules_after
from tests.support.paths import FIXTURES
from tests.support.pi_sessions import PiSession


@pytest.fixture
def central(tmp_path: Path) -> tuple[Path, Path]:
    sessions = tmp_path / "sessions"
    shutil.copytree(FIXTURES / "real-v3", sessions / "v3")
    archive = tmp_path / "archive"
    assert 0 == invoke("index", "--sessions", str(sessions), "--archive", str(archive)).returncode
    return sessions, archive


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert 1 == len(lines), result.stderr
    assert lines[0].startswith("pbot-watch: ")
    return lines[0]


class TestSearchCommand:
    def test_json_shape_and_read_round_trip(self, central: tuple[Path, Path]) -> None:
        """--json gives the documented shape; an id from search reads with read --json."""
        _, archive = central
        result = invoke("search", "notes", "--archive", str(archive), "--json", "--limit", "2")
        assert 0 == result.returncode, result.stderr
        data = json.loads(result.stdout)
        assert {"query", "match", "matches", "total", "nextOffset", "warnings"} == set(data)
        assert 2 == len(data["matches"]) and data["nextOffset"] == 2
        hit = data["matches"][0]
        page = json.loads(invoke("read", hit["id"], "--archive", str(archive), "--json").stdout)
        assert hit["id"] == page["id"]
        assert "notes" in page["text"].lower()
        assert page["source"]["entryIds"]

    def test_human_output_lists_hits(self, central: tuple[Path, Path]) -> None:
        """The human list shows kind, session name, snippet and id."""
        _, archive = central
        result = invoke("search", "notes", "--archive", str(archive), "--limit", "1")
        assert 0 == result.returncode
        assert "exchange" in result.stdout and "notes" in result.stdout.lower()
        assert "next page: --offset 1" in result.stdout

    def test_bad_range_is_one_line(self, central: tuple[Path, Path]) -> None:
        """An inverted range fails with one stderr line and a usage exit code."""
        _, archive = central
        result = invoke(
            "search", "x", "--archive", str(archive), "--from", "2026-12-01", "--to", "2026-11-01"
        )
        assert 2 == result.returncode
        assert "time range" in one_error_line(result)

    def test_unknown_node_and_offset_past_end(self, central: tuple[Path, Path]) -> None:
        """read of an unknown id exits 4; an offset past the end exits 2; one line each."""
        _, archive = central
        unknown = invoke("read", "no-such-node", "--archive", str(archive))
        assert 4 == unknown.returncode
        assert "unknown node id" in one_error_line(unknown)
        hit = json.loads(invoke("search", "notes", "--archive", str(archive), "--json").stdout)["matches"][0]
        past = invoke("read", hit["id"], "--archive", str(archive), "--offset", "999999")
        assert 2 == past.returncode
        assert "past the end" in one_error_line(past)

    def test_reindex_gives_the_same_results(self, central: tuple[Path, Path], tmp_path: Path) -> None:
        """reindex rebuilds from the archive alone; results are the same before and after."""
        sessions, archive = central
        args = ("search", "the", "--archive", str(archive), "--json", "--limit", "50")
        before = invoke(*args).stdout
        state = Path(os.environ["XDG_STATE_HOME"]) / "pbot-watch" / "search.db"
        state.unlink()
        for suffix in ("-wal", "-shm"):
            Path(str(state) + suffix).unlink(missing_ok=True)
        rebuilt = invoke("reindex", "--archive", str(archive), "--sessions", str(sessions))
        assert 0 == rebuilt.returncode, rebuilt.stderr
        assert "records" in rebuilt.stdout
        assert before == invoke(*args).stdout

    def test_workspaces_found_from_session_headers(self, tmp_path: Path) -> None:
        """Without --archive, records are found in the workspaces named by the session headers."""
        workspace = tmp_path / "project"
        workspace.mkdir()
        root = tmp_path / "sessions"
        w = PiSession("sess-ws", str(workspace), file=root / "p" / "s.jsonl")
        w.user("where is the 配置文件?", id="u1")
        w.assistant("in config/", id="a1")
        assert 0 == invoke("index", "--sessions", str(root)).returncode
        result = invoke("search", "配置", "--sessions", str(root), "--json")
        data = json.loads(result.stdout)
        assert 1 == data["total"]
        assert str(workspace) == data["matches"][0]["workspace"]
        narrowed = json.loads(
            invoke(
                "search", "配置", "--sessions", str(root), "--workspace", str(tmp_path / "other"), "--json"
            ).stdout
        )
        assert 0 == narrowed["total"]


class TestMemoryCommands:
    def test_search_recall_and_errors(self, tmp_path: Path) -> None:
        """memory search finds a tool result; recall prints numbered lines; bad input is one line."""
        root = tmp_path / "sessions"
        w = PiSession("sess-m", file=root / "s.jsonl")
        w.user("list files", id="u1")
        w.assistant(None, calls=[("c1", "bash", {"command": "ls"})], id="a1")
        w.tool_result("alpha.txt\nbeta.txt\n", call_id="c1", name="bash", id="t1")
        w.assistant("two files", id="a2")
        found = json.loads(invoke("memory", "search", "beta", "--sessions", str(root), "--json").stdout)
        assert 1 == found["total"]
        hit = found["hits"][0]
        assert (3, "tool", "retained") == (hit["line"], hit["kind"], hit["context"])
        recalled = invoke("recall", hit["handle"], "--from", "2", "--sessions", str(root))
        assert 0 == recalled.returncode
        assert "2  alpha.txt" in recalled.stdout and "3  beta.txt" in recalled.stdout
        data = json.loads(invoke("recall", hit["handle"], "--sessions", str(root), "--json").stdout)
        assert data["nextLine"] is None and 3 == data["totalLines"]
        bad_handle = invoke("recall", "m1.nothing", "--sessions", str(root))
        assert 4 == bad_handle.returncode
        assert "unknown memory handle" in one_error_line(bad_handle)
        bad_cursor = invoke("memory", "search", "beta", "--after", "zzz", "--sessions", str(root))
        assert 2 == bad_cursor.returncode
        assert "invalid cursor" in one_error_line(bad_cursor)
        past = invoke("recall", hit["handle"], "--from", "9", "--sessions", str(root))
        assert 2 == past.returncode
        assert "outside" in one_error_line(past)

    def test_historical_hits_come_first_and_say_so(self, tmp_path: Path) -> None:
        """After a compaction, the hit that left the model's context is listed first, labelled historical."""
        root = tmp_path / "sessions"
        w = PiSession("sess-m", file=root / "s.jsonl")
        w.user("old budget question", id="u1")
        w.user("new budget question", id="u2")
        w.compaction("u2", id="c1")
        shown = invoke("memory", "search", "budget", "--sessions", str(root))
        assert 0 == shown.returncode, shown.stderr
        heads = [line for line in shown.stdout.splitlines() if "budget question  " in line]
        assert "old budget question  historical" in heads[0]
        assert "new budget question  retained" in heads[1]

    def test_crafted_handle_with_a_huge_number_is_unknown(self, tmp_path: Path) -> None:
        """A handle carrying a 31-digit part is an unknown handle (exit 4) for recall and --in, not a crash."""
        root = tmp_path / "sessions"
        w = PiSession("sess-m", file=root / "s.jsonl")
        w.user("list files", id="u1")
        raw = json.dumps(["sess-m", "u1", 10**30], separators=(",", ":")).encode()
        handle = "m1." + base64.urlsafe_b64encode(raw).decode().rstrip("=")
        for command in (["recall", handle], ["memory", "search", "files", "--in", handle]):
            result = invoke(*command, "--sessions", str(root))
            assert 4 == result.returncode, result.stderr
            assert "unknown memory handle" in one_error_line(result)


class TestImports:
    @pytest.mark.parametrize(
        "command", [["search", "x"], ["read", "nope"], ["memory", "search", "x"], ["recall", "m1.x"]]
    )
    def test_no_litellm_or_watchdog(self, command: list[str], tmp_path: Path) -> None:
        """search, read, memory search and recall never import litellm or watchdog."""
        (tmp_path / "a").mkdir()
        args = [*command, "--archive", str(tmp_path / "a"), "--sessions", str(tmp_path)]
        assert [] == modules_after(*args, among=("litellm", "watchdog"))


class TestWarnings:
    def test_unreadable_record_is_a_warning(self, central: tuple[Path, Path]) -> None:
        """A file in the archive that is not a record is reported in warnings, not fatal."""
        _, archive = central
        (archive / "broken.json").write_text("{not json", encoding="utf-8")
        data = json.loads(invoke("search", "notes", "--archive", str(archive), "--json").stdout)
        assert data["total"] > 0
        assert any("broken.json" in w for w in data["warnings"])
