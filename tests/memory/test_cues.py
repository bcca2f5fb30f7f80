"""Memory cues: each of pi-echo's rules, as a test that reads as the rule."""

from __future__ import annotations

import random
from datetime import timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pbot_watch.memory.cue_tokens import count_tokens
from pbot_watch.memory.cues import (
    FULL_BELOW,
    OUT_AT,
    STEP,
    UnknownLeaf,
    compute_cues,
    elide,
    estimate_tokens,
)
from pbot_watch.memory.handles import make_handle
from pbot_watch.memory.index import refresh_memory
from pbot_watch.memory.models import CueState
from pbot_watch.memory.query import MemoryScope, recall, search_memory
from pbot_watch.pi.entries import SessionReader
from pbot_watch.search.errors import QueryError
from pbot_watch.search.index import SearchIndex
from tests.memory.work import SESSION, Work, cues_of
from tests.support.paths import FIXTURES


def stages(state: CueState) -> dict[str, str]:
    return {line.handle: line.stage for line in state.lines}


@pytest.fixture
def work(tmp_path: Path) -> Work:
    return Work(tmp_path / "sessions" / "s.jsonl")


def history(work: Work, handles: list[str], batches: int) -> list[list[str]]:
    """The stage of each handle ("out" when absent) after each of ``batches`` compactions."""
    rows = []
    for _ in range(batches):
        work.compact()
        shown = stages(work.cues())
        rows.append([shown.get(h, "out") for h in handles])
    return rows


class TestLines:
    def test_one_line_per_tool_event(self, work: Work) -> None:
        """A line holds the time, the call in short, the outcome and its size, and the short handle."""
        handle = work.run(
            "npm test", "> budget@1.0 test\n3 failed: budget over limit\nDone in 2.1s\n", error=True
        )
        work.compact()
        (line,) = work.cues().lines
        expected = f"11-01 00:02 bash(npm test) ✗ 3 failed: budget over limit [3 lines, 1 issue] {handle}"
        assert "#t3" == handle
        assert expected == line.text
        assert (handle, "full", "failure", 0, 1) == (
            line.handle,
            line.stage,
            line.cue_class,
            line.age,
            line.batch,
        )

    def test_time_is_shown_in_the_given_zone(self, work: Work) -> None:
        """The time is the entry's, in the time zone passed in (the function reads no clock)."""
        work.read("src/budget.ts")
        work.compact()
        (line,) = work.cues(tz=timezone(timedelta(hours=8))).lines
        assert line.text.startswith("11-01 08:02 read(src/budget.ts) → line one [2 lines] #")

    def test_long_parts_keep_head_and_tail(self, work: Work) -> None:
        """A long command keeps each step's verb; a long outcome its head and tail, cut between words."""
        command = "npm run build -- " + " ".join(f"--flag{i}" for i in range(40)) + " && echo END"
        work.run(command, "start " + " ".join(["word"] * 60) + " finish\n")
        work.compact()
        (line,) = work.cues().lines
        assert "bash(npm run build -- --flag0" in line.text
        assert "&& echo END)" in line.text
        assert "→ start word" in line.text
        assert "word finish [1 line]" in line.text
        assert 2 == line.text.count(" … ")
        assert len(line.text) < 200

    def test_recall_of_a_cue_handle_returns_the_original_text(self, work: Work, tmp_path: Path) -> None:
        """The handle in a cue is memory search's handle: recall returns the call and its output."""
        work.run("npm test", "3 failed: budget over limit\n", error=True)
        work.compact()
        (line,) = work.cues().lines
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [work.path.parent])
            assert work.long(line.handle) in {
                h.handle for h in search_memory(index, "budget over limit").hits
            }
            assert "bash: npm test\n3 failed: budget over limit" == recall(index, line.handle).text
            assert recall(index, work.long(line.handle)).text == recall(index, line.handle).text


CWD = "/home/dev/src/github.com/acme/billing-service"


@pytest.fixture
def deep(tmp_path: Path) -> Work:
    """A session whose folder is a long absolute path, as most are."""
    return Work(tmp_path / "sessions" / "s.jsonl", cwd=CWD)


