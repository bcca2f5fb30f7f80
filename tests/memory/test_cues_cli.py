"""``pbot-watch cues``: the cue state of a session file, and docs/pi.md's example and reference."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import click
import pytest

from pbot_watch.cli import main
from pbot_watch.memory.models import CueLine, CueState
from tests.memory.work import Work, budget_session, cues_of
from tests.support.cli import invoke, run, scratch_user
from tests.support.paths import FIXTURES, REPO

DOC = (REPO / "docs" / "pi.md").read_text(encoding="utf-8")
CUES_DOC = DOC[DOC.index("## Memory cues") :]


def cues(*args: str) -> tuple[int, str]:
    result = invoke("cues", *args)
    return result.returncode, result.stdout + result.stderr


class TestCuesCommand:
    def test_prints_the_block(self, tmp_path: Path) -> None:
        """The human output is the block the extension injects."""
        work = budget_session(tmp_path / "s.jsonl")
        code, output = cues("--session-file", str(work.path))
        local = datetime.now().astimezone().tzinfo
        assert (0, cues_of(work.path, tz=local).text + "\n") == (code, output)

    def test_json_is_the_cue_state(self, tmp_path: Path) -> None:
        """--json prints the cue state with camelCase fields and each line's class."""
        work = budget_session(tmp_path / "s.jsonl")
        code, output = cues("--session-file", str(work.path), "--json", "--context-window", "32000")
        data = json.loads(output)
        assert (0, 3, 6400) == (code, data["batch"], data["referenceTokens"])
        assert {
            "handle",
            "entryId",
            "timestamp",
            "stage",
            "class",
            "age",
            "batch",
            "protected",
            "count",
            "text",
        } == set(data["lines"][0])

    def test_no_compaction_is_an_empty_state(self, tmp_path: Path) -> None:
        """A branch never compacted has no cues, and that is no error."""
        work = Work(tmp_path / "s.jsonl")
        work.run("npm test")
        assert (0, "no cues: no compaction on this branch\n") == cues("--session-file", str(work.path))
        code, output = cues("--session-file", str(work.path), "--json")
        assert (0, 0, [], "") == (code, *(json.loads(output)[k] for k in ("batch", "lines", "text")))

    def test_old_session_spelling_still_works_unshown(self, tmp_path: Path) -> None:
        """``--session`` (this release only) reads the same file; help and errors name only --session-file."""
        work = budget_session(tmp_path / "s.jsonl")
        assert cues("--session-file", str(work.path), "--json") == cues("--session", str(work.path), "--json")
        shown = invoke("cues", "--help").stdout
        code, missing = cues()
        assert ("--session-file FILE", False) == (
            shown[shown.index("--session") :].split("  ")[0],
            "--session " in shown,
        )
        assert (2, "Missing option '--session-file'.") == (
            code,
            missing.strip().splitlines()[-1].removeprefix("Error: "),
        )

    def test_leaf_picks_the_branch(self) -> None:
        """--leaf computes the cues of that entry's branch (here the compacted one of a real Pi file)."""
        path = FIXTURES / "real-v3" / "03-tour-kitchen-sink.jsonl"
        code, output = cues("--session-file", str(path), "--leaf", "7d642dea", "--json")
        assert (0, 1) == (code, json.loads(output)["batch"])

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (["--leaf", "nope"], "unknown leaf entry 'nope'"),
            (["--context-window", "0"], "Invalid value for '--context-window'"),
        ],
    )
    def test_bad_arguments(self, tmp_path: Path, args: list[str], message: str) -> None:
        """An unknown leaf or a window of no tokens is a usage error (exit 2)."""
        work = Work(tmp_path / "s.jsonl")
        work.run("npm test")
        code, output = cues("--session-file", str(work.path), *args)
        assert (2, True) == (code, message in output)

    def test_not_a_session(self, tmp_path: Path) -> None:
        """A missing file, a folder or a file that is no Pi session is one line, exit 2."""
        (tmp_path / "notes.jsonl").write_text('{"hello": 1}\n')
        for path, says in (
            (tmp_path / "missing.jsonl", "no such file"),
            (tmp_path / "notes.jsonl", "not a Pi session (no session header)"),
        ):
            code, output = cues("--session-file", str(path))
            assert (2, f"pbot-watch: {path}: {says}\n") == (code, output)
        code, output = cues("--session-file", str(tmp_path))
        assert (2, True) == (code, output.rstrip().endswith("is a directory."))

    @pytest.mark.slow
    @pytest.mark.parametrize("kind", ["fifo", "device"])
    def test_a_fifo_or_a_device_is_refused_unread(self, tmp_path: Path, kind: str) -> None:
        """The real command on a FIFO with no writer or on /dev/zero: one line, exit 2, at once."""
        path = Path("/dev/zero")
        if kind == "fifo":
            path = tmp_path / "s.jsonl"
            os.mkfifo(path)
        done = run("cues", "--session-file", str(path), env=scratch_user(tmp_path), timeout=30)
        assert 2 == done.returncode, done.stderr
        assert done.stderr.startswith("pbot-watch: "), done.stderr


class TestDocs:
    def test_example_is_what_the_code_prints(self, tmp_path: Path) -> None:
        """docs/pi.md's example block is compute_cues' output for the example session (times in UTC)."""
        state = budget_session(tmp_path / "budget.jsonl").cues(tz=UTC)
        assert f"```\n{state.text}\n```" in CUES_DOC

    def test_every_option_and_field_is_documented(self) -> None:
        """Each option of `cues` and each JSON field of the cue state appears in the Memory cues section."""
        command = main.get_command(click.Context(main), "cues")  # commands load lazily
        assert command is not None
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("--") and opt != "--help":
                    assert opt in CUES_DOC, opt
        for model in (CueState, CueLine):
            for name, field in model.model_fields.items():
                key = field.serialization_alias or field.alias or name
                assert f"`{key}" in CUES_DOC or f"{key}`" in CUES_DOC, f"{model.__name__}.{key}"

    def test_constants_are_documented(self) -> None:
        """The thresholds, the reference share and each class's step quoted in the docs are the code's."""
        from pbot_watch.memory import cues as module

        for name in (
            "FULL_BELOW",
            "OUT_AT",
            "REFERENCE_PERCENT",
            "CHARS_PER_TOKEN",
            "DEFAULT_CONTEXT_WINDOW",
        ):
            assert f"| `{name}` | {getattr(module, name)} |" in CUES_DOC, name
        for cue_class, step in module.STEP.items():
            row = next(line for line in CUES_DOC.splitlines() if line.startswith(f"| `{cue_class}` |"))
            assert f"| {step} |" in row, cue_class
