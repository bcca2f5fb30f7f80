"""Unscoped raw-memory search at the scale of a real history: query times, index size, memory.

On the generated corpora of ``bench/index_throughput.py`` (``--seed 1``, by default 300
sessions x 200 exchanges at 634 MB and at 50 MB: the same sessions, less tool output), it
builds raw memory once with the first ``pbot-watch memory search`` (no service: the query
reads every session file) and then measures, for each query class (a common word, a rare
one, a phrase with punctuation, CJK, a no-match, ``--match terms``):

* ``in process``: ``search_memory`` on the built index: the first search of each needle (its
  tally dropped first, so it counts from the texts and keeps one when it has many candidates,
  ``memory/tally.py``), then warm p50 / p95 over ``--runs`` (read from the tally where one was
  kept: ``tallied`` says so);
* ``cli``: ``pbot-watch memory search --json`` end to end, warm, p50 / p95 and its peak RSS
  (after the in-process runs, so a tallied needle's tally is read), with the warm query server
  the service runs beside itself (``pbot_watch/prefork``: the script hands the query to a process
  forked from one that has imported it), and ``cli without a server`` (the script runs it itself);

and ``search.db``'s size by component (SQLite's ``dbstat``: each table with its indexes, an
FTS table with its shadow tables) against the session bytes, with its rows: sources, the
distinct texts the indexes hold, and the sources on current branches.

Then ``run from empty state``: ``pbot-watch run`` on the same corpus from an empty state and
archive (``first_run.py``'s run, without its appends), which is how most people get raw memory:
when raw memory holds every file (built by the service's workers as it catches up), when it
logs ``caught_up``, its CPU and peak RSS, and the ``search.db`` it leaves, which holds the
history index beside raw memory, by component against the session bytes. (The first
``memory search`` above builds raw memory alone: there are no records yet.)

Both corpora are printed side by side with how each figure grew. Targets at 634 MB (2 cores):
in-process p50 <= 50 ms for every class (no-match <= 5 ms), CLI p50 <= 250 ms, everything in raw
memory searchable <= 60 s after ``run`` starts, ``search.db`` <= 0.6 x the session bytes, RSS
< 200 MB. Run by hand::

    .venv/bin/python bench/memory_scale.py --out /tmp/memory-scale   # keeps (and reuses) corpora

Figures are printed, never asserted: ``tests/memory/test_bench_memory_scale.py`` runs it tiny.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from first_run import (  # noqa: E402
    clear_records,
    corpus,
    db_bytes,
    first_run,
    load_average,
    pbot_watch,
    sizes_mb,
    timed,
    tree_bytes,
)

QUERIES = {
    "common word": ("literal", "cursor"),
    "rare word": ("literal", "module_26.py:511:"),  # 69 lines of the 634 MB corpus; none of the 50 MB one
    "phrase with punctuation": ("literal", "src/module_13.py:110: the"),
    "CJK": ("literal", "配置"),
    "no match": ("literal", "xyzzy-no-match"),
    "terms": ("terms", "cursor offset"),
}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))], 2)


def components(db: Path) -> dict[str, float]:
    """MB per table (with its indexes; an FTS table with its shadow tables), largest first."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        owners = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master"))
        fts = [
            name
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE sql LIKE '%VIRTUAL TABLE%'")
        ]
        sizes: dict[str, int] = {}
        for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
            owner = owners.get(name, name)
            owner = next((table for table in fts if owner.startswith(table + "_")), owner)
            sizes[owner] = sizes.get(owner, 0) + size
    finally:
        conn.close()
    return {name: round(size / 1e6, 1) for name, size in sorted(sizes.items(), key=lambda kv: -kv[1])}


def pages(db: Path) -> dict[str, float]:
    """The page size, and what of the file is free pages and unused room in pages (slack, MB)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        free = int(conn.execute("PRAGMA freelist_count").fetchone()[0]) * size
        unused = int(conn.execute("SELECT coalesce(sum(unused), 0) FROM dbstat").fetchone()[0])
    finally:
        conn.close()
    return {
        "page size": size,
        "free pages MB": round(free / 1e6, 1),
        "unused in pages MB": round(unused / 1e6, 1),
    }


def rows(db: Path) -> dict[str, int]:
    """Sources, the distinct texts the indexes hold (one row each), and the sources on current branches."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {
            name: int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
            for name, table in (
                ("sources", "mem_sources"),
                ("texts", "mem_texts"),
                ("visible", "mem_visible"),
            )
        }
    finally:
        conn.close()