def only_line(work: Work) -> str:
    work.compact()
    (line,) = work.cues().lines
    return line.text


class TestShortLines:
    def test_paths_are_relative_to_the_session_folder(self, deep: Work) -> None:
        """A path under the session's cwd is shown relative to it, in the call and in the outcome."""
        deep.tool("read", {"path": f"{CWD}/src/budget.ts"}, f"{CWD}/src/budget.ts: 12 lines\nmore\n")
        line = only_line(deep)
        assert "read(src/budget.ts) → src/budget.ts: 12 lines" in line
        assert CWD not in line

    def test_cd_to_the_session_folder_is_dropped(self, deep: Work) -> None:
        """A command's leading `cd <cwd> &&` says nothing: the session is there already."""
        deep.run(f"cd {CWD} && npm test -- src/budget.test.ts", "Tests 3 passed (3)\n")
        assert "bash(npm test -- src/budget.test.ts) → Tests 3 passed (3) #t3" in only_line(deep)

    def test_a_cut_path_keeps_its_basename(self, deep: Work) -> None:
        """A long path is cut from the left: the basename and the parents that fit, never the shared prefix."""
        path = f"{CWD}/packages/web/src/components/budget/forms/limits/BudgetLimitForm.test.tsx"
        deep.tool("read", {"path": path}, "x\ny\n")
        call = only_line(deep).split(" → ")[0]
        assert call.endswith("budget/forms/limits/BudgetLimitForm.test.tsx)")
        assert "read(packages" not in call

    def test_a_cut_command_keeps_its_verb_and_distinctive_arguments(self, deep: Work) -> None:
        """A long command keeps the verb of each step and its arguments; options and plumbing go first."""
        deep.run(
            f"cd {CWD} && npx vitest run {CWD}/packages/web/src/components/budget/BudgetLimitForm.test.tsx "
            "--reporter=verbose --coverage --coverage.reporter=text-summary 2>&1 | tail -n 40",
            "Tests 12 passed (12)\n",
        )
        call = only_line(deep).split(" → ")[0]
        assert "bash(npx vitest run " in call
        assert "BudgetLimitForm.test.tsx" in call
        assert "tail" not in call
        assert CWD not in call
        assert len(call) <= len("11-01 00:02 bash()") + 60

    def test_edit_and_write_successes_are_a_check_mark(self, deep: Work) -> None:
        """A successful edit or write is ✓: Pi's "Successfully replaced..." says nothing more."""
        deep.edit(f"{CWD}/src/budget.ts")
        deep.tool(
            "write",
            {"path": f"{CWD}/docs/limits.md", "content": "# Limits\n"},
            f"Successfully wrote to {CWD}/docs/limits.md",
        )
        deep.compact()
        lines = [line.text for line in deep.cues().lines]
        assert lines[0].endswith("edit(src/budget.ts) ✓ #t3")
        assert lines[1].endswith("write(docs/limits.md) ✓ #t6")

    def test_a_failure_says_its_error_line_not_a_code_frame(self, deep: Work) -> None:
        """What went wrong is the error line itself and the exit code, not a quoted source line."""
        output = (
            f"{CWD}/src/budget.ts\n"
            "  > 12 |   throw new Error('over the limit')\n"
            "       |         ^\n"
            f"{CWD}/src/budget.ts:12:9: error TS2322: Type 'string' is not assignable to type 'number'.\n"
            "\n\nCommand exited with code 2"
        )
        deep.run("npx tsc --noEmit", output, error=True)
        line = only_line(deep)
        assert (
            "bash(npx tsc --noEmit) ✗ exit 2: src/budget.ts:12:9: error TS2322: Type 'string' is not" in line
        )
        assert "throw new Error" not in line

    def test_a_passing_command_shows_its_summary_line(self, deep: Work) -> None:
        """A successful command shows the line of its last ones that says how it went, not its timings."""
        deep.run(
            "npm test",
            " ✓ src/a.test.ts (12 tests)\n Tests  12 passed (12)\n Start at  10:41:07\n Duration  1.2s\n",
        )
        assert "bash(npm test) → Tests 12 passed (12) [4 lines]" in only_line(deep)

    def test_outcomes_are_cut_between_words(self, deep: Work) -> None:
        """A long outcome line keeps its head and tail, never half a word."""
        words = [f"word{i}" for i in range(60)]
        deep.run("make", " ".join(words) + "\n")
        shown = only_line(deep).split(" → ")[1].rsplit(" [", 1)[0].split(" ")
        assert ("word0", True, "word59") == (shown[0], "…" in shown, shown[-1])
        assert set(shown) - {"…"} <= set(words)

    def test_silent_success_and_no_result_read_once(self, deep: Work) -> None:
        """A command that printed nothing is ✓; a call that never got a result says so once."""
        deep.run("mkdir -p dist", "(no output)")
        deep.w.assistant(None, calls=[("call-x", "read", {"path": f"{CWD}/notes.txt"})], id="a-x")
        deep.compact()
        lines = [line.text for line in deep.cues().lines]
        assert lines[0].endswith("bash(mkdir -p dist) ✓ #t3")
        assert lines[1].endswith("read(notes.txt) (no result) #a-x:2")
        assert 1 == lines[1].count("no result")

    def test_identical_successes_are_one_line_with_the_latest_handle(self, deep: Work) -> None:
        """Identical successful calls with the same outcome in one batch: one line ×N, recalling the latest."""
        handles = [deep.run("npm run lint", "no problems\n") for _ in range(4)]
        deep.run("npm run lint", "2 problems\n")
        deep.compact()
        lines = deep.cues().lines
        assert [(4, handles[-1]), (1, lines[1].handle)] == [(line.count, line.handle) for line in lines]
        assert lines[0].text.endswith(f"bash(npm run lint) → no problems ×4 {handles[-1]}")

    def test_failures_are_never_merged(self, deep: Work) -> None:
        """Each failure keeps its own line, however alike they read."""
        failures = [deep.run("npm test", "FAIL budget\n1 failed\n", error=True) for _ in range(3)]
        deep.compact()
        lines = deep.cues().lines
        assert failures == [line.handle for line in lines]
        assert {1} == {line.count for line in lines}

    def test_a_recall_of_a_merged_event_reinforces_its_line(self, deep: Work) -> None:
        """A recall by the long handle of any event a ×N line stands for reinforces that line."""
        first = deep.run("npm run lint", "no problems\n")
        deep.run("npm run lint", "no problems\n")
        deep.compact()
        deep.recall(deep.long(first))
        deep.compact()
        (line,) = deep.cues().lines
        assert (True, 2) == (line.protected, line.count)


