"""Every real Pi-written fixture in ../shared/fixtures/pi-sessions, with concrete expectations.

``test_pbot_parity`` proves the same records as pbot; these tests say what those records are,
so a reader sees the rules on real files and a failure names the exchange that moved.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from pbot_watch.history.project import SessionFile
from tests.support.paths import FIXTURES
from tests.support.pi_sessions import exchanges_of, history_of, record_of

V3 = FIXTURES / "real-v3"
ONLOAD = FIXTURES / "onload"


def data(path: Path) -> bytes:
    return path.read_bytes()


def entry_ids(path: Path) -> list[list[list[str]]]:
    return [[ex[0] for ex in branch] for branch in exchanges_of(data(path))]


class TestRealV3:
    def test_01_plain_multiturn(self) -> None:
        """Three completed turns on one branch, named by --name."""
        history = history_of(data(V3 / "01-plain-multiturn.jsonl"))
        assert "Plain multi-turn sample" == history.name
        assert [[["90f7f050", "9e71754c"], ["6dd7691f", "9b2aed3d"], ["43da1df0", "8811a772"]]] == entry_ids(
            V3 / "01-plain-multiturn.jsonl"
        )

    def test_02_tool_calls_leave_only_final_answers(self) -> None:
        """Tool calls and thinking are dropped: each exchange is the question and the final answer."""
        branches = exchanges_of(data(V3 / "02-tool-calls.jsonl"))
        assert [
            ["0c9116ca", "581a1106"],
            ["41366643", "a1e59f44"],
            ["4e833107", "bd565fda"],
            ["259f01c1", "f0e95acf"],
        ] == [ex[0] for ex in branches[0]]
        assert branches[0][0][2].startswith(
            "用户：\nList the project files [[bash: ls -la]]\n\n助手：\nFinal answer #5"
        )
        assert all(completed for _, completed, _ in branches[0])

    def test_03_kitchen_sink_three_branches(self) -> None:
        """Three branches under the first answer; the length cut joins the next user message."""
        branches = entry_ids(V3 / "03-tour-kitchen-sink.jsonl")
        first = ["77b911ff", "78579fa7"]
        assert [
            [
                first,
                ["5f9c66ba", "acd5d26e"],
                ["95c53340", "bbf70fce"],
                ["b91a3f69", "616581cd"],
                ["7d8b1fa9", "e66c10c7"],
                ["e5fbf98b", "4ec298ae", "7d642dea"],
            ],
            [first, ["fcdeea7c", "9ba3e70a"]],
            [first, ["52292155", "5ff08f70"]],
        ] == branches

    def test_03_exchange_with_two_users(self) -> None:
        """The ``length`` answer is dropped: two user ids, then the final answer (three ids)."""
        exchange = exchanges_of(data(V3 / "03-tour-kitchen-sink.jsonl"))[0][5]
        assert ["e5fbf98b", "4ec298ae", "7d642dea"] == exchange[0]
        assert exchange[2].startswith(
            "用户：\n[[length]] Give me a very long answer\n\n用户：\nA question after compaction\n\n助手：\n"
        )
        assert exchange[1] is True

    def test_03_retry_after_503_keeps_only_the_answer(self) -> None:
        """The failed 503 attempt (5111cfd8) is not in the exchange; the retry's answer closes it."""
        exchange = exchanges_of(data(V3 / "03-tour-kitchen-sink.jsonl"))[0][4]
        assert (["7d8b1fa9", "e66c10c7"], True) == exchange[:2]

    def test_03_record_nodes(self) -> None:
        """The main branch's first four exchanges make one summary; the short branches hang from the session.

        The shared first exchange is both a summary's child and (through the short branches) a
        top-level node: it has two parents, as pbot's shared prefixes do.
        """
        record = record_of(data(V3 / "03-tour-kitchen-sink.jsonl"))
        kinds = Counter(node["kind"] for node in record["nodes"])
        assert {"exchange": 8, "summary": 1, "session": 1} == dict(kinds)
        summary = next(n for n in record["nodes"] if n["kind"] == "summary")
        assert "rec:1:616581cd" == summary["id"]
        assert ["77b911ff", "616581cd"] == summary["entryIds"]
        assert ["rec:0:78579fa7", "rec:0:acd5d26e", "rec:0:bbf70fce", "rec:0:616581cd"] == summary["children"]
        session = record["nodes"][-1]
        assert [
            "rec:1:616581cd",
            "rec:0:78579fa7",
            "rec:0:e66c10c7",
            "rec:0:7d642dea",
            "rec:0:9ba3e70a",
            "rec:0:5ff08f70",
        ] == session["children"]
        first = next(n for n in record["nodes"] if n["id"] == "rec:0:78579fa7")
        assert ["rec:1:616581cd", "rec"] == first["parents"]
        assert "RPC feature tour" == record["name"]

    @pytest.mark.parametrize("name", ["04-tour-fork.jsonl", "05-tour-clone.jsonl"])
    def test_04_05_fork_and_clone_copy_ids(self, name: str) -> None:
        """Fork and clone keep 03's entry ids for the copied path and add one turn of their own."""
        assert [[["77b911ff", "78579fa7"], ["5f9c66ba", "acd5d26e"], ["fbd79d79", "b13978cb"]]] == entry_ids(
            V3 / name
        )
        assert "RPC feature tour" == history_of(data(V3 / name)).name

    def test_06_branching_three_tips(self) -> None:
        """Branch B (no summary) and branch C (branch_summary + label as tip) share turn one."""
        first = ["bcff78b4", "eb621f20"]
        assert [
            [first, ["38c733e7", "038bf9fe"], ["3a490aae", "c7721b0f"]],
            [first, ["da6b63e1", "f2d62041"]],
            [first, ["1721df2f", "c9fbd29e"]],
        ] == entry_ids(V3 / "06-branching.jsonl")

    def test_07_auto_compaction_keeps_all_turns(self) -> None:
        """Compaction changes what the model sees, not the file: four exchanges remain."""
        assert 4 == len(entry_ids(V3 / "07-auto-compaction.jsonl")[0])

    def test_08_legacy_073(self) -> None:
        """A 0.73.1 file (no system messages, created at the first answer) reads the same way."""
        assert [[["af10dbba", "70faa472"], ["b8c14560", "a9965ddb"], ["da8280c0", "3f97a6b3"]]] == entry_ids(
            V3 / "08-legacy-0.73.1-tools.jsonl"
        )

    def test_09_large_tool_output_not_in_text(self) -> None:
        """48 KB tool results never reach the exchange text."""
        branch = exchanges_of(data(V3 / "09-large-tool-output.jsonl"))[0]
        assert 3 == len(branch)
        assert all(len(text) < 2000 for _, _, text in branch)


