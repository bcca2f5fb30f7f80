"""A new user's first run on a large history, against personal-bot 0.2.3's own cold load.

Generates Pi sessions of the shape a heavy user has (``--exchanges`` per session, Pi-like
message and tool-output sizes, ``bench/index_throughput.py``'s generator) at two sizes, by
default the 634 MB history of 300 sessions x 200 exchanges and a 50 MB one of the same shape,
and measures on each, every figure as wall and CPU seconds of the process that does the work:

* ``pbot``: personal-bot 0.2.3's own cold load (its TypeScript on Node 22 with Pi 1.6.0, the
  parity oracle's set-up; ``bench/pbot_load.mjs``): every session projected, indexed, written;
* ``index``: ``pbot-watch index`` on an empty archive, interleaved with ``pbot`` (``--repeat``);
* ``search build``: the first ``pbot-watch search`` on those records (it builds the search
  index), the index's size on disk against the record bytes, and the session list's median
  time on it (``search`` without a query), beside pbot's on its loaded records;
* ``run``: ``pbot-watch run`` from an empty state and archive, until the newest session is
  searchable, until every session is in the history index, until raw memory holds every file,
  and until it logs ``caught_up`` (searchable: records, search index and raw memory); its
  peak RSS and the size of the resume logs it keeps (a dropped file's parsed state,
  ``service/resume_store.py``); then an exchange appended to the
  oldest session (one the service no longer holds in memory): how long until it is found in
  the history index and in raw memory, and how many bytes the service parsed for it, against
  the bytes appended (it resumes from its log: about the same);
  then ``STEADY_APPENDS`` more appends to it (steady state), p50 and max;
* ``decode``: reading every line with the standard library's ``json`` and with msgspec.

With ``--profile`` it also runs the service in process under cProfile until caught up and
prints each part's share of the reading thread and of the listener thread, and the CPU seconds
of raw memory's build worker (a process of its own, not profiled: ``memory/build.py``).

Then it prints the figures side by side with how each grew from the small corpus to the large
one, against the growth in bytes. Targets (2-core machine): newest session searchable within
10 s of ``run`` starting, everything within 60 s, ``index`` within 1.0x of pbot's cold load,
peak RSS under 200 MB; the first append after "caught up" searchable within 1 s, parsing
about the appended bytes. Run by hand::

    .venv/bin/python bench/first_run.py                         # 50 MB and 634 MB, temp dirs
    .venv/bin/python bench/first_run.py --out /tmp/first-run    # keep (and reuse) the corpora
    .venv/bin/python bench/first_run.py --sizes 634 --skip run,search
    .venv/bin/python bench/first_run.py --sizes 634 --skip decode,pbot,index,search,run --profile

Figures are printed, never asserted: ``tests/core/test_first_run_bench.py`` only runs it tiny.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

TOTAL_MB = 634.0
SESSIONS = 300
EXCHANGES = 200
POLL_SECONDS = 0.05
RSS_POLL_SECONDS = 0.02
RUN_TIMEOUT_S = 1800.0


@dataclass
class Timed:
    """One child process: wall and CPU seconds (user + system), peak RSS, its output."""

    wall: float
    cpu: float
    rss_mb: float
    out: str
    code: int

    def figures(self) -> dict[str, Any]:
        return {"s": round(self.wall, 2), "cpu s": round(self.cpu, 2), "peak RSS MB": round(self.rss_mb)}


def pbot_watch() -> list[str]:
    exe = shutil.which("pbot-watch", path=str(Path(sys.executable).parent)) or shutil.which("pbot-watch")
    return [exe] if exe else [sys.executable, "-c", "from pbot_watch.cli import main; main()"]


class PeakRss:
    """A child's own peak RSS: its ``VmHWM``, sampled until it ends.

    ``ru_maxrss`` from ``wait4`` cannot be used: Linux starts a child's count at its parent's
    peak (fork copies the parent's memory, exec records the copy's high-water mark), so after
    ``decode`` held a 634 MB corpus every child reported 666 MB. ``VmHWM`` is the exec'd
    program's own address space. Where there is no ``/proc`` (macOS) ``ru_maxrss`` is used.
    """

    def __init__(self, pid: int) -> None:
        self.status = Path(f"/proc/{pid}/status")
        self.peak_kb = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        while not self.done.is_set():
            try:
                text = self.status.read_text()
            except OSError:
                return  # gone (or no /proc): the last sample stands
            for row in text.splitlines():
                if row.startswith("VmHWM:"):
                    self.peak_kb = max(self.peak_kb, int(row.split()[1]))
            self.done.wait(RSS_POLL_SECONDS)

    def mb(self, usage: Any) -> float:
        """The peak in MB, given the ended child's ``wait4`` rusage (the fallback)."""
        self.done.set()
        self.thread.join()
        return (self.peak_kb or usage.ru_maxrss) / 1024