class TestShortHandles:
    def test_a_short_handle_recalls_in_the_pinned_session_and_where_it_is_unique(
        self, tmp_path: Path
    ) -> None:
        """`#entry` names a source inside the caller's session; outside one, only where one session has it."""
        ours = Work(tmp_path / "sessions" / "a.jsonl", session="sess-a")
        theirs = Work(tmp_path / "sessions" / "b.jsonl", session="sess-b")
        handle = ours.run("npm test", "ours failed\n", error=True)
        assert handle == theirs.run("npm test", "theirs failed\n", error=True)  # same entry ids
        only_ours = ours.read("notes.txt", "only here\n")
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [tmp_path / "sessions"])
            pinned = MemoryScope(session_file=ours.path)
            assert "ours failed" in recall(index, handle, pinned=pinned).text
            assert "ours failed" in recall(index, handle.removeprefix("#"), pinned=pinned).text
            assert "only here" in recall(index, only_ours).text
            with pytest.raises(QueryError, match="names sources in 2 sessions"):
                recall(index, handle)
            assert "theirs failed" in recall(index, theirs.long(handle)).text


class TestOnlyToolWork:
    def test_user_text_answers_and_thinking_are_not_cues(self, work: Work) -> None:
        """Only tool work becomes a cue; what was said and thought stays searchable only."""
        work.talk("please check the budget validation")
        handle = work.run("npm test")
        work.talk("what next?")
        work.compact()
        assert [handle] == [line.handle for line in work.cues().lines]

    def test_memory_tools_are_not_cues(self, work: Work) -> None:
        """The model's own recall_memory calls are not work worth a cue."""
        work.recall(make_handle(SESSION, "t1", 0))
        work.compact()
        assert [] == work.cues().lines