class TestRealV1:
    def test_large_session(self) -> None:
        """Pi's own v1 fixture: 86 exchanges (22 not completed), two with a follow-up user message."""
        state = SessionFile()
        state.feed(data(FIXTURES / "real-v1" / "large-session.jsonl"))
        history = state.history()
        assert history is not None
        branch = history.branches[0]
        assert 1 == len(history.branches)
        assert 86 == len(branch)
        assert {True: 64, False: 22} == dict(Counter(e["completed"] for e in branch))
        assert {2: 84, 3: 2} == dict(Counter(len(e["entryIds"]) for e in branch))
        assert "用户：\n/mode\n\n助手：\n" == branch[0]["text"]
        assert 0 == state.reader.malformed

    def test_v1_ids_are_stable_across_readings(self) -> None:
        """Deterministic ids for v1 entries: two readings give the same record."""
        raw = data(FIXTURES / "real-v1" / "large-session.jsonl")
        assert record_of(raw) == record_of(raw)

    def test_v1_chain_has_several_levels(self) -> None:
        """86 exchanges make 21 level-1 and 5 level-2 summaries and one level-3 summary."""
        record = record_of(data(FIXTURES / "real-v1" / "large-session.jsonl"))
        levels = Counter(n["level"] for n in record["nodes"] if n["kind"] == "summary")
        assert {1: 21, 2: 5, 3: 1} == dict(levels)


class TestOnload:
    def test_v1_before_and_after_pi_rewrite_have_same_text(self) -> None:
        """Pi's migration gives new random ids; the exchanges' text and completion are unchanged."""
        before = exchanges_of(data(ONLOAD / "v1.before.jsonl"))[0]
        after = exchanges_of(data(ONLOAD / "v1.after.jsonl"))[0]
        assert [(c, t) for _, c, t in before] == [(c, t) for _, c, t in after[: len(before)]]
        assert 5 == len(after)

    def test_v2_migration_keeps_ids(self) -> None:
        """v2 -> v3 only renames a role: the ids before and after Pi's rewrite are the same."""
        before = entry_ids(ONLOAD / "v2.before.jsonl")
        after = entry_ids(ONLOAD / "v2.after.jsonl")
        assert before[0] == after[0][:2]

    def test_torn_tail_waits_then_counts_as_malformed(self) -> None:
        """Before: the torn last line has no newline and is not parsed. After Pi's repair: one malformed line."""
        torn = SessionFile()
        torn.feed(data(ONLOAD / "torn.before.jsonl"))
        assert 0 == torn.reader.malformed
        assert torn.reader.lines.pending > 0
        repaired = SessionFile()
        repaired.feed(data(ONLOAD / "torn.after.jsonl"))
        assert 1 == repaired.reader.malformed
        assert [[["b0000001", "b0000002"], ["6b442807", "1f022b96"]]] == entry_ids(
            ONLOAD / "torn.after.jsonl"
        )

    def test_empty_file_is_not_yet_a_session(self) -> None:
        """A 0-byte file has no header yet; after Pi initialised it, one exchange."""
        empty = SessionFile()
        empty.feed(data(ONLOAD / "empty.before.jsonl"))
        assert not empty.is_session
        assert not empty.reader.not_session
        assert 1 == len(entry_ids(ONLOAD / "empty.after.jsonl")[0])

    @pytest.mark.parametrize("name", ["notpi.before.jsonl", "notpi.after.jsonl"])
    def test_not_a_session(self, name: str) -> None:
        """A JSONL file whose first line is not a session header is refused, as Pi does."""
        state = SessionFile()
        state.feed(data(ONLOAD / name))
        assert state.reader.not_session
        assert state.history() is None

    def test_v1_forked_with_cli_fork(self) -> None:
        """Id-less v1 entries under a v3 header are no branch; the one new turn is."""
        assert [[["338fad86", "381ce481"]]] == entry_ids(ONLOAD / "v1-forked-with-cli-fork.after.jsonl")
