"""How long a person (or a script, or an agent) waits for each quick command, and how much of it is start-up.

On a history, either generated (``bench/index_throughput.py``'s generator, small by default)
or a copy of a generated corpus given with ``--corpus`` (its ``sessions/``; records go to a
central archive ``DIR/archive`` and the state to ``DIR/state``, both built once and reused), it
indexes the history, runs the service once until it caught up (so a status file exists) and
runs one query of each kind (so the search and memory indexes are warm), then times whole
``pbot-watch`` processes, each ``--repeat`` times, interleaved:

* the floors: ``python -c pass`` (the interpreter's own start, which no Python command goes
  below) and ``import pbot_watch.cli`` (the command group);
* ``--help``, ``status``, ``search --json WORD``, ``search --json`` (the session list), ``read
  --json NODE``, ``memory search --json WORD`` and ``memory search --json`` of a word found
  nowhere;
* for each query command, ``imports of ...``: a process that imports exactly the modules that
  command ends up holding, started as the command's process starts (``cli.query_process``),
  and does nothing else. Its time over the full command's is the
  command's *start-up share*: what the person waits for before the query itself runs.

Each is timed with bytecode (``.pyc`` files written once into a private cache folder and read
after, as an installed package has them) and without (``PYTHONDONTWRITEBYTECODE=1`` and no
cache: every module of an editable checkout is compiled again by every process), unless
``--bytecode`` picks one. Wall and CPU time (user + system of the process, from ``wait4``),
p50 and p95, and peak RSS are printed. ``--install wheel`` times a wheel of this checkout
installed in a scratch virtual environment (bytecode compiled at install, so timed with
bytecode only; no editable finder: the install a user runs) instead of this environment's, usually an editable one; ``both``
prints both. Target on a 2-core machine: warm ``memory search
--json`` p50 <= 250 ms wall on the 634 MB corpus; ``status`` and ``--help`` under 150 ms. On a
loaded machine compare CPU times: wall time then includes waiting for a core. Run by hand::

    .venv/bin/python bench/cli_latency.py --install both
    cp -a /path/to/corpus/sessions /tmp/c/ && .venv/bin/python bench/cli_latency.py --corpus /tmp/c --repeat 21

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
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from first_run import Timed, load_average, pbot_watch, timed

WORD = "cursor"
NO_MATCH = "xyzzy-no-match"
FLOORS = ("python -c pass", "import pbot_watch.cli")
MODES = ("bytecode", "no bytecode")
INSTALLS = ("editable", "wheel")
REPO = Path(__file__).resolve().parent.parent

DUMP_MODULES = """\
import json, sys
from pbot_watch.cli import run
sys.argv = ["pbot-watch", *sys.argv[1:]]
try:
    run()
except SystemExit:
    pass