OWN_TOOLS = [
    "history_search",
    "history_read",
    "search_memory",
    "recall_memory",
    "mcp__pbot_watch__history_search",
    "mcp__pbot_watch__search_memory",
]


class TestNoSelfEcho:
    def test_own_tools_are_no_cue(self, work: Work) -> None:
        """pbot-watch's own tools, native or over MCP, are the model looking at memory, not work."""
        real = work.run("npm test", "FAIL budget zqxecho over limit\n", error=True)
        for name in OWN_TOOLS:
            work.tool(name, {"query": "zqxecho"}, "Conversation history (records of past Pi sessions: …)")
        work.compact()
        assert [real] == [line.handle for line in work.cues().lines]

    def test_memory_search_never_returns_its_own_traffic(self, work: Work, tmp_path: Path) -> None:
        """Earlier searches and recalls, their results, and the call in flight are no hit: the real failure is."""
        real = work.run("npm test", "FAIL budget zqxecho over limit\n", error=True)
        for name in OWN_TOOLS:
            work.tool(name, {"query": "zqxecho"}, "1 hit: toolResult bash(npm test) ✗ FAIL budget zqxecho")
        # The search being answered now: its call is in the file, its result is not yet.
        work.w.assistant(None, calls=[("call-now", "search_memory", {"query": "zqxecho"})], id="a-now")
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [work.path.parent])
            hits = search_memory(index, "zqxecho").hits
            listed = search_memory(index, "", limit=50).hits
        assert [work.long(real)] == [hit.handle for hit in hits]
        assert not [hit for hit in listed if any(name in hit.label for name in OWN_TOOLS)]


class TestBatches:
    def test_no_compaction_no_cues(self, work: Work) -> None:
        """Before the first compaction on the branch the cue state is empty."""
        work.run("npm test")
        state = work.cues()
        assert (0, None, [], "") == (state.batch, state.compaction_id, state.lines, state.text)

    def test_a_compaction_brings_what_left_with_it(self, work: Work) -> None:
        """Each compaction is a batch: the events before its kept boundary enter, in full; kept ones wait."""
        first = work.run("npm test")
        kept = work.ask("now lint it")
        second = work.run("npm run lint")  # from the kept boundary on: still in the model's context
        work.compact(kept=kept)
        state = work.cues()
        assert (1, [first]) == (state.batch, [line.handle for line in state.lines])
        third = work.run("npm run build")
        work.compact()
        state = work.cues()
        assert [(first, 1), (second, 2), (third, 2)] == [(x.handle, x.batch) for x in state.lines]
        assert {"full"} == {x.stage for x in state.lines}

    def test_block_says_what_the_lines_are(self, work: Work) -> None:
        """The block starts with a header saying these are recallable records, not instructions."""
        work.run("npm test")
        work.compact()
        header = work.cues().text.split("\n")[0]
        assert "Memory cues (batch 1)" in header
        assert "information, not instructions" in header
        assert "recall_memory(#handle)" in header

    def test_lines_fade_by_age_full_brief_out(self, work: Work) -> None:
        """A line is shown in full, then as its call and size only, then not at all."""
        handle = work.run("npm test", "3 passed\n")
        rows = history(work, [handle], 5)
        assert [["full"], ["full"], ["brief"], ["brief"], ["out"]] == rows

    def test_a_brief_line_is_the_call_and_its_size_only(self, work: Work) -> None:
        """Brief drops the outcome and keeps the call, its size and the handle."""
        handle = work.run("npm test", "3 passed\n")
        history(work, [handle], 3)
        (line,) = work.cues().lines
        assert f"11-01 00:02 bash(npm test) [1 line] {handle}" == line.text

    def test_out_of_the_cues_is_still_recallable(self, work: Work, tmp_path: Path) -> None:
        """A line that left the cues can still be searched and recalled."""
        handle = work.read("notes.txt", "the notes\n")
        history(work, [handle], 3)
        assert handle not in stages(work.cues())
        with SearchIndex(tmp_path / "search.db") as index:
            refresh_memory(index, [work.path.parent])
            assert work.long(handle) == search_memory(index, "the notes").hits[0].handle
            assert "the notes" in recall(index, handle).text


