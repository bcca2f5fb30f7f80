"""How fast and how cheap is ``pbot-watch run``? Run by hand; prints figures, asserts nothing.

    .venv/bin/python bench/watch_latency.py            # full run (about 1 GB of sessions, a few minutes)
    .venv/bin/python bench/watch_latency.py --gb 0.1   # scale the memory phase down
    .venv/bin/python bench/watch_latency.py --smoke    # seconds; what the test suite runs
    .venv/bin/python bench/watch_latency.py --overload # the overload phase alone (about 2 minutes)

Phases, each with its own temporary folders and a fresh service process:

1. latency: N sessions (20) appended concurrently at a steady pace, one question/answer pair
   per session per period; for each answer line, the time from its write to the moment its
   text is in the session's record on disk (the record file is polled every few ms). Also
   the service's CPU share (of one core) and RSS over the phase, from /proc.
2. overload: 20 sessions x 20 lines/s (a pair every 0.1 s each) for 60 s, ten times the pace
   of phase 1: the p95 of append -> record and the service's CPU per 10 s window (flat, and
   p95 under 2 s, is the target), RSS, and whether the final archive equals what a one-shot
   ``pbot-watch index`` of the same files writes.
3. one entry on a big session: a 20 MB session grows while the service runs, then one pair
   is appended; the service's status tells how many bytes that append parsed (it should be
   the pair's size). After a restart nothing is parsed, and the session's first append
   re-reads it once (parsed state is not persisted).
4. idle: nothing changes for a while; the service's CPU share over that time.
5. memory: about ``--gb`` GB of sessions indexed from scratch; RSS (and its peak) once idle.

Targets (issue 3): p95 under 1 s including the debounce, idle CPU under 1%, RSS under 200 MB
after indexing 1 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pbot_watch.archive.files import ArchiveStore  # noqa: E402
from pbot_watch.indexer import Indexer  # noqa: E402
from pbot_watch.service.status import Status  # noqa: E402
from pbot_watch.sources import WholeDigest, open_session  # noqa: E402
from tests.support.archive import records  # noqa: E402
from tests.support.pi_sessions import append, line  # noqa: E402
from tests.support.service import ServiceProcess, one_shot  # noqa: E402

RECORD_NAMESPACE = uuid.UUID("5b0f3c1e-8d2a-4f6b-9c7e-2a1d4e6f8b90")  # as pbot_watch.history.nodes
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


# ---- sessions as Pi writes them ----------------------------------------------------------------
def iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch)) + f".{int(epoch % 1 * 1000):03d}Z"


@dataclass
class Session:
    path: Path
    session_id: str
    leaf: str | None = None
    turns: int = 0

    def header(self, cwd: str) -> bytes:
        now = time.time()
        return line(
            {"type": "session", "version": 3, "id": self.session_id, "timestamp": iso(now), "cwd": cwd}
        )

    def pair(self, question: str, answer: str) -> tuple[bytes, bytes]:
        now = time.time()
        user_id, answer_id = uuid.uuid4().hex[:8], uuid.uuid4().hex[:8]
        user = line(
            {
                "type": "message",
                "id": user_id,
                "parentId": self.leaf,
                "timestamp": iso(now),
                "message": {
                    "role": "user",
                    "content": [{"type": "text", "text": question}],
                    "timestamp": int(now * 1000),
                },
            }
        )
        assistant = line(
            {
                "type": "message",
                "id": answer_id,
                "parentId": user_id,
                "timestamp": iso(now),
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": answer}],
                    "api": "openai-completions",
                    "provider": "bench",
                    "model": "bench-1",
                    "stopReason": "stop",
                    "timestamp": int(now * 1000),
                    "usage": {
                        "input": 10,
                        "output": 5,
                        "cacheRead": 0,
                        "cacheWrite": 0,
                        "totalTokens": 15,
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
                    },
                },
            }
        )
        self.leaf = answer_id
        self.turns += 1
        return user, assistant

    def record(self, archive: Path) -> Path:
        return archive / f"{uuid.uuid5(RECORD_NAMESPACE, self.session_id)}.json"


def filler(rng: random.Random, size: int) -> str:
    words = ["watch", "record", "session", "branch", "会话", "索引", "summary", "cursor", "inode", "append"]
    return " ".join(rng.choice(words) for _ in range(size // 7))


def write_big_session(session: Session, target_bytes: int, rng: random.Random, cwd: str) -> int:
    """A session of about ``target_bytes``, written in one go (as if Pi had run for weeks)."""
    chunks = [session.header(cwd)]
    total = len(chunks[0])
    text = filler(rng, 4000)
    while total < target_bytes:
        user, answer = session.pair(
            f"question {session.turns}: {text[:400]}", f"answer {session.turns}: {text}"
        )
        chunks += [user, answer]
        total += len(user) + len(answer)
        if len(chunks) > 512:
            append(session.path, b"".join(chunks))
            chunks = []
    append(session.path, b"".join(chunks))
    return total


# ---- the service under test -------------------------------------------------------------------------
class Service(ServiceProcess):
    """The service under test, started at once, with what /proc says about its CPU time and memory."""

    def __init__(self, base: Path, sessions: Path, archive: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PBOT_WATCH_")}
        env.update(XDG_STATE_HOME=str(base / "state"), XDG_CONFIG_HOME=str(base / "config"))
        super().__init__(
            [sessions],
            archive,
            "--log-level",
            "warning",
            state_dir=base / "state" / "pbot-watch",
            log=base / "service.log",
            env=env,
        )
        self.start(wait=False)

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime

    def rss_mb(self) -> tuple[float, float]:
        """(VmRSS, VmHWM) in MB."""
        values = {}
        for row in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            key, _, rest = row.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) / 1024
        return values["VmRSS"], values["VmHWM"]


def idle_status(status: Status) -> bool:
    return status.activity == "idle"


# ---- phases ------------------------------------------------------------------------------------------
@dataclass
class Latency:
    samples: list[float] = field(default_factory=list)
    missing: int = 0


def phase_latency(
    base: Path, sessions_count: int, seconds: float, period: float, window: float | None = None
) -> dict[str, Any]:
    """Sessions appended concurrently; ``window``: also p95 and CPU per window of that many seconds."""
    sessions_root, archive = base / "sessions", base / "archive"
    folder = sessions_root / "--bench--"
    folder.mkdir(parents=True)
    sessions = [Session(folder / f"s{i:02d}.jsonl", str(uuid.uuid4())) for i in range(sessions_count)]
    for session in sessions:
        append(session.path, session.header("/bench/workspace"))
    service = Service(base, sessions_root, archive)
    try:
        service.wait_status(idle_status, "the service to start", 30)
        written: dict[str, float] = {}  # answer marker -> write time
        seen: dict[str, float] = {}
        lock = threading.Lock()
        stop = threading.Event()

        def writer(session: Session, rng: random.Random) -> None:
            time.sleep(rng.uniform(0, period))  # spread the sessions over the period
            next_at = time.monotonic()
            while not stop.is_set():
                marker = f"bench-{session.session_id[:8]}-{session.turns}"
                user, answer = session.pair(f"question {session.turns}", f"{marker} {filler(rng, 300)}")
                append(session.path, user)
                time.sleep(min(0.02, period / 4))  # Pi writes the answer after the question
                with lock:
                    written[marker] = time.monotonic()
                append(session.path, answer)
                next_at += period
                stop.wait(max(0.0, next_at - time.monotonic()))

        def watcher() -> None:
            mtimes: dict[Path, int] = {}
            while not stop.is_set() or len(seen) < len(written):
                for session in sessions:
                    record = session.record(archive)
                    try:
                        mtime = record.stat().st_mtime_ns
                    except FileNotFoundError:
                        continue
                    if mtimes.get(record) == mtime:
                        continue
                    mtimes[record] = mtime
                    now = time.monotonic()
                    text = record.read_text(encoding="utf-8")
                    with lock:
                        for marker in [m for m in written if m not in seen and m in text]:
                            seen[marker] = now
                time.sleep(0.003)
                if stop.is_set() and time.monotonic() > stopped_at + 30:
                    return

        stopped_at = float("inf")
        threads = [
            threading.Thread(target=writer, args=(s, random.Random(i)), daemon=True)
            for i, s in enumerate(sessions)
        ]
        poller = threading.Thread(target=watcher, daemon=True)
        cpu0, wall0 = service.cpu_seconds(), time.monotonic()
        poller.start()
        for thread in threads:
            thread.start()
        cpu_windows: list[float] = []
        rss_peak_during = 0.0
        step = window or seconds
        elapsed = 0.0
        while elapsed < seconds - 1e-9:
            length = min(step, seconds - elapsed)
            cpu_start = service.cpu_seconds()
            time.sleep(length)
            cpu_windows.append((service.cpu_seconds() - cpu_start) / length)
            rss_peak_during = max(rss_peak_during, service.rss_mb()[0])
            elapsed += length
        stop.set()
        stopped_at = time.monotonic()
        for thread in threads:
            thread.join()
        poller.join(35)
        cpu = (service.cpu_seconds() - cpu0) / (time.monotonic() - wall0)
        rss, peak = service.rss_mb()
        latencies = sorted(seen[m] - written[m] for m in seen)
        missing = len(written) - len(seen)
        by_window: dict[int, list[float]] = {}
        if window:
            for marker, at in written.items():
                if marker in seen:
                    by_window.setdefault(int((at - wall0) // window), []).append(seen[marker] - at)
        same = None
        if window:
            service.wait_status(idle_status, "the service to catch up", 120)
            same = archive_equals_one_shot(sessions_root, archive, base / "one-shot")
    finally:
        service.stop()
    quantiles = (
        statistics.quantiles(latencies, n=100, method="inclusive") if len(latencies) >= 2 else latencies * 99
    )
    result: dict[str, Any] = {
        "sessions": sessions_count,
        "lines per second per session": round(2 / period, 1),
        "answers written": len(written),
        "answers seen in records": len(latencies),
        "missing": missing,
        "p50 ms": round(quantiles[49] * 1000, 1),
        "p95 ms": round(quantiles[94] * 1000, 1),
        "max ms": round(latencies[-1] * 1000, 1) if latencies else None,
        "cpu % of one core": round(cpu * 100, 1),
        "rss MB": round(rss, 1),
        "rss peak MB": round(peak, 1),
    }
    if window:
        result["p95 ms per window"] = [p95_ms(by_window.get(i, [])) for i in range(len(cpu_windows))]
        result["cpu % per window"] = [round(c * 100, 1) for c in cpu_windows]
        result["rss MB during (max of window ends)"] = round(rss_peak_during, 1)
        result["final archive equals a one-shot index"] = same
    return result


def p95_ms(samples: list[float]) -> float | None:
    if not samples:
        return None
    if len(samples) == 1:
        return round(samples[0] * 1000, 1)
    return round(statistics.quantiles(sorted(samples), n=100, method="inclusive")[94] * 1000, 1)


def archive_equals_one_shot(sessions_root: Path, archive: Path, scratch: Path) -> bool:
    """Whether the live archive holds exactly the records ``pbot-watch index`` writes for the same files."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PBOT_WATCH_")}
    env.update(XDG_STATE_HOME=str(scratch / "state"), XDG_CONFIG_HOME=str(scratch / "config"))
    return records(archive) == one_shot([sessions_root], scratch / "archive", env=env)


