"""How fast ``pbot-watch index`` turns Pi sessions into records, against merely parsing the JSONL.

Generates a corpus of realistic Pi 1.6.0-shaped sessions (system prompts, thinking, tool calls
with long results, steering messages, branches with summaries, labels, compactions, images,
several workspaces), then measures:

* baseline: read every file and ``json.loads`` every line (the least any indexer must do);
* ``index_all`` in-process into empty archives (records written in each workspace);
* the same pass again, when nothing changed (every record found unchanged);
* ``pbot-watch index`` as a subprocess (interpreter start-up and imports included).

It prints MB/s and the ratio index/baseline (target: at most 2.0). Run by hand::

    python bench/index_throughput.py                 # ~200 sessions, ~50 MB in a temp dir
    python bench/index_throughput.py --sessions 20 --size-mb 2 --json
    python bench/index_throughput.py --profile       # cProfile of the in-process pass

Figures are printed, never asserted: ``tests/core/test_index_bench.py`` only runs it tiny.
"""

from __future__ import annotations

import argparse
import base64
import cProfile
import io
import json
import os
import pstats
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pbot_watch.archive.files import ArchiveStore
from pbot_watch.indexer import index_all

WORDS = [
    "the",
    "function",
    "returns",
    "a",
    "list",
    "of",
    "records",
    "parsed",
    "from",
    "the",
    "session",
    "file",
    "and",
    "keeps",
    "the",
    "cursor",
    "in",
    "sync",
    "with",
    "the",
    "offset",
    "so",
    "that",
    "appends",
    "are",
    "cheap",
    "while",
    "rewrites",
    "trigger",
    "a",
    "full",
    "read",
    "again",
    "配置",
    "文件",
    "读取",
    "错误",
    "修复",
    "测试",
    "通过",
    "branch",
    "merge",
    "commit",
    "review",
    "summary",
    "exchange",
    "node",
    "tree",
]


def words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(count))


