"""How long a person waits for each quick command: wall and CPU time of whole processes.

Generates a small history (``bench/index_throughput.py``'s generator), indexes it, runs the
service once until it caught up (so a status file exists) and one query of each kind (so the
search and memory indexes are warm), then times whole ``pbot-watch`` processes, each
``--repeat`` times, interleaved, beside ``python -c pass`` (the interpreter's own start, the
floor no Python command can go below):

* ``--help``, ``status``, ``search WORD``, ``search`` (the session list), ``read NODE``,
  ``memory search WORD``.

Medians of wall and CPU seconds (user + system of the process, from ``wait4``) are printed, and
each command's time above the floor. Targets on a 2-core machine: ``status`` and ``--help``
under 150 ms, a warm ``search`` under 250 ms (wall). On a loaded machine compare CPU times:
wall time then includes waiting for a core. Run by hand::

    .venv/bin/python bench/cli_latency.py
    .venv/bin/python bench/cli_latency.py --sessions 300 --repeat 20 --json

Figures are printed, never asserted: ``tests/core/test_cli_latency_bench.py`` runs it tiny.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from first_run import Timed, load_average, pbot_watch, timed

WORD = "cursor"


def prepare(out: Path, sessions: int, size_mb: float, env: dict[str, str]) -> tuple[Path, str]:
    """The corpus, its records, a status file and warm indexes; returns the root and a node id."""
    from index_throughput import generate

    root, _ = generate(out, sessions, size_mb, workspaces=4, exchanges=20)
    state = Path(env["PBOT_WATCH_STATE_DIR"])
    run = subprocess.Popen(
        [*pbot_watch(), "run", "--sessions", str(root), "--idle-seconds", "3600", "--log-format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    assert run.stdout is not None
    deadline = time.monotonic() + 600
    for line in run.stdout:
        if '"caught_up"' in line or time.monotonic() > deadline:
            break
    run.send_signal(signal.SIGTERM)
    run.communicate(timeout=60)
    if not (state / "status.json").is_file():
        raise SystemExit("the service wrote no status file")
    found = subprocess.run(
        [*pbot_watch(), "search", "--sessions", str(root), "--json", WORD],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    node = json.loads(found.stdout)["matches"][0]["id"]
    subprocess.run(
        [*pbot_watch(), "memory", "search", "--sessions", str(root), WORD],
        capture_output=True,
        env=env,
        check=True,
    )
    return root, node


def commands(root: Path, node: str) -> dict[str, list[str]]:
    cli = pbot_watch()
    roots = ["--sessions", str(root)]
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "--help": [*cli, "--help"],
        "status": [*cli, "status"],
        f"search {WORD}": [*cli, "search", *roots, WORD],
        "search (session list)": [*cli, "search", *roots],
        "read NODE": [*cli, "read", *roots, node],
        f"memory search {WORD}": [*cli, "memory", "search", *roots, WORD],
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    out = Path(tempfile.mkdtemp(prefix="pbot-cli-"))
    env = {**os.environ, "PBOT_WATCH_STATE_DIR": str(out / "state")}
    try:
        root, node = prepare(out / "corpus", args.sessions, args.size_mb, env)
        argvs = commands(root, node)
        runs: dict[str, list[Timed]] = {name: [] for name in argvs}
        for _ in range(args.repeat):  # interleaved: load from other processes hits every command alike
            for name, argv in argvs.items():
                result = timed(argv, env)
                if result.code not in (0, 3):  # status exits 3 when the service is not running
                    raise SystemExit(f"{name} failed ({result.code}): {result.out}")
                runs[name].append(result)
        floor_wall = statistics.median(r.wall for r in runs["python -c pass"])
        floor_cpu = statistics.median(r.cpu for r in runs["python -c pass"])
        figures: dict[str, Any] = {"load": load_average(), "sessions": args.sessions, "runs": args.repeat}
        for name, results in runs.items():
            wall = statistics.median(r.wall for r in results)
            cpu = statistics.median(r.cpu for r in results)
            figures[name] = {
                "wall ms": round(wall * 1000),
                "cpu ms": round(cpu * 1000),
                "above floor wall ms": round((wall - floor_wall) * 1000),
                "above floor cpu ms": round((cpu - floor_cpu) * 1000),
            }
        figures["targets"] = "status and --help < 150 ms wall, warm search < 250 ms wall"
        figures["load after"] = load_average()
        return figures
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=60, help="sessions in the history (default 60)")
    parser.add_argument("--size-mb", type=float, default=20.0, help="its size in MB (default 20)")
    parser.add_argument("--repeat", type=int, default=11, help="runs of each command; medians shown")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    figures = run(args)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    for name, value in figures.items():
        if isinstance(value, dict):
            print(f"{name:>24}: " + ", ".join(f"{k} {v}" for k, v in value.items()))
        else:
            print(f"{name:>24}: {value}")


if __name__ == "__main__":
    main()