def phase_big_session(base: Path, megabytes: float) -> dict[str, Any]:
    sessions_root, archive = base / "sessions", base / "archive"
    folder = sessions_root / "--big--"
    folder.mkdir(parents=True)
    rng = random.Random(1)
    session = Session(folder / "big.jsonl", str(uuid.uuid4()))
    service = Service(base, sessions_root, archive)
    try:
        service.wait_status(idle_status, "the service to start", 30)
        # The session grows while the service runs, as a long Pi session does.
        started = time.monotonic()
        size = write_big_session(session, int(megabytes * 1e6), rng, "/bench/big")
        before = service.wait_status(
            lambda s: idle_status(s) and s.records_written >= 1, "the big session", 600
        )
        index_seconds = time.monotonic() - started
        user, answer = session.pair("one more question", "one more answer " + filler(rng, 300))
        append(session.path, user + answer)
        after = service.wait_status(
            lambda s: s.bytes_parsed_total > before.bytes_parsed_total and idle_status(s),
            "the append to be indexed",
            30,
        )
    finally:
        service.stop()
    # After a restart the parsed state is gone: the session's next append re-reads it once.
    service = Service(base, sessions_root, archive)
    try:
        restarted = service.wait_status(idle_status, "the restarted service", 60)
        user2, answer2 = session.pair("after restart", "answer after restart")
        append(session.path, user2 + answer2)
        again = service.wait_status(lambda s: s.bytes_parsed_total > 0 and idle_status(s), "the append", 60)
        # A same-size edit in the middle (outside the first 4 KB and the last 1 KB) is seen:
        # the whole fingerprint differs, the file is read again.
        edited = time.monotonic()
        edit_in_place(session.path, b"question 7:", b"QUESTION 7:")
        record = session.record(archive)
        end = time.monotonic() + 120
        while "QUESTION 7:" not in record.read_text(encoding="utf-8") and time.monotonic() < end:
            time.sleep(0.05)
        edit_seconds = time.monotonic() - edited
    finally:
        service.stop()
    fingerprint = fingerprint_cost(session.path)
    return {
        "session MB": round(size / 1e6, 1),
        "written and indexed in s": round(index_seconds, 1),
        "appended bytes": len(user) + len(answer),
        "bytes parsed for the append": after.bytes_parsed_last_append,
        "bytes parsed at restart": restarted.bytes_parsed_total,
        "bytes parsed for the first append after restart": again.bytes_parsed_last_append,
        "same-size edit in its record after s": round(edit_seconds, 2),
        **fingerprint,
    }


