"""A cue line redacts only what it can show, and shows no more of a secret than redacting everything would."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from pbot_watch.memory.cue_text import (
    LINE_SPANNING_ANCHORS,
    SHOWN_WHOLE_BELOW,
    TAIL_LINES,
    Place,
    outcome,
    scrub_shown,
)
from pbot_watch.redact.core import find_secrets
from pbot_watch.redact.policy import scrub
from tests.memory.work import Work
from tests.support.planted import planted

PLANTS = planted()
ONE_LINE = [plant for plant in PLANTS if "\n" not in plant.text]
KEY = next(plant.value for plant in PLANTS if plant.kind == "anthropic")
PEM = next(plant.value for plant in PLANTS if plant.shape == "private key cut")
PLACE = Place("/home/ann/project")

FILLER = ["compiling module", "  at step 3", "", "ok: 12 files", "warning: unused import", "done in 2.1s"]


def random_output(rng: random.Random) -> str:
    """A long tool output with secrets where the outcome looks (first and last lines) and where it does not."""
    lines = [rng.choice(FILLER) + f" {n}" for n in range(rng.randint(TAIL_LINES, 400))]
    for _ in range(rng.randint(0, 4)):
        at = rng.randrange(len(lines))
        lines[at] = f"{lines[at]} {rng.choice(ONE_LINE).text} tail"
    if rng.random() < 0.2:
        lines.insert(rng.randrange(len(lines)), PEM)
    lines[0] = (
        rng.choice(("", "   ", "\n")) + " " * rng.randint(0, 3) + "first line " + rng.choice(ONE_LINE).text
    )
    lines[-1] += " " + rng.choice(ONE_LINE).text
    text = "\n".join(lines) + rng.choice(("", "\n", "\n\n  \n"))
    return text if len(text) >= SHOWN_WHOLE_BELOW else text + "\n" + "x" * SHOWN_WHOLE_BELOW


class TestShownLines:
    @pytest.mark.parametrize("seed", range(40))
    def test_outcome_equals_redacting_the_whole_output(self, seed: int) -> None:
        """Same count, same first and last lines: the success's outcome is that of the whole text redacted."""
        rng = random.Random(seed)
        output = random_output(rng)
        for tool, command in (("bash", True), ("read", False), ("grep", False)):
            whole = outcome(tool, scrub(output), False, command=command, place=PLACE)
            assert outcome(tool, scrub_shown(output), False, command=command, place=PLACE) == whole
        assert scrub_shown(output).count("\n") == scrub(output).count("\n")

    def test_secret_straddling_the_cut_of_a_long_line(self) -> None:
        """A first line far longer than a cue shows, its key just where the line is cut: no part of it shows."""
        words = ["word"] * 10
        head = " ".join(words) + " " + KEY + " " + " ".join(["more"] * 200)
        output = head + "\n" + "\n".join(f"line {n}" for n in range(2000)) + "\n"
        said = outcome("read", scrub_shown(output), False, place=PLACE)
        assert "[redacted:anthropic]" in scrub_shown(output).split("\n", 1)[0]
        for piece in re.findall(r"[A-Za-z0-9]{6,}", KEY[14:]):
            assert piece not in said.text

    def test_private_key_across_the_kept_lines_is_redacted_whole(self) -> None:
        """A private key spans lines: an output holding one is redacted whole, its count as redaction leaves it."""
        output = "\n".join(f"line {n}" for n in range(500)) + "\n" + PEM + "\nlast\n"
        assert scrub_shown(output) == scrub(output)
        assert PEM.splitlines()[1] not in scrub_shown(output)

    def test_private_key_cut_by_the_tail_window(self) -> None:
        """The tail starts in the middle of a key block: the block's BEGIN line lies before it, and still counts."""
        header, body = PEM.split("\n", 1)
        output = "\n".join(f"line {n}" for n in range(500)) + f"\n{header}\n" + "\n".join([body] * 8) + "\n"
        shown = outcome("bash", scrub_shown(output), False, command=True, place=PLACE)
        assert body.splitlines()[-1] not in shown.text
        assert shown == outcome("bash", scrub(output), False, command=True, place=PLACE)

    def test_only_the_private_key_rule_spans_lines(self) -> None:
        """Every secret but a private key lies within its line: redacting whole lines finds the same."""
        for plant in PLANTS:
            spans = find_secrets(f"before\n{plant.text}\nafter")
            assert spans, plant.shape
            for found in spans:
                spanning = "\n" in f"before\n{plant.text}\nafter"[found.start : found.end]
                assert not spanning or any(anchor in plant.text for anchor in LINE_SPANNING_ANCHORS), (
                    plant.shape
                )
        assert all(
            anchor in plant.text
            for plant in PLANTS
            if plant.kind == "private-key"
            for anchor in LINE_SPANNING_ANCHORS
        )


class TestCueLines:
    def test_a_cue_never_shows_a_secret_of_a_long_output(self, tmp_path: Path) -> None:
        """End to end: a marathon output's key, in its last line and in its first, is redacted in the cue."""
        work = Work(tmp_path / "s.jsonl")
        output = f"start {KEY}\n" + "\n".join(f"step {n}" for n in range(3000)) + f"\nall done, token {KEY}\n"
        work.run("make all", output)
        work.read("notes.md", f"{KEY} is the key\n" + "plain\n" * 3000)
        work.compact()
        block = work.cues().text
        assert block.count("[redacted:anthropic]") == 2
        assert KEY not in block
        assert KEY[-12:] not in block

    def test_a_failure_is_redacted_whole(self, tmp_path: Path) -> None:
        """A failure's line is any line of its output (its error line): the whole output is redacted."""
        work = Work(tmp_path / "s.jsonl")
        lines = [f"step {n}" for n in range(3000)]
        lines[1500] = f"Error: login refused for key {KEY}"
        work.run("make deploy", "\n".join(lines) + "\n", error=True)
        work.compact()
        block = work.cues().text
        assert "Error: login refused" in block
        assert KEY not in block
        assert KEY[-12:] not in block