class Corpus:
    """Writes one Pi-like session file; ``leaf`` follows Pi's rule (each entry a child of the last)."""

    def __init__(self, rng: random.Random, session_id: str, cwd: str, start_ms: int) -> None:
        self.rng = rng
        self.lines: list[str] = []
        self.ids: list[str] = []
        self.answers: list[str] = []
        self.leaf: str | None = None
        self.clock = start_ms
        self.size = 0
        # None: tool output of 5-900 lines (Pi's 50 KB cap); a number: the mean line count,
        # set by ``generate`` so that a fixed number of exchanges fills a session's size.
        self.tool_lines: float | None = None
        self.call_id = ""
        """The id of the last tool call ``assistant`` wrote: the next ``tool_result`` answers it, as in Pi."""
        self.tool_bytes = 0
        self.tool_calls = 0
        self.add_raw({"type": "session", "version": 3, "id": session_id, "timestamp": self.iso(), "cwd": cwd})

    def iso(self) -> str:
        seconds, ms = divmod(self.clock, 1000)
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{ms:03d}Z"

    def add_raw(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":"))
        self.lines.append(line)
        self.size += len(line.encode()) + 1

    def entry(self, kind: str, **fields: Any) -> str:
        self.clock += self.rng.randint(50, 4000)
        entry_id = f"{self.rng.getrandbits(32):08x}"
        entry: dict[str, Any] = {"type": kind, "id": entry_id, "parentId": self.leaf, "timestamp": self.iso()}
        entry.update(fields)
        self.add_raw(entry)
        self.ids.append(entry_id)
        self.leaf = entry_id
        return entry_id

    def message(self, message: dict[str, Any]) -> str:
        message["timestamp"] = self.clock
        return self.entry("message", message=message)

    def user(self, text: str, image: bool = False) -> str:
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        if image:
            blob = base64.b64encode(self.rng.randbytes(self.rng.randint(5_000, 40_000))).decode()
            content.append({"type": "image", "data": blob, "mimeType": "image/png"})
        return self.message({"role": "user", "content": content})

    def assistant(self, text: str, stop: str = "stop", tool: bool = False, thinking: bool = False) -> str:
        content: list[dict[str, Any]] = []
        if thinking:
            content.append(
                {
                    "type": "thinking",
                    "thinking": words(self.rng, self.rng.randint(40, 400)),
                    "thinkingSignature": "reasoning_content",
                }
            )
        content.append({"type": "text", "text": text})
        if tool:
            self.call_id = f"call_{len(self.ids)}"
            content.append(
                {
                    "type": "toolCall",
                    "id": self.call_id,
                    "name": "bash",
                    "arguments": {"command": "rg -n pattern src/ | head -200"},
                }
            )
        usage = {
            "input": 1200,
            "output": 300,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 1500,
            "cost": {"input": 0.0012, "output": 0.0006, "cacheRead": 0, "cacheWrite": 0, "total": 0.0018},
        }
        message = {
            "role": "assistant",
            "content": content,
            "api": "openai-completions",
            "provider": "fakeai",
            "model": "fake-model-1",
            "usage": usage,
            "stopReason": "toolUse" if tool else stop,
        }
        if stop == "aborted":
            message["errorMessage"] = "Request was aborted"
        answer = self.message(message)
        if not tool:
            self.answers.append(answer)
        return answer

    def tool_result(self) -> str:
        # Pi truncates bash output to 2000 lines / 50 KB: long lines of plausible output.
        if self.tool_lines is None:
            lines = self.rng.randint(5, 900)
        else:
            lines = self.rng.randint(0, max(0, round(2 * self.tool_lines)))
        output = "\n".join(f"src/module_{i % 97}.py:{i}: {words(self.rng, 6)}" for i in range(lines))
        self.tool_calls += 1
        self.tool_bytes += len(output.encode())
        return self.message(
            {
                "role": "toolResult",
                "toolCallId": self.call_id,
                "toolName": "bash",
                "content": [{"type": "text", "text": output}],
                "isError": False,
                "details": {"truncation": None},
            }
        )

    def system(self) -> str:
        sections = {name: words(self.rng, 250) for name in ("preamble", "tools", "rules", "docs")}
        return self.message({"role": "system", "content": "", "sections": sections})

    def turn(self) -> None:
        rng = self.rng
        self.user(words(rng, rng.randint(5, 60)), image=rng.random() < 0.02)
        for _ in range(rng.choices((0, 1, 2, 4, 8), (25, 30, 20, 15, 10))[0]):
            self.assistant(words(rng, rng.randint(3, 30)), tool=True, thinking=rng.random() < 0.3)
            self.tool_result()
            if rng.random() < 0.05:
                self.user("also: " + words(rng, 10))  # a steering message joins the exchange
        roll = rng.random()
        stop = "aborted" if roll < 0.03 else "error" if roll < 0.05 else "length" if roll < 0.07 else "stop"
        self.assistant(words(rng, rng.randint(20, 400)), stop=stop, thinking=rng.random() < 0.3)

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(self.lines) + "\n", encoding="utf-8")


TOOL_LINE_BYTES = 55
"""About the UTF-8 size of one generated tool-output line (with its newline)."""


def size_tool_output(corpus: Corpus, target: float, turns_left: int) -> None:
    """Aim the next turn's tool output at the bytes left per turn, from what earlier turns cost.

    The bytes of a turn other than tool output (messages, thinking, usage) and the number of
    tool calls per turn are measured on the session so far; the tool output takes the rest.
    """
    turns = max(1, len(corpus.answers))
    overhead = (corpus.size - corpus.tool_bytes) / turns if corpus.answers else 4_000
    calls = corpus.tool_calls / turns if corpus.answers else 2.1
    budget = (target - corpus.size) / max(1, turns_left)
    corpus.tool_lines = max(0.0, (budget - overhead) / (max(calls, 0.5) * TOOL_LINE_BYTES))