print(json.dumps(sorted(name for name in sys.modules if "." not in name or name.startswith("pbot_watch."))))
"""
"""Run the command in process as the console script does, then print the modules it holds (top-level packages and ours)."""


def mode_env(env: dict[str, str], mode: str, cache: Path) -> dict[str, str]:
    """The environment of ``mode``: bytecode read from (and written once to) ``cache``, or none at all."""
    out = {
        key: value
        for key, value in env.items()
        if key not in {"PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX"}
    }
    if mode == "bytecode":
        out["PYTHONPYCACHEPREFIX"] = str(cache)
    else:
        out["PYTHONDONTWRITEBYTECODE"] = "1"
    return out


def checked(argv: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stdout}{done.stderr}")
    return done.stdout


def serve_until_caught_up(roots: list[str], env: dict[str, str]) -> None:
    """``pbot-watch run`` until it logs ``caught_up``, then SIGTERM: a status file and built indexes."""
    run = subprocess.Popen(
        [*pbot_watch(), "run", *roots, "--idle-seconds", "3600", "--log-format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    assert run.stdout is not None
    deadline = time.monotonic() + 1800
    for line in run.stdout:
        if '"caught_up"' in line or time.monotonic() > deadline:
            break
    run.send_signal(signal.SIGTERM)
    run.communicate(timeout=120)


def prepare(roots: list[str], env: dict[str, str]) -> str:
    """Records, a status file and warm indexes; returns a node id to read."""
    state = Path(env["PBOT_WATCH_STATE_DIR"])
    if not (state / "status.json").is_file():
        serve_until_caught_up(roots, env)
    if not (state / "status.json").is_file():
        raise SystemExit("the service wrote no status file")
    found = checked([*pbot_watch(), "search", *roots, "--json", WORD], env)
    checked([*pbot_watch(), "memory", "search", *roots, "--json", WORD], env)
    return str(json.loads(found)["matches"][0]["id"])


def wheel_install(scratch: Path) -> Path:
    """A wheel of this checkout installed in a scratch virtual environment; returns its python.

    Its dependencies are this environment's (a ``.pth`` line names its site-packages, after the
    scratch one), so nothing is downloaded; the package itself is the wheel's, its bytecode
    compiled by pip as in a user's install.
    """
    wheels, venv = scratch / "wheels", scratch / "venv"
    checked(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(REPO)],
        dict(os.environ),
    )
    checked([sys.executable, "-m", "venv", "--without-pip", str(venv)], dict(os.environ))
    python = venv / "bin" / "python"
    site = Path(
        checked(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], dict(os.environ)
        ).strip()
    )
    (site / "_cli_latency_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (wheel,) = wheels.glob("pbot_watch-*.whl")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)]
    checked(pip, dict(os.environ))
    return python


def commands(roots: list[str], node: str, python: Path | None = None) -> dict[str, list[str]]:
    """The timed commands of the install whose interpreter is ``python`` (default: this one)."""
    python = python or Path(sys.executable)
    cli = [str(python.parent / "pbot-watch")] if python != Path(sys.executable) else pbot_watch()
    return {
        "python -c pass": [str(python), "-c", "pass"],
        "import pbot_watch.cli": [str(python), "-c", "import pbot_watch.cli"],
        "--help": [*cli, "--help"],
        "status": [*cli, "status"],
        f"search {WORD}": [*cli, "search", *roots, "--json", WORD],
        "search (session list)": [*cli, "search", *roots, "--json"],
        "read NODE": [*cli, "read", *roots, "--json", node],
        f"memory search {WORD}": [*cli, "memory", "search", *roots, "--json", WORD],
        "memory search no-match": [*cli, "memory", "search", *roots, "--json", NO_MATCH],
    }


QUERIES = (f"search {WORD}", "read NODE", f"memory search {WORD}")
"""The commands whose start-up share is measured (an ``imports of`` process each)."""


def import_only(argv: list[str], env: dict[str, str]) -> list[str]:
    """A process importing what ``argv``'s command holds at its end, and doing nothing else."""
    python = str(Path(argv[0]).parent / "python") if Path(argv[0]).name == "pbot-watch" else argv[0]
    held = json.loads(checked([python, "-c", DUMP_MODULES, *argv[1:]], env).splitlines()[-1])
    wanted = [name for name in held if name not in {"__main__", "__mp_main__"} and not name.startswith("_")]
    # Started as the command's process starts (cli.query_process), so the two differ by the query alone.
    code = (
        "import importlib\nfrom pbot_watch.cli import query_process\nquery_process.start()\n"
        "for name in %r:\n    try:\n        importlib.import_module(name)\n    except ImportError:\n        pass\n"
        "query_process.imported()\n"
    )
    return [python, "-c", code % wanted]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(results: list[Timed]) -> dict[str, Any]:
    walls = [r.wall * 1000 for r in results]
    cpus = [r.cpu * 1000 for r in results]
    return {
        "wall ms": round(statistics.median(walls)),
        "wall p95 ms": round(pct(walls, 0.95)),
        "cpu ms": round(statistics.median(cpus)),
        "cpu p95 ms": round(pct(cpus, 0.95)),
        "peak RSS MB": round(statistics.median(r.rss_mb for r in results)),
    }