def edit_in_place(path: Path, old: bytes, new: bytes) -> None:
    """Overwrite the first ``old`` past the first 4 KB with ``new`` (same length), as an editor saving in place."""
    assert len(old) == len(new)
    with path.open("r+b") as handle:
        data = handle.read()
        at = data.index(old, 4096)
        handle.seek(at)
        handle.write(new)


def fingerprint_cost(path: Path) -> dict[str, Any]:
    """What the same-size rule costs, in-process on the big session (median of 5).

    Every read extends a running fingerprint of the bytes it consumed (the first read of a file
    hashes all of it, an append only its own bytes); a file found at its cursor's size with a
    new mtime (a touch, an in-place edit) is hashed whole, once.
    """

    def median(run: Any) -> float:
        times = []
        for _ in range(5):
            started = time.perf_counter()
            run()
            times.append(time.perf_counter() - started)
        return statistics.median(times)

    def whole() -> None:
        fd, st = open_session(path)
        try:
            WholeDigest().extend(fd, st.st_size)
        finally:
            os.close(fd)

    with tempfile.TemporaryDirectory() as scratch:
        first_read = median(lambda: Indexer(ArchiveStore(central=Path(scratch))).read(path))
    return {
        "first read in ms": round(first_read * 1000, 1),
        "whole fingerprint (a touch or same-size edit) in ms": round(median(whole) * 1000, 1),
    }