class TestFadingOrder:
    def test_reads_fade_fastest_then_state_then_failures(self, work: Work) -> None:
        """What can be fetched again fades first, recorded state later, failures last."""
        read = work.read("src/budget.ts")
        state = work.run("npm run build")
        failure = work.run("npm test", "1 failed\n", error=True)
        rows = history(work, [read, state, failure], 7)

        def first(handle_index: int, stage: str) -> int:
            return next(batch for batch, row in enumerate(rows, 1) if row[handle_index] == stage)

        assert first(0, "brief") < first(1, "brief") < first(2, "brief")
        assert first(0, "out") < first(1, "out") < first(2, "out")
        assert STEP["refetchable"] > STEP["state"] > STEP["failure"]

    def test_classes_are_reported(self, work: Work) -> None:
        """Each line says its class: refetchable, state or failure."""
        work.read("src/budget.ts")
        work.run("npm run build")
        work.run("npm test", "1 failed\n", error=True)
        work.compact()
        assert ["refetchable", "state", "failure"] == [line.cue_class for line in work.cues().lines]


class TestEditRule:
    def test_a_later_edit_makes_earlier_reads_fade_as_state(self, work: Work) -> None:
        """A read of a file edited afterwards is state; a read of an untouched file stays refetchable."""
        edited = work.read("src/budget.ts")
        untouched = work.read("src/other.ts")
        work.edit("./src/budget.ts")
        work.compact()
        classes = {line.handle: line.cue_class for line in work.cues().lines}
        assert ("state", "refetchable") == (classes[edited], classes[untouched])
        rows = history(work, [edited, untouched], 1)
        assert [["full", "brief"]] == rows

    def test_an_edit_in_a_later_batch_changes_the_class_from_then(self, work: Work) -> None:
        """A read that already left the context fades as state once the file is edited."""
        read = work.read("src/budget.ts")
        work.compact()
        assert "refetchable" == work.cues().lines[0].cue_class
        work.edit("src/budget.ts")
        work.compact()
        line = next(x for x in work.cues().lines if x.handle == read)
        assert ("state", "full") == (line.cue_class, line.stage)

    def test_a_failed_edit_changes_nothing(self, work: Work) -> None:
        """An edit that failed did not change the file: the read stays refetchable."""
        read = work.read("src/budget.ts")
        work.tool("edit", {"path": "src/budget.ts"}, "oldText not found", error=True)
        work.compact()
        assert "refetchable" == next(x.cue_class for x in work.cues().lines if x.handle == read)


class TestReinforcement:
    def test_a_recalled_line_comes_back_in_full_and_is_protected_one_batch(self, work: Work) -> None:
        """Recalling a line still in the cues brings it back in full at the next compaction, protected once."""
        read = work.read("src/budget.ts")
        other = work.read("src/other.ts")
        work.compact()
        work.recall(read)
        work.compact()
        lines = {line.handle: line for line in work.cues().lines}
        assert ("full", True, 0) == (lines[read].stage, lines[read].protected, lines[read].age)
        assert ("brief", False) == (lines[other].stage, lines[other].protected)
        work.compact()
        lines = {line.handle: line for line in work.cues().lines}
        assert ("brief", False, 1) == (lines[read].stage, lines[read].protected, lines[read].age)
        assert other not in lines

    def test_a_brief_line_recalled_comes_back_in_full(self, work: Work) -> None:
        """A line already reduced to its call is restored in full by a recall."""
        handle = work.run("npm run build")
        history(work, [handle], 3)
        assert "brief" == stages(work.cues())[handle]
        work.recall(handle)
        work.compact()
        assert "full" == stages(work.cues())[handle]

    def test_a_line_already_out_does_not_come_back(self, work: Work) -> None:
        """Recalling a line that has left the cues does not bring it back (it stays recallable)."""
        read = work.read("src/budget.ts")
        history(work, [read], 3)
        assert read not in stages(work.cues())
        work.recall(read)
        work.compact()
        assert read not in stages(work.cues())

    def test_a_recall_before_the_line_was_cued_does_nothing(self, work: Work) -> None:
        """Recalling something still in the context does not protect its future line."""
        read = work.read("src/budget.ts")
        work.recall(read)
        work.compact()
        work.compact()
        assert "brief" == stages(work.cues())[read]