def in_process(db: Path, runs: int) -> dict[str, Any]:
    """Each class's first search (no tally of its needle: it counts from the texts, and may keep
    one) and the warm repeated ones (``p50``/``p95``: from the tally where the first kept one)."""
    from pbot_watch.memory.query import search_memory
    from pbot_watch.memory.tally import forget_tally, tallied
    from pbot_watch.search.index import SearchIndex

    out: dict[str, Any] = {}
    with SearchIndex(db) as index:
        search_memory(index, "warm-up")  # opens the tables, as a long-lived process has
        for name, (mode, query) in QUERIES.items():
            needle = query.strip().lower()
            forget_tally(index.conn, needle)
            start = time.perf_counter()
            result = search_memory(index, query, match=mode)  # type: ignore[arg-type]
            first = (time.perf_counter() - start) * 1000
            times = []
            for _ in range(runs):
                start = time.perf_counter()
                search_memory(index, query, match=mode)  # type: ignore[arg-type]
                times.append((time.perf_counter() - start) * 1000)
            out[name] = {
                "hits": result.total,
                "first ms": round(first, 2),
                "p50 ms": pct(times, 0.5),
                "p95 ms": pct(times, 0.95),
                "tallied": mode == "literal" and tallied(index.conn, needle) is not None,
            }
    return out


@contextmanager
def warm_server(state: Path, env: dict[str, str]) -> Iterator[None]:
    """The warm query server on ``state``, as the service starts it beside itself (``service/warm.py``)."""
    socket = state / "query.sock"
    server = subprocess.Popen(
        [sys.executable, "-P", "-m", "pbot_watch.prefork.server", str(socket)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,  # its JSON events, which the service would log
    )
    try:
        deadline = time.monotonic() + 60
        while not socket.exists():
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the warm query server did not start")
            time.sleep(0.05)
        yield
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)


def warm_cli(root: Path, env: dict[str, str], runs: int) -> dict[str, Any]:
    """Through the CLI with the service's warm query server (the script hands it the query)."""
    with warm_server(Path(env["PBOT_WATCH_STATE_DIR"]), env):
        return through_cli(root, env, runs)