def generate(
    out: Path,
    sessions: int,
    size_mb: float,
    workspaces: int,
    seed: int = 7,
    exchanges: int | None = None,
    spread: float = 0.7,
) -> tuple[Path, list[Path]]:
    """Write the corpus under ``out``; returns the sessions root and the workspace folders.

    With ``exchanges``, every session has that many exchanges (one per turn) and tool output
    is sized to fill the session's share of ``size_mb``; without it, sessions grow turn by
    turn to their share with Pi-sized tool output (few, long exchanges). Each share is the mean
    share times a factor within ``1 +- spread`` (0: every session its exact share).
    """
    rng = random.Random(seed)
    root = out / "sessions"
    spaces = [out / "workspaces" / f"project-{i}" for i in range(workspaces)]
    for space in spaces:
        space.mkdir(parents=True, exist_ok=True)
    left = size_mb * 1e6
    for n in range(sessions):
        cwd = spaces[n % workspaces]
        session_id = f"01a228f5-{n:04x}-7000-8000-{rng.getrandbits(48):012x}"
        corpus = Corpus(rng, session_id, str(cwd), 1_795_900_000_000 + n * 3_600_000)
        corpus.entry("model_change", provider="fakeai", modelId="fake-model-1")
        corpus.entry("thinking_level_change", thinkingLevel="off")
        if rng.random() < 0.5:
            corpus.entry("session_info", name=words(rng, 4))
        corpus.system()
        target = left / (sessions - n) * rng.uniform(1 - spread, 1 + spread)
        while True:
            if exchanges is not None:
                size_tool_output(corpus, target, exchanges - len(corpus.answers))
            corpus.turn()
            roll = rng.random()
            if roll < 0.06 and len(corpus.answers) > 2:
                # /tree back to an earlier answer, with a branch summary, and carry on there
                corpus.leaf = rng.choice(corpus.answers[:-1])
                corpus.entry("branch_summary", fromId=corpus.ids[-1], summary=words(rng, 120))
            elif roll < 0.09:
                corpus.entry("label", targetId=corpus.ids[-1], label="checkpoint")
            elif roll < 0.11:
                corpus.entry(
                    "compaction",
                    summary=words(rng, 300),
                    firstKeptEntryId=corpus.ids[-3],
                    tokensBefore=rng.randint(50_000, 150_000),
                )
            if (len(corpus.answers) >= exchanges) if exchanges is not None else corpus.size >= target:
                break
        folder = root / ("--" + str(cwd).strip("/").replace("/", "-") + "--")
        corpus.write(folder / f"{n:04d}_{session_id}.jsonl")
        left -= corpus.size
    return root, spaces


def files_under(root: Path) -> list[Path]:
    return sorted(root.rglob("*.jsonl"))


def baseline(paths: list[Path]) -> tuple[float, float]:
    """Wall and CPU seconds to read every file and json.loads every line."""
    start, cpu = time.perf_counter(), time.process_time()
    loads = json.loads
    for path in paths:
        for line in path.read_bytes().split(b"\n"):
            if line:
                loads(line)
    return time.perf_counter() - start, time.process_time() - cpu


def clear_records(spaces: list[Path]) -> None:
    for space in spaces:
        shutil.rmtree(space / ".pi", ignore_errors=True)
    # Let the deletions reach the disk now, not while the next pass is being timed.
    os.sync()


def timed_index(root: Path, spaces: list[Path], fresh: bool) -> tuple[float, float, Any]:
    """Wall and CPU seconds of one in-process pass, and its report."""
    if fresh:
        clear_records(spaces)
    start, cpu = time.perf_counter(), time.process_time()
    report = index_all([root], ArchiveStore())
    return time.perf_counter() - start, time.process_time() - cpu, report


def cli_index(root: Path, spaces: list[Path]) -> tuple[float, str]:
    clear_records(spaces)
    exe = shutil.which("pbot-watch") or ""
    command = [exe] if exe else [sys.executable, "-c", "from pbot_watch.cli import main; main()"]
    start = time.perf_counter()
    result = subprocess.run(
        [*command, "index", "--sessions", str(root)], capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"pbot-watch index failed: {result.stderr}")
    return elapsed, result.stdout.strip()


