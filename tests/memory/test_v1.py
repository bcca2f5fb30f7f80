"""v1 files read as Pi reads them: the same labels, cues and handles before and after Pi's rewrite.

A v1 file (Pi before the tree format) has no entry ids, and its compactions name what they kept
by position (``firstKeptEntryIndex``). Pi rewrites such a file as v3 when it opens it, with ids
of its own. Memory search, the cues and recall must say the same of both files, and a handle
handed out from the v1 file must still recall its source after the rewrite.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pbot_watch.memory.cues import compute_cues
from pbot_watch.memory.index import refresh_memory
from pbot_watch.memory.models import CueState
from pbot_watch.memory.query import recall, search_memory
from pbot_watch.pi.entries import SessionReader, v1_entry_id
from pbot_watch.search.index import SearchIndex
from tests.support.cli import invoke
from tests.support.paths import FIXTURES
from tests.support.pi_sessions import MISSING, PiSession, jsonl, pi_rewrite_v1, rewrite_in_place

ONLOAD = FIXTURES / "onload"
SESSION = "11111111-2222-4333-8444-555555555555"
ORIGINAL = re.compile(r'"(?:id|parentId|firstKeptEntryId)":(?:"[0-9a-f]{8}"|null),?')


def entries_of(data: bytes) -> list[dict[str, Any]]:
    return SessionReader().feed(data)


def v1_work(cwd: str = "/nonexistent/v1") -> PiSession:
    """A v1 session of tool work: three compactions kept by index, the second one past itself."""
    w = PiSession(SESSION, version=None, cwd=cwd)
    no_id = {"id": MISSING, "parent": MISSING}

    def tool(n: int, command: str, output: str, error: bool = False) -> None:
        w.assistant(None, calls=[(f"call-{n}", "bash", {"command": command})], **no_id)
        w.tool_result(output, call_id=f"call-{n}", error=error, **no_id)

    w.user("make the budget check pass", **no_id)
    tool(1, "npm test", "FAIL budget zqxv1 over limit\n", error=True)
    tool(2, "cat src/budget.ts", "export const LIMIT = 10\n")
    w.user("raise the limit to 20", **no_id)  # line 6 of the file (header = 0)
    tool(3, "sed -i s/10/20/ src/budget.ts", "")
    w.add("compaction", summary="Fixed the budget.", firstKeptEntryIndex=6, tokensBefore=9000, **no_id)
    w.user("now the docs", **no_id)
    tool(4, "npm run docs", "docs built\n")
    tool(5, "npm run lint", "lint: 2 errors\n", error=True)
    w.add("compaction", summary="Docs built.", firstKeptEntryIndex=99, tokensBefore=9000, **no_id)
    w.user("and after that?", **no_id)
    tool(6, "git status", "clean\n")
    w.user("release it", **no_id)  # line 19
    w.add("compaction", summary="Released.", firstKeptEntryIndex=19, tokensBefore=9000, **no_id)
    w.user("thanks", **no_id)
    return w


@pytest.fixture
def indexes(tmp_path: Path) -> Iterator[tuple[SearchIndex, SearchIndex]]:
    a, b = SearchIndex(tmp_path / "a.db"), SearchIndex(tmp_path / "b.db")
    yield a, b
    a.close()
    b.close()


def labels(index: SearchIndex, root: Path) -> list[tuple[str, str, str, str]]:
    """Every source memory search lists, newest first: kind, time, label, context."""
    refresh_memory(index, [root])
    out, cursor = [], None
    while True:
        page = search_memory(index, "", limit=50, after=cursor)
        out += [(h.kind, h.timestamp, h.label, h.context) for h in page.hits]
        if page.next_cursor is None:
            return out
        cursor = page.next_cursor


def cue_lines(state: CueState) -> list[tuple[str, str, str]]:
    """The cue lines without their handles (the ids in them are the file's own)."""
    return [(line.stage, line.cue_class, line.text.replace(line.handle, "HANDLE")) for line in state.lines]


def cues(data: bytes) -> CueState:
    return compute_cues(entries_of(data), session_id=SESSION)


class TestReader:
    def test_first_kept_index_becomes_the_id_of_the_entry_there(self) -> None:
        """``firstKeptEntryIndex`` counts the parsed lines, header = 0: the entry there is kept."""
        entries = entries_of(v1_work().data())
        first, second, _third = [e for e in entries if e["type"] == "compaction"]
        assert entries[5]["id"] == first["firstKeptEntryId"]
        assert "firstKeptEntryIndex" not in first
        assert "firstKeptEntryId" not in second  # past the compaction: Pi keeps nothing

    def test_an_index_at_the_compaction_itself_keeps_nothing(self) -> None:
        """An index naming the compaction's own line gives its own id (Pi's "retain none")."""
        w = PiSession(SESSION, version=None)
        w.user("one", id=MISSING, parent=MISSING)
        w.add("compaction", summary="s", firstKeptEntryIndex=2, tokensBefore=1, id=MISSING, parent=MISSING)
        compaction = entries_of(w.data())[1]
        assert v1_entry_id(SESSION, 1) == compaction["id"] == compaction["firstKeptEntryId"]

    def test_extra_header_lines_count_as_pi_counts_them(self) -> None:
        """A header line inside a v1 file (files joined) is a line of Pi's index, but no entry."""
        w = PiSession(SESSION, version=None)
        w.user("one", id=MISSING, parent=MISSING)
        w.raw(json.dumps({"type": "session", "id": SESSION}).encode() + b"\n")
        w.user("two", id=MISSING, parent=MISSING)
        w.add("compaction", summary="s", firstKeptEntryIndex=3, tokensBefore=1, id=MISSING, parent=MISSING)
        w.add("compaction", summary="s", firstKeptEntryIndex=2, tokensBefore=1, id=MISSING, parent=MISSING)
        entries = entries_of(w.data())
        assert entries[1]["id"] == entries[2]["firstKeptEntryId"]  # line 3 is "two"
        assert "firstKeptEntryId" not in entries[3]  # line 2 is the header: nothing is set

    def test_the_rewrite_helper_is_what_pi_wrote(self) -> None:
        """``pi_rewrite_v1`` of Pi's own v1 sample is the file Pi wrote from it, ids aside."""
        before = (ONLOAD / "v1.before.jsonl").read_bytes()
        after = (ONLOAD / "v1.after.jsonl").read_bytes().splitlines(keepends=True)
        ours = pi_rewrite_v1(before, random.Random(1)).splitlines(keepends=True)
        assert [ORIGINAL.sub("", line.decode()) for line in after[: len(ours)]] == [
            ORIGINAL.sub("", line.decode()) for line in ours
        ]


class TestSameAsPiRewrite:
    def test_onload_fixtures_give_the_same_labels(self, tmp_path: Path) -> None:
        """The public repro: memory search labels the v1 file's entries as it labels Pi's v3 rewrite."""
        contexts = {}
        for name in ("v1.before", "v1.after"):
            root = tmp_path / name
            root.mkdir()
            shutil.copy(ONLOAD / f"{name}.jsonl", root)
            done = invoke("memory", "search", "--sessions", str(root), "--json")
            assert 0 == done.returncode, done.stderr
            hits = json.loads(done.stdout)["hits"]
            # the v1 file's own entries (Pi appended a turn of its own to the rewrite)
            contexts[name] = [(h["label"], h["context"]) for h in hits if h["timestamp"] < "2026-02"]
        assert contexts["v1.before"] == contexts["v1.after"]
        pre = [c for label, c in contexts["v1.before"] if "turn" in label]
        assert ["retained"] * 2 + ["historical"] * 4 == pre  # turn 3 on is kept (index 5)

    def test_labels_and_cues_equal_those_of_the_rewrite(
        self, tmp_path: Path, indexes: tuple[SearchIndex, SearchIndex]
    ) -> None:
        """Tool work, three compactions kept by index: the same labels and cue lines either way."""
        v1 = v1_work().data()
        v3 = pi_rewrite_v1(v1, random.Random(3))
        (tmp_path / "v1").mkdir()
        (tmp_path / "v3").mkdir()
        (tmp_path / "v1" / "s.jsonl").write_bytes(v1)
        (tmp_path / "v3" / "s.jsonl").write_bytes(v3)
        assert labels(indexes[0], tmp_path / "v1") == labels(indexes[1], tmp_path / "v3")
        before, after = cues(v1), cues(v3)
        assert cue_lines(before) == cue_lines(after)
        assert 3 == before.batch
        assert any("zqxv1" in line.text for line in before.lines)
        assert any("lint" in line.text for line in before.lines)  # the second compaction kept nothing

    def test_a_real_v1_session_with_a_compaction(
        self, tmp_path: Path, indexes: tuple[SearchIndex, SearchIndex]
    ) -> None:
        """Pi's own large v1 fixture, compacted at its 500th line: the same labels and cues as its rewrite."""
        data = (FIXTURES / "real-v1" / "large-session.jsonl").read_bytes()
        compaction = {
            "type": "compaction",
            "timestamp": "2025-11-21T09:00:00.000Z",
            "summary": "Earlier work.",
        }
        data += jsonl([{**compaction, "firstKeptEntryIndex": 500, "tokensBefore": 150000}])
        rewritten = pi_rewrite_v1(data, random.Random(5))
        for name, body in (("v1", data), ("v3", rewritten)):
            (tmp_path / name).mkdir()
            (tmp_path / name / "s.jsonl").write_bytes(body)
        first = labels(indexes[0], tmp_path / "v1")
        assert first == labels(indexes[1], tmp_path / "v3")
        assert {"historical", "retained"} == {c for *_rest, c in first}
        session_id = json.loads(data.split(b"\n", 1)[0])["id"]
        before = compute_cues(entries_of(data), session_id=session_id)
        after = compute_cues(entries_of(rewritten), session_id=session_id)
        assert before.lines
        assert cue_lines(before) == cue_lines(after)


class TestHandlesAcrossTheRewrite:
    def test_a_v1_handle_recalls_its_source_after_pi_rewrote_the_file(self, tmp_path: Path) -> None:
        """Memory-search and cue handles made from the v1 file name the same sources in the v3 file."""
        path = tmp_path / "sessions" / "s.jsonl"
        path.parent.mkdir()
        v1 = v1_work().data()
        path.write_bytes(v1)
        index = SearchIndex(tmp_path / "search.db")
        try:
            refresh_memory(index, [path.parent])
            hit = search_memory(index, "zqxv1").hits[0]
            cue_handles = [line.handle for line in cues(v1).lines]
            texts = {h: recall(index, h).text for h in [hit.handle, *cue_handles]}
            rewrite_in_place(path, pi_rewrite_v1(v1, random.Random(11)))
            refresh_memory(index, [path.parent])
            assert hit.entry_id != search_memory(index, "zqxv1").hits[0].entry_id  # Pi's ids now
            assert texts == {h: recall(index, h).text for h in texts}
        finally:
            index.close()


class TestOneRuleForLabelsAndCues:
    def test_kept_entry_off_the_branch(self, tmp_path: Path) -> None:
        """A compaction naming an entry of another branch: the tool result before it is historical
        in memory search and a line of the cues, both by Pi's rule (nothing before it is kept)."""
        path = tmp_path / "sessions" / "s.jsonl"
        w = PiSession(SESSION, file=path)
        w.user("check the budget", id="u1")
        w.assistant(None, calls=[("call-1", "bash", {"command": "npm test"})], id="a1")
        w.tool_result("FAIL zqxoff over budget\n", call_id="call-1", error=True, id="t1")
        w.user("try another way", id="u2", parent="u1")  # a branch beside a1..t1
        w.user("back to the first way", id="u3", parent="t1")
        w.compaction("u2", id="c1")  # u2 is not on this branch
        w.user("go on", id="u4")
        index = SearchIndex(tmp_path / "search.db")
        try:
            refresh_memory(index, [path.parent])
            (hit,) = search_memory(index, "zqxoff").hits
        finally:
            index.close()
        state = compute_cues(entries_of(path.read_bytes()), session_id=SESSION)
        assert "historical" == hit.context
        assert [hit.entry_id] == [line.entry_id for line in state.lines]  # the cue shows the short form