def through_cli(root: Path, env: dict[str, str], runs: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, (mode, query) in QUERIES.items():
        argv = [*pbot_watch(), "memory", "search", "--sessions", str(root), "--match", mode, "--json", query]
        times, rss = [], 0.0
        for _ in range(runs):
            result = timed(argv, env)
            if result.code != 0:
                raise SystemExit(f"pbot-watch memory search failed: {result.out}")
            times.append(result.wall * 1000)
            rss = max(rss, result.rss_mb)
        out[name] = {"p50 ms": pct(times, 0.5), "p95 ms": pct(times, 0.95), "peak RSS MB": round(rss, 1)}
    return out


def db_figures(db: Path, session_bytes: int) -> dict[str, Any]:
    """``search.db``'s size, against the session bytes, and by component."""
    size = db_bytes(db)
    return {
        "MB": round(size / 1e6, 1),
        "/ session bytes": round(size / session_bytes, 2),
        "by component MB": components(db),
    }


def run_build(root: Path, spaces: list[Path], sessions: int, session_bytes: int) -> dict[str, Any]:
    """``pbot-watch run`` from an empty state until caught up: raw memory's build inside the
    service, and the whole ``search.db`` it leaves (history index and raw memory).
    """
    state = Path(tempfile.mkdtemp(prefix="pbot-memory-scale-run-"))
    try:
        ran = first_run(root, spaces, sessions, appends=False, state=state)
        keys = ("raw memory all held s", "all searchable s", "caught up s", "cpu s", "peak RSS MB")
        return {
            **{key: ran[key] for key in keys},
            "search.db": db_figures(state / "search.db", session_bytes),
        }
    finally:
        shutil.rmtree(state, ignore_errors=True)
        clear_records(spaces)  # the records it wrote: a kept corpus stays as it was generated


def measure(out: Path, size_mb: float, args: argparse.Namespace) -> dict[str, Any]:
    root, spaces = corpus(out, args.sessions, size_mb, args.exchanges, seed=args.seed)
    state = out / "state"
    state.mkdir(exist_ok=True)
    env = {**os.environ, "PBOT_WATCH_STATE_DIR": str(state)}
    session_bytes = tree_bytes(root, "*.jsonl")
    build = timed([*pbot_watch(), "memory", "search", "--sessions", str(root), "--json", "ECONNRESET"], env)
    if build.code != 0:
        raise SystemExit(f"pbot-watch memory search failed: {build.out}")
    db = state / "search.db"
    figures = {
        "corpus": {"sessions": args.sessions, "MB": round(session_bytes / 1e6, 1)},
        "first search (builds raw memory)": {
            "wall s": round(build.wall, 1),
            "peak RSS MB": round(build.rss_mb, 1),
        },
        "in process": in_process(db, args.runs),
        "cli": warm_cli(root, env, args.cli_runs),
        "cli without a server": through_cli(root, {**env, "PBOT_WATCH_WARM": "0"}, args.cli_runs),
        "search.db": {**db_figures(db, session_bytes), "pages": pages(db), "rows": rows(db)},
    }
    if not args.skip_run:
        figures["run from empty state"] = run_build(root, spaces, args.sessions, session_bytes)
    return figures


def growth(small: dict[str, Any], large: dict[str, Any]) -> dict[str, Any]:
    """Each p50 and the index size of the large corpus over the small one's, beside the bytes."""
    out: dict[str, Any] = {"bytes": round(large["corpus"]["MB"] / small["corpus"]["MB"], 1)}
    for where in ("in process", "cli", "cli without a server"):
        for name in QUERIES:
            a, b = small[where][name]["p50 ms"], large[where][name]["p50 ms"]
            out[f"{where}: {name} p50"] = round(b / a, 1) if a else None
    out["search.db MB"] = round(large["search.db"]["MB"] / small["search.db"]["MB"], 1)
    if "run from empty state" in small and "run from empty state" in large:
        a, b = small["run from empty state"], large["run from empty state"]
        if a["raw memory all held s"] and b["raw memory all held s"]:
            out["run: raw memory all held s"] = round(
                b["raw memory all held s"] / a["raw memory all held s"], 1
            )
        out["run: search.db MB"] = round(b["search.db"]["MB"] / a["search.db"]["MB"], 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes",
        type=sizes_mb,
        default=[50.0, 634.0],
        help="corpus sizes in MB, comma-separated (default 50,634)",
    )
    parser.add_argument("--sessions", type=int, default=300, help="sessions of every corpus (default 300)")
    parser.add_argument("--exchanges", type=int, default=200, help="exchanges per session (default 200)")
    parser.add_argument("--seed", type=int, default=1, help="the generator's seed (default 1)")
    parser.add_argument("--runs", type=int, default=21, help="in-process runs per query (default 21)")
    parser.add_argument("--cli-runs", type=int, default=7, help="CLI runs per query (default 7)")
    parser.add_argument(
        "--out", type=Path, help="keep the corpora and their search.db here (reused when present)"
    )
    parser.add_argument(
        "--skip-run",
        action="store_true",
        help="no `pbot-watch run` from an empty state (raw memory's build inside it)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    base = args.out or Path(tempfile.mkdtemp(prefix="pbot-memory-scale-"))
    figures: dict[str, Any] = {"load": load_average()}
    for size in args.sizes:
        figures[f"{size:g} MB"] = measure(base / f"corpus-{size:g}mb", size, args)
    sizes = sorted(args.sizes)
    if len(sizes) > 1:
        figures["growth (large / small)"] = growth(figures[f"{sizes[0]:g} MB"], figures[f"{sizes[-1]:g} MB"])
    figures["load after"] = load_average()
    if args.json:
        print(json.dumps(figures, ensure_ascii=False, indent=2))
        return
    for name, value in figures.items():
        print(f"{name}: {json.dumps(value, ensure_ascii=False, indent=2)}")


if __name__ == "__main__":
    main()