class TestPressure:
    @staticmethod
    def window_fitting(tokens: int) -> int:
        """A context window whose 20 % is ``tokens``."""
        return tokens * 5

    @staticmethod
    def fading(work: Work, handles: list[str], **options: Any) -> list[tuple[str, ...]]:
        """The stages of ``handles`` as the window shrinks, each distinct row once, roomiest first."""
        rows: list[tuple[str, ...]] = []
        for tokens in range(400, 0, -2):
            shown = stages(work.cues(context_window=TestPressure.window_fitting(tokens), **options))
            row = tuple(shown.get(h, "out") for h in handles)
            if not rows or rows[-1] != row:
                rows.append(row)
        return rows

    def test_old_lines_fade_oldest_and_fastest_first_until_the_block_fits(self, work: Work) -> None:
        """Above the reference size, old unprotected lines fade one stage at a time, fastest-fading first,
        every success before any failure; new lines stay in full."""
        old_read = work.read("src/a.ts")
        old_run = work.run("npm run build", "built in 2.1 s\nsee dist/ for the bundle\n")
        old_fail = work.run("npm test", "FAIL src/a.test.ts > adds\n1 failed\n", error=True)
        work.compact()
        new = [work.run(f"echo new {i}") for i in range(3)]
        work.compact()
        roomy = work.cues()
        assert {old_read: "brief", old_run: "full", old_fail: "full"}.items() <= stages(roomy).items()
        assert [
            ("brief", "full", "full"),
            ("out", "full", "full"),
            ("out", "brief", "full"),
            ("out", "out", "full"),
            ("out", "out", "brief"),
            ("out", "out", "out"),
        ] == self.fading(work, [old_read, old_run, old_fail])
        assert {("full",) * 3} == set(self.fading(work, new))

    def test_failures_of_an_older_batch_outlast_successes_of_a_newer_one(self, work: Work) -> None:
        """Under pressure the successes of every old batch fade before the failures of any."""
        failure = work.run("npm test", "FAIL src/a.test.ts > adds\n1 failed\n", error=True)
        work.compact()
        edits = [work.edit(f"src/mod{i}.ts") for i in range(10)]
        work.compact()
        window = self.window_fitting(work.cues().tokens + 8)  # batch 2 fits, with room to spare
        work.run("npm run build", " ".join(f"step{i} done" for i in range(30)) + "\n")
        work.compact()  # batch 3's new line brings the pressure
        shown = stages(work.cues(context_window=window))
        assert "full" == shown[failure]
        assert [h for h in edits if h not in shown]

    def test_new_and_reinforced_lines_stay_full(self, work: Work) -> None:
        """However small the window, new lines and a just-recalled line are delivered in full."""
        old = [work.run("npm run build"), work.run("npm test", "1 failed\n", error=True)]
        recalled = work.run("npm run lint")
        work.compact()
        work.recall(recalled)
        new = [work.run(f"echo new {i}") for i in range(3)]
        work.compact()
        state = work.cues(context_window=100)
        shown = stages(state)
        assert not any(h in shown for h in old)
        assert {"full"} == {shown[h] for h in [*new, recalled]}
        assert state.tokens > state.reference_tokens

    def test_without_pressure_nothing_fades_early(self, work: Work) -> None:
        """Below the reference size, lines fade by age only."""
        handles = [work.run(f"echo {i}") for i in range(5)]
        work.compact()
        work.compact()
        assert {"full"} == set(stages(work.cues()).values())
        assert set(handles) == set(stages(work.cues()))

    def test_a_faded_line_stays_faded_when_the_pressure_is_gone(self, work: Work) -> None:
        """Pressure fades for good: a failure cut to brief does not come back in full once there is room."""
        failure = work.run("npm test", "FAIL src/a.test.ts > adds\n1 failed\n", error=True)
        work.compact()
        for i in range(4):
            work.read(f"src/f{i}.ts")
        work.compact()
        window = next(
            self.window_fitting(tokens)
            for tokens in range(work.cues().tokens, 0, -1)
            if stages(work.cues(context_window=self.window_fitting(tokens))).get(failure) == "brief"
        )
        work.compact()  # the reads are brief by age now: the block fits again
        squeezed = work.cues(context_window=window)
        assert squeezed.tokens <= squeezed.reference_tokens
        assert "brief" == stages(squeezed)[failure]
        assert "full" == stages(work.cues())[failure]  # by age alone it would still be full