def timed(argv: list[str], env: dict[str, str] | None = None) -> Timed:
    """Run ``argv`` to its end; its own CPU time (``wait4``) and peak RSS (``PeakRss``)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    peak = PeakRss(proc.pid)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    return Timed(wall, usage.ru_utime + usage.ru_stime, peak.mb(usage), out, proc.returncode)


def newest_session(root: Path) -> tuple[str, Path]:
    from pbot_watch.sources import iter_session_files, known_header

    path = max(iter_session_files(root), key=lambda p: p.stat().st_mtime_ns)
    header = known_header(path)
    assert header is not None
    return header.id, path


def clear_records(spaces: list[Path]) -> None:
    for space in spaces:
        shutil.rmtree(space / ".pi", ignore_errors=True)
    os.sync()


def tree_bytes(root: Path, pattern: str) -> int:
    return sum(p.stat().st_size for p in root.rglob(pattern) if p.is_file())


def db_bytes(db: Path) -> int:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*") if p.is_file())


# ---- the phases ------------------------------------------------------------------------------


def corpus(
    out: Path, sessions: int, size_mb: float, exchanges: int, seed: int = 7
) -> tuple[Path, list[Path]]:
    """The corpus under ``out``, generated unless already there."""
    from index_throughput import generate

    root = out / "sessions"
    if root.is_dir():
        return root, sorted((out / "workspaces").iterdir())
    return generate(out, sessions, size_mb, workspaces=8, seed=seed, exchanges=exchanges)


class Pbot:
    """personal-bot 0.2.3's sources beside the cached Pi install, or why they cannot be had."""

    def __init__(self) -> None:
        self.why: str | None = None
        self.src: Path | None = None
        try:
            from tests.core.pbot_oracle import write_sources
            from tests.e2e.pi_install import InstallFailed, Unavailable, ensure_pi
        except ImportError as error:
            self.why = f"cannot import the oracle's set-up: {error}"
            return
        try:
            self.install = ensure_pi(os.environ)
        except (Unavailable, InstallFailed) as error:
            self.why = str(error)
            return
        self.src = write_sources(self.install)

    def load(self, root: Path) -> dict[str, Any]:
        assert self.src is not None
        out = Path(tempfile.mkdtemp(prefix="pbot-records-"))
        try:
            node = [str(self.install.node), "--experimental-transform-types", "--no-warnings"]
            result = timed([*node, str(HERE / "pbot_load.mjs"), str(self.src), str(root), str(out)])
        finally:
            shutil.rmtree(out, ignore_errors=True)
        if result.code != 0:
            raise SystemExit(f"pbot's load failed: {result.out}")
        inside = json.loads(result.out.strip().splitlines()[-1])
        return {
            **result.figures(),
            "records": inside["records"],
            "exchanges": inside["exchanges"],
            "session list p50 ms": round(inside["sessionListMs"], 2),
        }

    def close(self) -> None:
        if self.src is not None:
            shutil.rmtree(self.src, ignore_errors=True)


def index_cold(root: Path, spaces: list[Path]) -> dict[str, Any]:
    clear_records(spaces)
    result = timed([*pbot_watch(), "index", "--sessions", str(root)])
    if result.code != 0:
        raise SystemExit(f"pbot-watch index failed: {result.out}")
    return {**result.figures(), "summary": result.out.strip().splitlines()[-1]}