def run(args: argparse.Namespace) -> dict[str, Any]:
    out = args.out or Path(tempfile.mkdtemp(prefix="pbot-bench-"))
    try:
        started = time.perf_counter()
        root, spaces = generate(out, args.sessions, args.size_mb, args.workspaces)
        generated = time.perf_counter() - started
        paths = files_under(root)
        total = sum(p.stat().st_size for p in paths)
        mb = total / 1e6
        baseline(paths)  # warm the page cache
        # Interleaved, so that load from other processes hits both sides of each ratio alike.
        base: list[tuple[float, float]] = []
        fresh: list[tuple[float, float, Any]] = []
        again: list[tuple[float, float, Any]] = []
        for _ in range(args.repeat):
            base.append(baseline(paths))
            fresh.append(timed_index(root, spaces, fresh=True))
            again.append(timed_index(root, spaces, fresh=False))
        cli = cli_index(root, spaces)
        report = fresh[-1][2]

        def ratio(runs: list[tuple[float, float, Any]], which: int) -> float:
            return round(statistics.median(r[which] / b[which] for r, b in zip(runs, base, strict=True)), 2)

        t_base = statistics.median(b[0] for b in base)
        t_index = statistics.median(r[0] for r in fresh)
        t_again = statistics.median(r[0] for r in again)
        figures: dict[str, Any] = {
            "corpus": {
                "sessions": len(paths),
                "MB": round(mb, 2),
                "workspaces": len(spaces),
                "lines": sum(1 for p in paths for _ in p.open("rb")),
                "generated in s": round(generated, 2),
            },
            "baseline (read + json.loads)": {"s": round(t_base, 3), "MB/s": round(mb / t_base, 1)},
            "index_all, empty archive": {
                "s": round(t_index, 3),
                "MB/s": round(mb / t_index, 1),
                "ratio to baseline": ratio(fresh, 0),
                "CPU ratio": ratio(fresh, 1),
                "written": report.written,
                "malformed": report.malformed,
            },
            "index_all, nothing changed": {
                "s": round(t_again, 3),
                "MB/s": round(mb / t_again, 1),
                "ratio to baseline": ratio(again, 0),
                "CPU ratio": ratio(again, 1),
                "unchanged": again[-1][2].unchanged,
            },
            "pbot-watch index (CLI, empty archive)": {
                "s": round(cli[0], 3),
                "MB/s": round(mb / cli[0], 1),
                "ratio to baseline": round(cli[0] / t_base, 2),
                "summary": cli[1],
            },
            "target": "index_all ratio to baseline <= 2.0 (wall clock; CPU ratio is less sensitive to other load)",
        }
        if args.profile:
            clear_records(spaces)
            profiler = cProfile.Profile()
            profiler.enable()
            index_all([root], ArchiveStore())
            profiler.disable()
            stream = io.StringIO()
            pstats.Stats(profiler, stream=stream).sort_stats("tottime").print_stats(25)
            figures["profile"] = stream.getvalue()
        return figures
    finally:
        if args.out is None and not args.keep:
            shutil.rmtree(out, ignore_errors=True)


def corpus_arguments(parser: argparse.ArgumentParser) -> None:
    """The shape of the generated corpus, the same for every bench that uses ``generate``."""
    parser.add_argument("--sessions", type=int, default=200, help="number of session files (default 200)")
    parser.add_argument("--size-mb", type=float, default=50.0, help="total corpus size in MB (default 50)")
    parser.add_argument("--workspaces", type=int, default=8, help="number of workspaces (default 8)")


def main() -> None:
    from figures import bench_parser, show_figures

    parser = bench_parser(__doc__)
    corpus_arguments(parser)
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement; medians are shown")
    parser.add_argument("--out", type=Path, help="write the corpus here and keep it (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the temp corpus")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of one in-process pass")
    args = parser.parse_args()
    os.environ.setdefault("PYTHONHASHSEED", "0")
    figures = run(args)
    profile = None if args.json else figures.pop("profile", None)
    show_figures(figures, as_json=args.json)
    if profile:
        print(profile)


if __name__ == "__main__":
    main()