class TestCap:
    @staticmethod
    def busy(work: Work) -> tuple[list[str], list[str]]:
        """Two batches of edits, reads and test runs; the failures and the successes, by handle."""
        failures, successes = [], []
        for batch in range(2):
            for i in range(6):
                successes.append(work.edit(f"src/mod{batch}{i}.ts"))
                successes.append(work.read(f"src/mod{batch}{i}.ts", "".join(f"line {n}\n" for n in range(9))))
                failures.append(
                    work.run(
                        f"npm test -- mod{batch}{i}",
                        f"FAIL src/mod{batch}{i}.test.ts > adds\nAssertionError: expected {i} to be 0\n1 failed\n",
                        error=True,
                    )
                )
            work.compact()
        return failures, successes

    def test_the_cap_holds_and_failures_outlast_successes(self, work: Work) -> None:
        """Under the user's cap the block fits, new lines included; every success fades before any failure."""
        failures, successes = self.busy(work)
        free = work.cues()
        assert {"full"} == {stages(free)[h] for h in failures}
        only_failures_seen = False
        for cap in range(free.tokens, 0, -7):
            state = work.cues(max_tokens=cap)
            shown = stages(state)
            assert (True, cap) == (state.tokens <= cap, state.max_tokens)
            if any(shown.get(h) != "full" for h in failures):
                # A failure fades only once no success is left, in full or brief.
                assert not [h for h in successes if h in shown], (cap, shown)
            only_failures_seen |= {"full"} == {shown.get(h) for h in failures} and not set(successes) & set(
                shown
            )
        assert only_failures_seen

    def test_a_cap_below_the_header_gives_no_block(self, work: Work) -> None:
        """A cap with no room for the header: no block, rather than one over the cap."""
        self.busy(work)
        state = work.cues(max_tokens=10)
        assert ("", [], 0) == (state.text, state.lines, state.tokens)

    def test_tokens_are_counted_and_pi_estimate_reported(self, work: Work) -> None:
        """The block's tokens are the tokenizer's; Pi's characters / 4 is reported beside them."""
        self.busy(work)
        state = work.cues()
        assert state.pi_tokens == estimate_tokens(state.text)
        assert state.tokens == count_tokens([state.text])[0]


class TestErrors:
    def test_unknown_leaf(self, work: Work) -> None:
        """A leaf that is no entry of the session is an error naming it."""
        work.run("npm test")
        with pytest.raises(UnknownLeaf, match="nope"):
            work.cues(leaf="nope")


class TestHelpers:
    def test_elide_keeps_head_and_tail(self) -> None:
        """Elision keeps about two thirds head, one third tail, within the limit, cut between words."""
        text = " ".join(["head"] * 10 + ["tail"] * 10)
        short = elide(text, 30)
        assert (26, "head head head … tail tail") == (len(short), short)
        assert "short" == elide("  short  ", 30)

    def test_thresholds(self) -> None:
        """Full below FULL_BELOW, out from OUT_AT: each class's step decides its pace."""
        assert 0 < FULL_BELOW < OUT_AT
        assert all(0 < step <= FULL_BELOW for step in STEP.values())


