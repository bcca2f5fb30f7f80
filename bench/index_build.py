"""What the first query costs on a large history: building the derived search index.

``pbot-watch index`` writes records; the first ``pbot-watch search`` then builds the history
index from them, and the first ``pbot-watch memory search`` builds the raw-memory index from
the session files. Both are what a new user with gigabytes of sessions waits for. This bench
generates (or reuses) a corpus of Pi sessions with ``bench/index_throughput.py``'s generator,
writes its records, then times, each phase in a fresh process on a fresh state folder:

* ``history``: the first history query's refresh (header discovery + records -> FTS5), and the
  index size on disk against the record bytes;
* ``memory``: the first raw-memory query's refresh (session files -> sources -> FTS5), and the
  size it adds, against the session bytes;

with wall and CPU seconds and the phase's peak RSS. ``--profile history`` (or ``memory``) prints
a cProfile of that phase instead. Run by hand::

    .venv/bin/python bench/index_build.py                               # 50 MB corpus, temp dir
    .venv/bin/python bench/index_build.py --out /tmp/corpus634 --sessions 300 --size-mb 634
    .venv/bin/python bench/index_build.py --out /tmp/corpus634 --profile history

With ``--out``, a corpus already there is reused (its records too).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import multiprocessing
import os
import pstats
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


def _tree_bytes(root: Path, pattern: str) -> int:
    return sum(p.stat().st_size for p in root.rglob(pattern) if p.is_file())


def _reset_peak_rss() -> None:
    """Start the peak RSS count now (Linux), so a forked phase does not inherit its parent's."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def _peak_rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _phase(kind: str, root: Path, state: Path, profile: bool, out: Any) -> None:
    """One first query's refresh, in this (fresh) process."""
    from pbot_watch.config import Settings
    from pbot_watch.query import open_query

    _reset_peak_rss()
    settings = Settings(sessions=[root], state_dir=state)
    profiler = cProfile.Profile() if profile else None
    start, cpu = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()
    with open_query(settings, history=kind == "history", memory=kind == "memory"):
        pass
    if profiler:
        profiler.disable()
    figures: dict[str, Any] = {
        "s": round(time.perf_counter() - start, 2),
        "cpu s": round(time.process_time() - cpu, 2),
        "peak RSS MB": _peak_rss_mb(),
    }
    if profiler:
        stream = io.StringIO()
        pstats.Stats(profiler, stream=stream).sort_stats("tottime").print_stats(25)
        figures["profile"] = stream.getvalue()
    out.put(figures)


def run_phase(kind: str, root: Path, state: Path, profile: bool = False) -> dict[str, Any]:
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    process = context.Process(target=_phase, args=(kind, root, state, profile, queue))
    process.start()
    figures: dict[str, Any] = queue.get()
    process.join()
    return figures


def prepare(args: argparse.Namespace, out: Path) -> tuple[Path, list[Path]]:
    """The corpus's session root and workspaces, generated and indexed unless already there."""
    from index_throughput import generate

    from pbot_watch.archive.files import ArchiveStore
    from pbot_watch.indexer import index_all

    root = out / "sessions"
    if root.is_dir():
        spaces = sorted((out / "workspaces").iterdir())
    else:
        root, spaces = generate(out, args.sessions, args.size_mb, args.workspaces)
    if not any((space / ".pi").exists() for space in spaces):
        index_all([root], ArchiveStore())
    return root, spaces


def run(args: argparse.Namespace) -> dict[str, Any]:
    out = args.out or Path(tempfile.mkdtemp(prefix="pbot-build-"))
    state = Path(tempfile.mkdtemp(prefix="pbot-build-state-"))
    try:
        root, spaces = prepare(args, out)
        session_bytes = _tree_bytes(root, "*.jsonl")
        record_bytes = sum(_tree_bytes(space / ".pi", "*.json") for space in spaces)
        db = state / "search.db"
        figures: dict[str, Any] = {
            "corpus": {
                "session files": sum(1 for _ in root.rglob("*.jsonl")),
                "session MB": round(session_bytes / 1e6, 1),
                "record MB": round(record_bytes / 1e6, 1),
            }
        }
        if args.profile:
            if args.profile == "memory":
                run_phase("history", root, state)
            figures[f"{args.profile} (profiled)"] = run_phase(args.profile, root, state, profile=True)
            return figures
        history = run_phase("history", root, state)
        history["index MB"] = round(_size(db) / 1e6, 1)
        history["index / record bytes"] = round(_size(db) / record_bytes, 2)
        figures["history index build (first search)"] = history
        if not args.skip_memory:
            before = _size(db)
            memory = run_phase("memory", root, state)
            memory["index MB added"] = round((_size(db) - before) / 1e6, 1)
            memory["added / session bytes"] = round((_size(db) - before) / session_bytes, 2)
            figures["memory index build (first memory search)"] = memory
        return figures
    finally:
        shutil.rmtree(state, ignore_errors=True)
        if args.out is None and not args.keep:
            shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    from figures import bench_parser, show_figures
    from index_throughput import corpus_arguments

    parser = bench_parser(__doc__)
    corpus_arguments(parser)
    parser.add_argument("--out", type=Path, help="corpus folder, reused if present (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the temp corpus")
    parser.add_argument("--skip-memory", action="store_true", help="only the history index")
    parser.add_argument("--profile", choices=["history", "memory"], help="print a cProfile of one phase")
    args = parser.parse_args()
    os.environ.setdefault("PYTHONHASHSEED", "0")
    show_figures(run(args), as_json=args.json)


if __name__ == "__main__":
    main()