def search_build(root: Path, spaces: list[Path]) -> dict[str, Any]:
    """The first search after ``index``: it builds the history index from the records."""
    state = Path(tempfile.mkdtemp(prefix="pbot-state-"))
    try:
        env = {**os.environ, "PBOT_WATCH_STATE_DIR": str(state)}
        result = timed([*pbot_watch(), "search", "--sessions", str(root), "--json", "pattern"], env)
        if result.code != 0:
            raise SystemExit(f"pbot-watch search failed: {result.out}")
        size = db_bytes(state / "search.db")
        records = sum(tree_bytes(space / ".pi", "*.json") for space in spaces)
        return {
            **result.figures(),
            "session list p50 ms": session_list_ms(state / "search.db"),
            "index MB": round(size / 1e6, 1),
            "record MB": round(records / 1e6, 1),
            "index / record bytes": round(size / records, 2) if records else None,
        }
    finally:
        shutil.rmtree(state, ignore_errors=True)


def session_list_ms(db: Path, runs: int = 51) -> float:
    """The median time of ``search`` without a query (the session list) on a built index."""
    from pbot_watch.search.index import SearchIndex
    from pbot_watch.search.queries import search_history

    with SearchIndex(db) as index:
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            search_history(index, "")
            times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), 2)


def _count(db: Path, sql: str, *args: Any) -> int:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.2)
    except sqlite3.Error:
        return 0
    try:
        return int(conn.execute(sql, args).fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        conn.close()


APPEND_TIMEOUT_S = 60.0
STEADY_APPENDS = 5


def append_exchange(path: Path, token: str) -> int:
    """A question and its answer appended as Pi appends them (children of the leaf); bytes written."""
    last = path.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    leaf = json.loads(last).get("id")
    now = int(time.time() * 1000)
    lines = []
    for n, (role, text) in enumerate(
        [("user", f"where did {token} go?"), ("assistant", f"{token} is in the appended answer")]
    ):
        entry_id = f"{abs(hash(token)) % 16**8:08x}{n}"
        message: dict[str, Any] = {
            "role": role,
            "content": [{"type": "text", "text": text}],
            "timestamp": now,
        }
        if role == "assistant":
            message |= {"stopReason": "stop", "api": "openai-completions", "provider": "x", "model": "y"}
        entry = {"type": "message", "id": entry_id, "parentId": leaf, "timestamp": "2026-01-01T00:00:00.000Z"}
        lines.append(json.dumps({**entry, "message": message}, separators=(",", ":")))
        leaf = entry_id
    data = ("\n".join(lines) + "\n").encode()
    with path.open("ab") as out:
        out.write(data)
    return len(data)


def searchable(db: Path, token: str) -> bool:
    """Whether ``token`` is found in the history index and in raw memory (both literal indexes)."""
    from pbot_watch.search.literal import literal_match  # neither trigram index keeps positions

    return (
        _count(db, "SELECT count(*) FROM nodes_literal WHERE nodes_literal MATCH ?", literal_match(token)) > 0
        and _count(db, "SELECT count(*) FROM mem_literal WHERE mem_literal MATCH ?", literal_match(token)) > 0
    )


def memory_holds(db: Path, sizes: dict[str, int]) -> bool:
    """Whether raw memory's cursor stands at the end of every session file (``sizes``: path -> bytes)."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.2)
    except sqlite3.Error:
        return False
    try:
        held = dict(conn.execute("SELECT path, offset FROM mem_files").fetchall())
    except sqlite3.Error:
        return False
    finally:
        conn.close()
    return all(held.get(path) == size for path, size in sizes.items())


def parsed_bytes(state: Path) -> int | None:
    """Session bytes the service decoded so far: for its records, and by raw memory on its own."""
    try:
        status = json.loads((state / "status.json").read_text())
    except (OSError, ValueError):
        return None
    memory = (status.get("extensions") or {}).get("memory") or {}
    return int(status.get("bytes_parsed_total", 0)) + int(memory.get("bytes_read_itself", 0))


def status_caught_up(state: Path) -> bool:
    """Whether the service's status file was written after it caught up (its counts are final)."""
    try:
        status = json.loads((state / "status.json").read_text())
    except (OSError, ValueError):
        return False
    return bool((status.get("catch_up") or {}).get("finished"))


def _until(check: Any, timeout: float = APPEND_TIMEOUT_S) -> float | None:
    """Seconds until ``check()`` holds (polled), ``None`` after ``timeout``."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if check():
            return time.perf_counter() - start
        time.sleep(POLL_SECONDS / 5)
    return None


def appends_after_catch_up(root: Path, state: Path, restore: dict[Path, int]) -> dict[str, Any]:
    """The first append after "caught up", to the oldest session (not held in memory), then steady state.

    Times are from the write to the append being found in both indexes; bytes parsed are the
    status's parsed bytes before and after (the records' reads plus raw memory's own). The
    session's size before is put in ``restore``: the caller cuts the appends off again once the
    service stopped, so a kept corpus stays as it was generated.
    """
    db = state / "search.db"
    oldest = min(root.rglob("*.jsonl"), key=lambda p: p.stat().st_mtime_ns)
    restore[oldest] = oldest.stat().st_size
    run_id = f"{os.getpid()}{time.time_ns() % 10**6}"
    # The status file is rewritten every few seconds: one written before the last builds were
    # stored counts them after the append (a 532-byte append once showed 3.3 MB parsed).
    _until(lambda: status_caught_up(state), timeout=15)
    before = parsed_bytes(state)
    appended = append_exchange(oldest, f"zqxfirst{run_id}")
    first = _until(lambda: searchable(db, f"zqxfirst{run_id}"))
    # Status is written every few seconds: wait for the one that counts this append.
    _until(lambda: (parsed_bytes(state) or 0) > (before or 0), timeout=15)
    after = parsed_bytes(state)
    steady: list[float] = []
    for n in range(STEADY_APPENDS):
        time.sleep(0.3)
        token = f"zqxsteady{run_id}x{n}"
        append_exchange(oldest, token)
        took = _until(lambda t=token: searchable(db, t))
        if took is not None:
            steady.append(took)
    return {
        "first append searchable s": round(first, 2) if first is not None else None,
        "first append bytes": appended,
        "first append bytes parsed": (after - before) if before is not None and after is not None else None,
        "first append session MB": round(oldest.stat().st_size / 1e6, 1),
        "steady append searchable p50 s": round(statistics.median(steady), 2) if steady else None,
        "steady append searchable max s": round(max(steady), 2) if steady else None,
    }


def first_run(
    root: Path, spaces: list[Path], sessions: int, *, appends: bool = True, state: Path | None = None
) -> dict[str, Any]:
    """``pbot-watch run`` on an empty state: when the newest, then every session is searchable.

    ``appends``: then time appends (``appends_after_catch_up``). ``state``: an empty folder to
    run in, left as the run left it (the caller measures what it built); by default a
    temporary one, removed.
    """
    clear_records(spaces)
    newest, newest_path = newest_session(root)
    kept = state is not None
    state = state if state is not None else Path(tempfile.mkdtemp(prefix="pbot-state-"))
    db = state / "search.db"
    argv = [*pbot_watch(), "run", "--sessions", str(root), "--state-dir", str(state)]
    # No summaries: the service starts none before it has caught up, and after it they would
    # add their CPU to the figures of the appends (measured with them, the default 30 s: the
    # first append searchable in 0.24 s, steady appends 0.18 s).
    argv += ["--idle-seconds", "3600", "--log-format", "json"]
    caught_up: list[float] = []
    restore: dict[Path, int] = {}
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = PeakRss(proc.pid)

    def follow() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if '"caught_up"' in line and not caught_up:
                caught_up.append(time.perf_counter() - start)

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    newest_at: float | None = None
    newest_memory_at: float | None = None
    all_at: float | None = None
    memory_at: float | None = None
    sizes = {str(path): path.stat().st_size for path in root.rglob("*.jsonl")}
    deadline = start + RUN_TIMEOUT_S
    try:
        while time.perf_counter() < deadline and proc.poll() is None:
            if newest_at is None and _count(db, "SELECT count(*) FROM records WHERE session_id = ?", newest):
                newest_at = time.perf_counter() - start
            if newest_memory_at is None and memory_holds(db, {str(newest_path): sizes[str(newest_path)]}):
                newest_memory_at = time.perf_counter() - start
            if all_at is None and _count(db, "SELECT count(DISTINCT session_id) FROM records") >= sessions:
                all_at = time.perf_counter() - start
            if memory_at is None and memory_holds(db, sizes):
                memory_at = time.perf_counter() - start
            if None not in (newest_at, all_at, memory_at) and caught_up:
                break
            time.sleep(POLL_SECONDS)
        timed = appends and bool(caught_up) and proc.poll() is None
        after = appends_after_catch_up(root, state, restore) if timed else {}
        # The parsed state the service keeps on disk so that a dropped file resumes (service.md).
        resume_mb = round(tree_bytes(state / "resume", "*.steps") / 1e6, 1)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, _, usage = os.wait4(proc.pid, 0)
        for path, size in restore.items():
            os.truncate(path, size)
        proc.returncode = 0
        reader.join(5)
        if not kept:
            shutil.rmtree(state, ignore_errors=True)
    return {
        "newest searchable s": round(newest_at, 2) if newest_at is not None else None,
        "newest in raw memory s": round(newest_memory_at, 2) if newest_memory_at is not None else None,
        "all searchable s": round(all_at, 2) if all_at is not None else None,
        "raw memory all held s": round(memory_at, 2) if memory_at is not None else None,
        "caught up s": round(caught_up[0], 2) if caught_up else None,
        "cpu s": round(usage.ru_utime + usage.ru_stime, 2),
        "peak RSS MB": round(peak.mb(usage)),
        "resume logs MB": resume_mb,
        **after,
    }


# Where the service's build spends its time: (label, file suffix, function name), by cumulative time.
PROFILE_PARTS = (
    ("decoding JSON lines (msgspec)", "", "<method 'decode' of 'msgspec.json.Decoder' objects>"),
    ("history: entries to exchanges", "pbot_watch/history/project.py", "feed"),
    ("records: merged and written", "pbot_watch/indexer.py", "save_session"),
    ("resume logs written", "pbot_watch/service/resume_store.py", "save"),
    ("raw memory: all of it, stored as read", "pbot_watch/memory/index.py", "feed_memory"),
    ("raw memory: the workers' builds taken, appends read on", "pbot_watch/memory/listener.py", "collect"),
    ("raw memory: rows a worker handed back stored", "pbot_watch/memory/index.py", "store_build"),
    ("raw memory: entries to sources", "pbot_watch/memory/extract.py", "feed"),
    ("raw memory: texts tokenised", "pbot_watch/memory/texts.py", "term_rows"),
    ("raw memory: texts stored (dedup, zstd)", "pbot_watch/memory/index.py", "_text"),
    ("raw memory: source digests", "pbot_watch/memory/index.py", "_digests"),
    ("redaction (scrub, everywhere)", "pbot_watch/redact/policy.py", "scrub"),
    ("zstd compression", "", "<method 'compress' of 'zstandard.backend_c.ZstdCompressor' objects>"),
    ("SQLite statements (all)", "", "<method 'execute' of 'sqlite3.Connection' objects>"),
    ("SQLite batches (all)", "", "<method 'executemany' of 'sqlite3.Connection' objects>"),
    ("history index (listener thread)", "pbot_watch/search/listener.py", "__call__"),
    ("summary queue (listener thread)", "pbot_watch/summarize/worker.py", "on_record"),
)


def _profiled(call: Any, profile: cProfile.Profile) -> Any:
    """``call`` run under ``profile`` on whichever thread calls it (cProfile follows one thread)."""

    def run(*args: Any) -> Any:
        profile.enable()
        try:
            return call(*args)
        finally:
            profile.disable()

    return run


def profile_run(root: Path, spaces: list[Path]) -> dict[str, Any]:
    """``run`` from an empty state in this process under cProfile, until caught up: where the time goes.

    The reading thread is profiled whole; the record listeners (the history index, the summary
    queue), which run on their own thread, each call. Seconds are cProfile's (it slows Python
    code down), so read them as shares; "CPU s" is the process's own, profiler included.
    """
    from pbot_watch.cli.run_parts import build_extensions
    from pbot_watch.config import Settings
    from pbot_watch.log import configure_logging
    from pbot_watch.service.hooks import ServiceContext
    from pbot_watch.service.run import Service

    configure_logging(log_format="json", level="warning", stream=sys.stderr)  # the figures on stdout
    clear_records(spaces)
    state = Path(tempfile.mkdtemp(prefix="pbot-state-"))
    try:
        settings = Settings(sessions=[root], state_dir=state, idle_seconds=3600)
        context = ServiceContext(settings)
        extensions = build_extensions(context)
        reader, listeners = cProfile.Profile(), cProfile.Profile()
        extensions.listeners = [_profiled(listener, listeners) for listener in extensions.listeners]
        service = Service(settings, extensions, context)
        started, cpu = time.perf_counter(), time.process_time()
        children = resource.getrusage(resource.RUSAGE_CHILDREN)

        def stop_when_caught_up() -> None:
            while not service.should_exit:
                if service.catch_up is not None and service.catch_up.finished is not None:
                    service.should_exit = True
                time.sleep(POLL_SECONDS)

        threading.Thread(target=stop_when_caught_up, daemon=True).start()
        reader.enable()
        try:
            service.run()
        finally:
            reader.disable()
        worker = resource.getrusage(resource.RUSAGE_CHILDREN)  # the build worker, joined at shutdown
        figures: dict[str, Any] = {
            "caught up s": round(time.perf_counter() - started, 2),
            "cpu s": round(time.process_time() - cpu, 2),
            "build worker cpu s": round(
                worker.ru_utime + worker.ru_stime - children.ru_utime - children.ru_stime, 2
            ),
        }
        for thread, profile in (("reading thread", reader), ("listener thread", listeners)):
            stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
            total = sum(tottime for _calls, _n, tottime, _cum, _callers in stats.values())
            parts = {"profiled s": round(total, 1)}
            for label, suffix, name in PROFILE_PARTS:
                cumulative = sum(
                    cum
                    for (file, _line, function), (_calls, _n, _tot, cum, _callers) in stats.items()
                    if function == name and file.endswith(suffix)
                )
                if cumulative and total:
                    parts[label] = f"{cumulative:.1f} s ({cumulative / total:.0%})"
            figures[thread] = parts
        return figures
    finally:
        shutil.rmtree(state, ignore_errors=True)


def decode(root: Path) -> dict[str, Any]:
    """CPU seconds to decode every line: the standard library, then msgspec (what the reader uses)."""
    import msgspec

    lines = [line for p in sorted(root.rglob("*.jsonl")) for line in p.read_bytes().split(b"\n") if line]
    stdlib = json.JSONDecoder().decode
    fast = msgspec.json.Decoder().decode
    started = time.process_time()
    for line in lines:
        stdlib(line.decode("utf-8"))
    middle = time.process_time()
    for line in lines:
        fast(line)
    end = time.process_time()
    return {
        "lines": len(lines),
        "json cpu s": round(middle - started, 2),
        "msgspec cpu s": round(end - middle, 2),
    }


# ---- one corpus, then the comparison ---------------------------------------------------------


def measure(out: Path, size_mb: float, args: argparse.Namespace, pbot: Pbot | None) -> dict[str, Any]:
    sessions = max(1, round(args.sessions * size_mb / args.total_mb))
    root, spaces = corpus(out, sessions, size_mb, args.exchanges)
    sessions = sum(1 for _ in root.rglob("*.jsonl"))
    figures: dict[str, Any] = {
        "corpus": {"sessions": sessions, "MB": round(tree_bytes(root, "*.jsonl") / 1e6, 1)},
    }
    skip = set(args.skip)
    if "decode" not in skip:
        figures["decode"] = decode(root)
    loads: list[dict[str, Any]] = []
    indexes: list[dict[str, Any]] = []
    for _ in range(args.repeat):  # interleaved: load from other processes hits both alike
        if pbot is not None and pbot.src is not None:
            loads.append(pbot.load(root))
        if "index" not in skip:
            indexes.append(index_cold(root, spaces))
    if loads:
        figures["pbot cold load"] = _median(loads)
        figures["corpus"]["exchanges"] = loads[-1]["exchanges"]
    elif pbot is not None:
        figures["pbot cold load"] = {"skipped": pbot.why}
    if indexes:
        figures["index cold"] = _median(indexes)
        if loads:
            figures["index cold"]["wall ratio to pbot"] = _ratio(indexes, loads, "s")
            figures["index cold"]["cpu ratio to pbot"] = _ratio(indexes, loads, "cpu s")
    if "search" not in skip:
        if not indexes:
            index_cold(root, spaces)
        figures["search build"] = search_build(root, spaces)
    if "run" not in skip:
        figures["run from empty state"] = first_run(root, spaces, sessions)
    if args.profile:
        figures["run profiled in process"] = profile_run(root, spaces)
    return figures


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out = dict(runs[-1])
    for key in ("s", "cpu s", "peak RSS MB"):
        out[key] = round(statistics.median(r[key] for r in runs), 2)
    out["runs"] = len(runs)
    return out


def _ratio(ours: list[dict[str, Any]], theirs: list[dict[str, Any]], key: str) -> float:
    return round(statistics.median(o[key] / t[key] for o, t in zip(ours, theirs, strict=True)), 2)


GROWTH_KEYS = (
    ("pbot cold load", "s"),
    ("index cold", "s"),
    ("index cold", "cpu s"),
    ("index cold", "peak RSS MB"),
    ("search build", "s"),
    ("search build", "index MB"),
    ("run from empty state", "newest searchable s"),
    ("run from empty state", "all searchable s"),
    ("run from empty state", "raw memory all held s"),
    ("run from empty state", "caught up s"),
    ("run from empty state", "peak RSS MB"),
)


def growth(small: dict[str, Any], large: dict[str, Any]) -> dict[str, Any]:
    """How each figure grew from the small corpus to the large one, beside the growth in bytes."""
    out: dict[str, Any] = {"bytes": round(large["corpus"]["MB"] / small["corpus"]["MB"], 1)}
    for phase, key in GROWTH_KEYS:
        a, b = small.get(phase, {}).get(key), large.get(phase, {}).get(key)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a > 0:
            out[f"{phase}: {key}"] = round(b / a, 1)
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    base = args.out or Path(tempfile.mkdtemp(prefix="pbot-first-run-"))
    pbot = Pbot() if "pbot" not in args.skip else None
    try:
        results: dict[str, Any] = {"load": load_average()}
        for size in args.sizes:
            results[f"{size:g} MB"] = measure(base / f"corpus-{size:g}mb", size, args, pbot)
        sizes = sorted(args.sizes)
        if len(sizes) > 1:
            results["growth (large / small)"] = growth(
                results[f"{sizes[0]:g} MB"], results[f"{sizes[-1]:g} MB"]
            )
        results["targets"] = (
            "newest searchable <= 10 s, all searchable <= 60 s, index wall ratio to pbot <= 1.0, "
            "peak RSS < 200 MB, first append after caught up searchable <= 1 s and bytes parsed ~ its bytes"
        )
        results["load after"] = load_average()
        return results
    finally:
        if pbot is not None:
            pbot.close()
        if args.out is None and not args.keep:
            shutil.rmtree(base, ignore_errors=True)


def load_average() -> str:
    """The machine's load beside the figures: on a shared machine it explains wall times."""
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