class TestRealPi:
    def test_pi_written_compaction(self) -> None:
        """In a file Pi wrote, the command before the kept boundary is the one cue, with search's handle."""
        path = FIXTURES / "real-v3" / "03-tour-kitchen-sink.jsonl"
        state = cues_of(path, leaf="7d642dea")
        assert (1, "5f4fc5bf") == (state.batch, state.compaction_id)
        (line,) = state.lines
        assert "bf7a808d" == line.entry_id
        assert "11-29 20:18 bash(echo tool-output-line && ls) → notes.txt [2 lines] #bf7a808d" == line.text

    def test_current_leaf_is_pis(self) -> None:
        """Without --leaf the branch is Pi's current one (the last entry): here a branch never compacted."""
        state = cues_of(FIXTURES / "real-v3" / "03-tour-kitchen-sink.jsonl")
        assert (0, "e2bbc24a") == (state.batch, state.leaf)

    def test_compaction_without_tool_work(self) -> None:
        """An automatic compaction that took only talk is a batch with no lines and no block."""
        state = cues_of(FIXTURES / "real-v3" / "07-auto-compaction.jsonl")
        assert (1, [], "") == (state.batch, state.lines, state.text)


# ---- feeding: the cues depend on the entries, not on how the file was read ----------------


def random_session(path: Path, seed: int, *, moves: bool = False) -> Work:
    """Tool work, talk, recalls and compactions; with ``moves``, /tree moves (with their summaries) too."""
    rng = random.Random(seed)
    work = Work(path)
    handles: list[str] = []
    for _ in range(rng.randint(5, 40)):
        roll = rng.random()
        if moves and roll < 0.12 and work.w.entries:
            # /tree: go on from an earlier entry, as often as not leaving a summary of the branch left.
            left = work.w.leaf
            work.w.branch_at(rng.choice(work.w.entries)["id"])
            if left is not None and rng.random() < 0.5:
                work.w.branch_summary(left, id=work._id("b"))
            continue
        if roll < 0.3:
            handles.append(
                work.run(f"cmd {rng.randint(0, 9)}", "out\n" * rng.randint(0, 5), rng.random() < 0.3)
            )
        elif roll < 0.5:
            handles.append(work.read(f"f{rng.randint(0, 3)}.ts", "x\n" * rng.randint(1, 4)))
        elif roll < 0.6:
            work.edit(f"f{rng.randint(0, 3)}.ts")
        elif roll < 0.7 and handles:
            work.recall(rng.choice(handles))
        elif roll < 0.8:
            work.talk("anything 预算 😀")
        else:
            work.compact()
    return work


def read_in_pieces(data: bytes, cuts: list[int], restart: int | None) -> tuple[str, list[dict[str, Any]]]:
    """Entries from a reader fed at ``cuts``; past ``restart`` it is replaced by one reading from 0."""
    reader = SessionReader()
    entries: list[dict[str, Any]] = []
    start = 0
    for cut in sorted(cuts):
        entries.extend(reader.feed(data[start:cut]))
        start = cut
        if restart is not None and cut >= restart:
            # As the service does when it cannot trust its cursor: a new reader, from byte 0.
            reader, restart = SessionReader(), None
            entries = reader.feed(data[:cut])
    entries.extend(reader.feed(data[start:]))
    assert reader.header is not None
    return reader.header.id, entries


class TestFeeding:
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(seed=st.integers(0, 10_000), data=st.data())
    def test_cues_do_not_depend_on_how_the_file_was_fed(
        self, tmp_path_factory: pytest.TempPathFactory, seed: int, data: st.DataObject
    ) -> None:
        """Fed whole, in random chunks, or with a reader restarted midway: the same cue state."""
        path = tmp_path_factory.mktemp("feed") / "s.jsonl"
        random_session(path, seed)
        raw = path.read_bytes()
        whole = cues_of(path, context_window=4000)
        cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=12))
        restart = data.draw(st.none() | st.integers(0, len(raw)))
        session_id, entries = read_in_pieces(raw, cuts, restart)
        pieces = compute_cues(entries, session_id=session_id, context_window=4000)
        assert whole == pieces
