"""Tool calls inside Pi: the extension's long-lived child against spawning the CLI per call.

The Pi package's extension starts ``pbot-watch pi serve`` once and sends every tool call to it
as one JSON line. This times, on an archive of 100,000 exchanges (bench/search_latency.py's
generator) and a session file of about 20 MB:

- ``child``: a tool call's round trip through the running child (what a model's call costs,
  on top of Pi's own work), p50 and p95;
- ``cli``: the same query with ``pbot-watch search --json`` / ``pbot-watch memory search
  --json`` started per call (interpreter start, imports, index open), p50 and p95;
- CPU time beside wall-clock time (the child's mean per call from /proc, a CLI run's p50 from
  its rusage), which other load on the machine does not inflate;
- ``cues``: the cue block of the 20 MB session's branch (bench/cues.py's generator), through
  the child: the first call (reads and parses the file) and a repeated one (the child's cache),
  and in process.

Run by hand (the first run builds the archive and its index; --keep and --reuse skip that):

    .venv/bin/python bench/pi_tools.py
    .venv/bin/python bench/pi_tools.py --exchanges 2000 --calls 20 --session-mb 2   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.cues import SESSION_ID
from bench.cues import write_session as write_cue_session
from bench.search_latency import COMMON_EN, COMMON_ZH, RARE_EN, RARE_ZH, generate, pct

SCRIPT = Path(sys.executable).parent / "pbot-watch"
BATCH_KB = 500  # session bytes between compactions, as bench/cues.py


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

    def cpu_ms(self) -> float | None:
        """CPU time the child has used so far (Linux /proc; None elsewhere), in ms."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def cli(env: dict[str, str], *args: str) -> tuple[float, float]:
    """Wall-clock and CPU time (ms) of one CLI run: the CPU time is robust to other load on the machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([str(SCRIPT), *args], env=env, capture_output=True, check=False)
    elapsed = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 0, done.stderr.decode()
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
    return elapsed, cpu


def cues_in_process(session: Path) -> tuple[float, float]:
    """Parse and cue computation of the session in this process (ms), as the child does on a miss."""
    from pbot_watch.memory.cues import compute_cues
    from pbot_watch.sources import read_session_entries

    started = time.perf_counter()
    session_id, entries = read_session_entries(session)
    parsed = time.perf_counter()
    assert session_id == SESSION_ID
    compute_cues(entries, session_id=session_id, context_window=128_000)
    return (parsed - started) * 1000, (time.perf_counter() - parsed) * 1000


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
        session.parent.mkdir(parents=True)
        shape = write_cue_session(session, args.session_mb, BATCH_KB)
        print(
            f"session: {shape['bytes'] / 1e6:.1f} MB, {shape['entries']} entries, {shape['tool events']} tool events, "
            f"{shape['compactions']} compactions"
        )
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
        ("memory literal rare", {"query": "zanthoxylum"}, ["memory", "search", "zanthoxylum"]),
        (
            "memory terms 2 words",
            {"query": "budget limit", "match": "terms"},
            ["memory", "search", "budget limit", "--match", "terms"],
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
        f" {'child cpu':>10} {'cli cpu':>8} {'cpu ratio':>10}"
    )
    child_p50: list[float] = []
    ratios: list[tuple[float, float, float | None]] = []
    rows = [
        *[(lbl, {"name": "history_search", "arguments": a}, [*v, "--json"]) for lbl, a, v in queries],
        *[(lbl, {"name": "search_memory", "arguments": a}, [*v, "--json"]) for lbl, a, v in memory_queries],
    ]
    for label, arguments, argv in rows:
        # BM25 over raw memory re-reads every hit source's lines: seconds on a large session.
        calls = args.calls if "terms" not in label or "memory" not in label else min(args.calls, 3)
        cpu_before = child.cpu_ms()
        through = [child.call("tool", arguments)[0] for _ in range(calls)]
        cpu_after = child.cpu_ms()
        child_cpu = (
            (cpu_after - cpu_before) / calls if cpu_before is not None and cpu_after is not None else None
        )
        spawned = [cli(env, *argv, *roots) for _ in range(min(args.cli_calls, calls))]
        (c50, c95), (s50, s95) = figures(through), figures([wall for wall, _ in spawned])
        cli_cpu = statistics.median(cpu for _, cpu in spawned)
        cpu_ratio = cli_cpu / child_cpu if child_cpu else None
        child_p50.append(c50)
        ratios.append((s50 / c50, s95 / c95, cpu_ratio))
        cpu_cells = (
            f" {child_cpu:8.1f}ms {cli_cpu:6.0f}ms {cpu_ratio:9.0f}x"
            if child_cpu and cpu_ratio
            else f" {'-':>10} {cli_cpu:6.0f}ms"
        )
        print(
            f"{label:32} {c50:8.1f}ms {c95:6.1f}ms {s50:7.0f}ms {s95:6.0f}ms {s50 / c50:9.0f}x {s95 / c95:9.0f}x"
            + cpu_cells
        )
    cue_params = {"sessionFile": str(session), "contextWindow": 128_000}
    first, reply = child.call("cues", cue_params)
    again = [child.call("cues", cue_params)[0] for _ in range(args.calls)]
    in_process = cues_in_process(session)
    print(
        f"\ncues of the {session.stat().st_size / 1e6:.0f} MB session (batch {reply['batch']}): through the child "
        f"{first:.0f} ms the first time (read, parse, compute), then {statistics.median(again):.2f} ms (p50, unchanged "
        f"file); in process: parse {in_process[0]:.0f} ms + cues {in_process[1]:.0f} ms"
    )
    history = [
        (c50, r)
        for (label, *_), c50, r in zip(rows, child_p50, ratios, strict=True)
        if label.startswith("history")
    ]
    print(
        f"\nhistory tools on {args.exchanges} exchanges, through the child: p50 {min(c for c, _ in history):.1f}-"
        f"{max(c for c, _ in history):.1f} ms (median {statistics.median(c for c, _ in history):.1f} ms); "
        f"a CLI run per call is {min(r[0] for _, r in history):.0f}-{max(r[0] for _, r in history):.0f}x slower at p50 "
        f"and {min(r[1] for _, r in history):.0f}-{max(r[1] for _, r in history):.0f}x at p95"
        + (
            f"; in CPU time {min(r[2] for _, r in history if r[2]):.0f}-{max(r[2] for _, r in history if r[2]):.0f}x"
            if all(r[2] for _, r in history)
            else ""
        )
    )
    child.close()


if __name__ == "__main__":
    main()