def phase_idle(base: Path, seconds: float) -> dict[str, Any]:
    sessions_root, archive = base / "sessions", base / "archive"
    folder = sessions_root / "--idle--"
    folder.mkdir(parents=True)
    for i in range(20):
        session = Session(folder / f"s{i}.jsonl", str(uuid.uuid4()))
        append(session.path, session.header("/bench/idle"))
        append(session.path, b"".join(session.pair("question", "answer")))
    service = Service(base, sessions_root, archive)
    try:
        service.wait_status(idle_status, "the service to settle", 30)
        time.sleep(1)
        cpu0, wall0 = service.cpu_seconds(), time.monotonic()
        time.sleep(seconds)
        cpu = (service.cpu_seconds() - cpu0) / (time.monotonic() - wall0)
        rss, _ = service.rss_mb()
    finally:
        service.stop()
    return {"seconds": seconds, "idle cpu % of one core": round(cpu * 100, 2), "rss MB": round(rss, 1)}


def phase_memory(base: Path, gigabytes: float, session_mb: float) -> dict[str, Any]:
    sessions_root, archive = base / "sessions", base / "archive"
    rng = random.Random(2)
    total = 0
    count = 0
    target = int(gigabytes * 1e9)
    while total < target:
        folder = sessions_root / f"--ws{count // 50}--"
        folder.mkdir(parents=True, exist_ok=True)
        session = Session(folder / f"s{count:04d}.jsonl", str(uuid.uuid4()))
        size = min(int(rng.uniform(0.2, 1.8) * session_mb * 1e6), target - total + 1000)
        total += write_big_session(session, size, rng, f"/bench/ws{count // 50}")
        count += 1
    service = Service(base, sessions_root, archive)
    try:
        started = time.monotonic()
        status = service.wait_status(
            lambda s: idle_status(s) and s.files_tracked >= count, "the sessions to be indexed", 3600
        )
        seconds = time.monotonic() - started
        rss, peak = service.rss_mb()
    finally:
        service.stop()
    return {
        "sessions": count,
        "GB": round(total / 1e9, 3),
        "index s": round(seconds, 1),
        "MB/s": round(total / 1e6 / max(seconds, 1e-9), 1),
        "records written": status.records_written,
        "files in memory": status.files_in_memory,
        "rss MB": round(rss, 1),
        "rss peak MB": round(peak, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=20, help="sessions appended concurrently")
    parser.add_argument("--seconds", type=float, default=30, help="length of the latency phase")
    parser.add_argument("--period", type=float, default=1.0, help="seconds between two pairs of one session")
    parser.add_argument("--big-mb", type=float, default=20, help="size of the big session")
    parser.add_argument("--idle-seconds", type=float, default=20, help="length of the idle phase")
    parser.add_argument("--gb", type=float, default=1.0, help="gigabytes of sessions for the memory phase")
    parser.add_argument(
        "--session-mb", type=float, default=5, help="average session size in the memory phase"
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: a check that the bench runs")
    parser.add_argument(
        "--overload",
        action="store_true",
        help="the overload mode only: 20 sessions x 20 lines/s for 60 s, p95 and CPU per 10 s window",
    )
    parser.add_argument("--window", type=float, default=10, help="window of the overload figures, in seconds")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--only",
        choices=["latency", "overload", "big-session", "idle", "memory"],
        action="append",
        help="run only these phases",
    )
    args = parser.parse_args()
    overload_seconds, overload_window = 60.0, args.window
    if args.smoke:
        args.sessions, args.seconds, args.period, args.big_mb = 3, 2, 0.5, 1
        args.idle_seconds, args.gb, args.session_mb = 1, 0.003, 0.5
        overload_seconds, overload_window = 2.0, 1.0
    if args.overload:
        args.only = ["overload"]
    results: dict[str, Any] = {}
    base = Path(tempfile.mkdtemp(prefix="pbot-watch-bench-"))
    try:
        for name, run in (
            ("latency", lambda d: phase_latency(d, args.sessions, args.seconds, args.period)),
            (
                "overload",
                lambda d: phase_latency(d, 20, overload_seconds, 0.1, window=overload_window),
            ),
            ("big session", lambda d: phase_big_session(d, args.big_mb)),
            ("idle", lambda d: phase_idle(d, args.idle_seconds)),
            ("memory", lambda d: phase_memory(d, args.gb, args.session_mb)),
        ):
            folder = base / name.replace(" ", "-")
            if args.only and folder.name not in args.only:
                continue
            folder.mkdir()
            results[name] = run(folder)
            if not args.json:
                print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in results[name].items()), flush=True)
            shutil.rmtree(folder, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
