"""Tool calls inside Pi: the extension's long-lived child against spawning the CLI per call.

The Pi package's extension starts ``pbot-watch pi serve`` once and sends every tool call to it
as one JSON line. This times, on an archive of 100,000 exchanges (bench/search_latency.py's
generator) and a session file of about 20 MB:

- ``child``: a tool call's round trip through the running child (what a model's call costs,
  on top of Pi's own work), p50 and p95;
- ``cli``: the same query with ``pbot-watch search --json`` / ``pbot-watch memory search
  --json`` started per call (interpreter start, imports, index open), p50 and p95;
- ``cues``: the cue block of the 20 MB session's branch, through the child: the first call
  (reads and parses the file) and a repeated one (the child's cache), and in-process.

Run by hand (the first run builds the archive and its index; --keep and --reuse skip that):

    .venv/bin/python bench/pi_tools.py
    .venv/bin/python bench/pi_tools.py --exchanges 2000 --calls 20 --session-mb 2   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.search_latency import COMMON_EN, COMMON_ZH, RARE_EN, RARE_ZH, generate, pct, sentence

SCRIPT = Path(sys.executable).parent / "pbot-watch"
SESSION_ID = "01a22900-0000-7000-8000-000000000001"
TOOLS = ("bash", "read", "edit")


# ---- a large Pi session: tool work, failures, edits, compactions ---------------------------------


def write_session(path: Path, megabytes: float, seed: int = 11) -> tuple[int, str]:
    """A v3 session file of about ``megabytes`` of tool work, compacted every 200 entries.

    Returns the number of entries and the leaf id.
    """
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    target = int(megabytes * 1_000_000)
    lines = [
        json.dumps(
            {
                "type": "session",
                "version": 3,
                "id": SESSION_ID,
                "timestamp": "2026-11-01T08:00:00.000Z",
                "cwd": "/w",
            }
        )
    ]
    size = len(lines[0])
    parent: str | None = None
    count = 0
    last_kept = None
    second = 0

    def add(entry: dict[str, Any]) -> str:
        nonlocal parent, size, count, second
        count += 1
        second += 1
        entry_id = f"{count:08x}"
        stamp = f"2026-11-{1 + second // 86400 % 28:02d}T{second // 3600 % 24:02d}:{second // 60 % 60:02d}:{second % 60:02d}.000Z"
        line = json.dumps({**entry, "id": entry_id, "parentId": parent, "timestamp": stamp})
        lines.append(line)
        size += len(line) + 1
        parent = entry_id
        return entry_id

    turn = 0
    while size < target:
        turn += 1
        user = add(
            {
                "type": "message",
                "message": {"role": "user", "content": [{"type": "text", "text": sentence(rng, 12)}]},
            }
        )
        if last_kept is None:
            last_kept = user
        for step in range(rng.randint(1, 4)):
            tool = rng.choice(TOOLS)
            call_id = f"call_{turn}_{step}"
            args = (
                {"command": f"npm test -- --grep {sentence(rng, 2)}"}
                if tool == "bash"
                else {"path": f"src/module_{rng.randrange(40)}.ts"}
                if tool == "read"
                else {
                    "path": f"src/module_{rng.randrange(40)}.ts",
                    "edits": [{"oldText": "a", "newText": "b"}],
                }
            )
            add(
                {
                    "type": "message",
                    "message": {
                        "role": "assistant",
                        "content": [{"type": "toolCall", "id": call_id, "name": tool, "arguments": args}],
                        "stopReason": "toolUse",
                    },
                }
            )
            output = "\n".join(sentence(rng, rng.randint(6, 16)) for _ in range(rng.randint(5, 60)))
            failed = tool == "bash" and rng.random() < 0.2
            add(
                {
                    "type": "message",
                    "message": {
                        "role": "toolResult",
                        "toolCallId": call_id,
                        "toolName": tool,
                        "content": [{"type": "text", "text": output}],
                        "isError": failed,
                    },
                }
            )
        add(
            {
                "type": "message",
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": sentence(rng, 20)}],
                    "stopReason": "stop",
                },
            }
        )
        if turn % 60 == 0:
            kept = parent
            add(
                {
                    "type": "compaction",
                    "summary": "## Goal\n" + sentence(rng, 30),
                    "firstKeptEntryId": kept,
                    "tokensBefore": 100_000,
                }
            )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert parent is not None
    return count, parent


# ---- the child, as the extension talks to it --------------------------------------------------------


class Child:
    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.proc = subprocess.Popen(
            [str(SCRIPT), "pi", "serve", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.next = 0

    def call(self, method: str, params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.next += 1
        started = time.perf_counter()
        self.proc.stdin.write(
            json.dumps({"id": self.next, "method": method, "params": params}).encode() + b"\n"
        )
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        elapsed = (time.perf_counter() - started) * 1000
        assert reply["id"] == self.next, reply
        assert "result" in reply, reply
        return elapsed, reply["result"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def cli(env: dict[str, str], *args: str) -> float:
    started = time.perf_counter()
    done = subprocess.run([str(SCRIPT), *args], env=env, capture_output=True, check=False)
    elapsed = (time.perf_counter() - started) * 1000
    assert done.returncode == 0, done.stderr.decode()
    return elapsed


def figures(values: list[float]) -> tuple[float, float]:
    return statistics.median(values), pct(values, 0.95)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--exchanges", type=int, default=100_000)
    parser.add_argument("--session-mb", type=float, default=20.0)
    parser.add_argument("--calls", type=int, default=50, help="timed calls per query through the child")
    parser.add_argument("--cli-calls", type=int, default=10, help="timed CLI runs per query")
    parser.add_argument("--keep", type=Path, help="build in this folder and keep it")
    parser.add_argument("--reuse", action="store_true", help="with --keep: reuse what was built before")
    args = parser.parse_args()

    base = args.keep or Path(tempfile.mkdtemp(prefix="pbot-pi-bench-"))
    archive, sessions, state = base / "archive", base / "sessions", base / "state"
    session = sessions / "bench" / "session.jsonl"
    env = {**os.environ, "XDG_STATE_HOME": str(state), "XDG_CONFIG_HOME": str(base / "config")}
    env.pop("PBOT_WATCH_CONFIG", None)
    roots = ["--sessions", str(sessions), "--archive", str(archive)]
    if not (args.reuse and archive.is_dir() and session.is_file()):
        for folder in (archive, sessions, state):
            shutil.rmtree(folder, ignore_errors=True)
        started = time.perf_counter()
        nodes = generate(archive, args.exchanges)
        print(f"archive: {args.exchanges} exchanges, {nodes} nodes ({time.perf_counter() - started:.0f} s)")
        entries, _leaf = write_session(session, args.session_mb)
        print(f"session: {entries} entries, {session.stat().st_size / 1e6:.1f} MB")
    started = time.perf_counter()
    cli(env, "reindex", *roots)
    print(f"search index ready ({time.perf_counter() - started:.0f} s)")

    queries: list[tuple[str, dict[str, Any], list[str]]] = [
        (f"history literal {COMMON_EN}", {"query": COMMON_EN}, ["search", COMMON_EN]),
        (f"history literal {RARE_EN}", {"query": RARE_EN}, ["search", RARE_EN]),
        (f"history literal {COMMON_ZH}", {"query": COMMON_ZH}, ["search", COMMON_ZH]),
        (f"history literal {RARE_ZH}", {"query": RARE_ZH}, ["search", RARE_ZH]),
        (
            "history terms 3 words",
            {"query": "cache index error", "match": "terms"},
            ["search", "cache index error", "--match", "terms"],
        ),
        ("history sessions list", {}, ["search"]),
    ]
    memory_queries = [
        ("memory literal npm test", {"query": "npm test"}, ["memory", "search", "npm test"]),
        (
            "memory terms 2 words",
            {"query": "error config", "match": "terms"},
            ["memory", "search", "error config", "--match", "terms"],
        ),
    ]
    child = Child(env, *roots)
    started = time.perf_counter()
    child.call("tool", {"name": "history_search", "arguments": {"query": COMMON_EN}})
    child.call("tool", {"name": "search_memory", "arguments": {"query": "npm"}})
    print(
        f"child: first calls (imports, memory index of the session) {time.perf_counter() - started:.1f} s\n"
    )

    print(
        f"{'query':32} {'child p50':>10} {'p95':>8} {'cli p50':>9} {'p95':>8} {'p50 ratio':>10} {'p95 ratio':>10}"
    )
    child_p50: list[float] = []
    ratios: list[tuple[float, float]] = []
    for label, arguments, argv in [
        *[(lbl, {"name": "history_search", "arguments": a}, [*v, "--json"]) for lbl, a, v in queries],
        *[(lbl, {"name": "search_memory", "arguments": a}, [*v, "--json"]) for lbl, a, v in memory_queries],
    ]:
        through = [child.call("tool", arguments)[0] for _ in range(args.calls)]
        spawned = [cli(env, *argv, *roots) for _ in range(args.cli_calls)]
        (c50, c95), (s50, s95) = figures(through), figures(spawned)
        child_p50.append(c50)
        ratios.append((s50 / c50, s95 / c95))
        print(
            f"{label:32} {c50:8.1f}ms {c95:6.1f}ms {s50:7.0f}ms {s95:6.0f}ms {s50 / c50:9.0f}x {s95 / c95:9.0f}x"
        )
    print(
        f"\nchild p50 over all queries: median {statistics.median(child_p50):.1f} ms, worst {max(child_p50):.1f} ms; "
        f"cli/child p50 ratio: min {min(r[0] for r in ratios):.0f}x, median {statistics.median(r[0] for r in ratios):.0f}x; "
        f"p95 ratio: min {min(r[1] for r in ratios):.0f}x"
    )
    child.close()


if __name__ == "__main__":
    main()
