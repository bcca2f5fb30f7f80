"""``bench/cues.py`` measures a generated session and reports every figure (no timing asserted)."""

from __future__ import annotations

import runpy
from pathlib import Path

from pbot_watch.redact.policy import redact
from pbot_watch.redact.rules import ANCHORS
from tests.memory.work import budget_session
from tests.support.paths import FIXTURES, REPO


def test_cues_bench_reports_its_figures() -> None:
    """A small session is generated, parsed and cued; the figures say what was measured."""
    measure = runpy.run_path(str(REPO / "bench" / "cues.py"))["measure"]
    figures = measure(size_mb=0.3, batch_kb=60, repeat=1)
    assert {"session", "parse s", "cues s", "total s", "batch", "lines", "block tokens"} == {
        name for name in figures if not name.startswith("ledger: ")
    }
    assert figures["batch"] == figures["session"]["compactions"] > 0
    assert figures["lines"] > 0
    assert figures["ledger: lines"] == figures["lines"]  # the loaded ledger gives the same block
    assert figures["ledger: KB on disk"] > 0


def test_corpus_ledgers_are_measured(tmp_path: Path) -> None:
    """--corpus: every session's saved ledger, against the sessions' bytes (the corpus is only read)."""
    corpus_ledgers = runpy.run_path(str(REPO / "bench" / "cues.py"))["corpus_ledgers"]
    for n in range(2):
        budget_session(tmp_path / "sessions" / "ws" / f"{n}.jsonl")
    before = sorted(tmp_path.rglob("*"))
    figures = corpus_ledgers(tmp_path)
    assert figures["sessions"] == 2
    assert 0 < figures["ledger bytes / session bytes"] < 1
    assert figures["ledger MB saved"] == 0  # small sessions are left to the child
    assert sorted(tmp_path.rglob("*")) == before


def test_generated_words_hold_no_redaction_anchor() -> None:
    """The generator's words send no text through a redaction rule: a real session is mostly plain words."""
    words = runpy.run_path(str(REPO / "bench" / "cues.py"))["WORDS"]
    assert [(w, a) for w in words for a in ANCHORS if a.lower() in w.lower()] == []
    text = " ".join(words * 50)
    assert redact(text).text == text


def test_cost_report_on_a_pi_written_session() -> None:
    """--pi-session: per compaction of a file the real Pi wrote, the block's tokens by both counts."""
    bench = runpy.run_path(str(REPO / "bench" / "cues.py"))
    path = FIXTURES / "real-v3" / "03-tour-kitchen-sink.jsonl"
    report = bench["pi_session_report"](path, [128_000], None)
    (row,) = report["after"]
    assert {
        "window",
        "batch",
        "lines",
        "tokens",
        "pi tokens",
        "chars",
        "tokens/line",
        "handle tokens",
        "summary tokens",
        "block/summary",
        "newest failures",
    } == set(row)
    assert (128_000, 1, 1) == (row["window"], row["batch"], row["lines"])
    assert row["tokens"] > row["handle tokens"] > 0