def measure(argvs: dict[str, list[str]], env: dict[str, str], repeat: int) -> dict[str, Any]:
    for argv in argvs.values():  # once untimed: bytecode written, pages cached
        timed(argv, env)
    runs: dict[str, list[Timed]] = {name: [] for name in argvs}
    for _ in range(repeat):  # interleaved: load from other processes hits every command alike
        for name, argv in argvs.items():
            result = timed(argv, env)
            if result.code not in (0, 3):  # status exits 3 when the service is not running
                raise SystemExit(f"{name} failed ({result.code}): {result.out}")
            runs[name].append(result)
    figures = {name: summary(results) for name, results in runs.items()}
    for name in QUERIES:
        full, imports = figures[name], figures[f"imports of {name}"]
        full["start-up share"] = (
            f"{imports['wall ms'] / max(full['wall ms'], 1):.0%} of wall, {imports['cpu ms'] / max(full['cpu ms'], 1):.0%} of cpu"
        )
    return figures


def run(args: argparse.Namespace) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix="pbot-cli-"))
    try:
        if args.corpus is not None:
            home = args.corpus.resolve()
            if not (home / "sessions").is_dir():
                raise SystemExit(f"{home} has no sessions/ folder")
            roots = ["--sessions", str(home / "sessions"), "--archive", str(home / "archive")]
            env = {**os.environ, "PBOT_WATCH_STATE_DIR": str(home / "state")}
        else:
            from index_throughput import generate

            root, _ = generate(scratch / "corpus", args.sessions, args.size_mb, workspaces=4, exchanges=20)
            roots = ["--sessions", str(root)]
            env = {**os.environ, "PBOT_WATCH_STATE_DIR": str(scratch / "state")}
        node = prepare(roots, env)
        figures: dict[str, Any] = {"load": load_average(), "runs": args.repeat}
        modes = MODES if args.bytecode == "both" else (args.bytecode,)
        for install in INSTALLS if args.install == "both" else (args.install,):
            argvs = commands(roots, node, wheel_install(scratch) if install == "wheel" else None)
            # pip compiled the wheel's bytecode at install: without a cache it is read all the same.
            for mode in modes if install == "editable" else ("bytecode",):
                menv = mode_env(env, mode, scratch / "pycache")
                timed_argvs = {
                    **argvs,
                    **{f"imports of {name}": import_only(argvs[name], menv) for name in QUERIES},
                }
                key = mode if args.install == "editable" else f"{install}, {mode}"
                figures[key] = measure(timed_argvs, menv, args.repeat)
        figures["targets"] = "memory search p50 <= 250 ms wall (634 MB); status and --help < 150 ms wall"
        figures["load after"] = load_average()
        return figures
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--corpus",
        type=Path,
        default=None,
        help="a folder holding sessions/ (a copy: archive/ and state/ are written beside it)",
    )
    parser.add_argument("--sessions", type=int, default=60, help="sessions to generate (default 60)")
    parser.add_argument("--size-mb", type=float, default=20.0, help="their size in MB (default 20)")
    parser.add_argument("--repeat", type=int, default=11, help="runs of each command (default 11)")
    parser.add_argument("--bytecode", choices=("both", *MODES), default="both", help="which modes to time")
    parser.add_argument(
        "--install",
        choices=("both", *INSTALLS),
        default="editable",
        help="this environment's install (editable), a wheel of this checkout in a scratch venv, or both",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    figures = run(args)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    for key, value in figures.items():
        if not isinstance(value, dict):
            print(f"{key}: {value}")
            continue
        print(f"\n{key}:")
        for name, row in value.items():
            print(f"{name:>40}: " + ", ".join(f"{k} {v}" for k, v in row.items()))


if __name__ == "__main__":
    main()