def sizes_mb(text: str) -> list[float]:
    """``--sizes 50,634``: sizes in MB, comma-separated (the benches that take several)."""
    return [float(v) for v in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes",
        type=sizes_mb,
        default=[50.0, TOTAL_MB],
        help="corpus sizes in MB, comma-separated (default 50,634)",
    )
    parser.add_argument(
        "--total-mb", type=float, default=TOTAL_MB, help="the size that has --sessions sessions"
    )
    parser.add_argument("--sessions", type=int, default=SESSIONS, help="sessions at --total-mb (default 300)")
    parser.add_argument(
        "--exchanges", type=int, default=EXCHANGES, help="exchanges per session (default 200)"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of pbot's load and of index; medians shown"
    )
    parser.add_argument(
        "--skip",
        type=lambda text: [v for v in text.split(",") if v],
        default=[],
        help="phases to leave out: decode,pbot,index,search,run",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also run the service in process under cProfile until caught up: where its time goes",
    )
    parser.add_argument("--out", type=Path, help="keep the corpora here (reused when present)")
    parser.add_argument("--keep", action="store_true", help="keep the temp corpora")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    figures = run(args)
    if args.json:
        print(json.dumps(figures, ensure_ascii=False, indent=2))
        return
    print_figures(figures)


def print_figures(figures: dict[str, Any], indent: str = "") -> None:
    """Figures as indented lines: a group of plain figures on one line, deeper groups below their name."""
    for name, value in figures.items():
        if not isinstance(value, dict):
            print(f"{indent}{name}: {value}")
        elif not indent or any(isinstance(v, dict) for v in value.values()):
            print(f"{indent}{name}")
            print_figures(value, indent + "  ")
        else:
            print(f"{indent}{name}: " + ", ".join(f"{k} {v}" for k, v in value.items()))


if __name__ == "__main__":
    main()
