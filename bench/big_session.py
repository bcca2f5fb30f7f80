"""One person's marathon Pi session, hundreds of MB, kept live: what each part pays per append.

Generates, per ``--size-mb`` (default 200 and 300), one session written as Pi writes a long
one (``bench/index_throughput.py``'s generator: system prompt, thinking, thousands of tool calls
with Pi-sized output, steering, ``/tree`` branches with summaries, labels, compactions), plus a
small second session, then runs each part of ``--parts`` on it:

* ``service``: ``pbot-watch run`` on both sessions. Turns appended to the big session as Pi
  appends them (user, tool call, tool output, answer), each one timed from its last write to
  its answer being in the session's record on disk and then in the search index (append ->
  record, append -> searchable): p50/p95 with the big session alone, then
  alternating with appends to the small one (two sessions active, the big one over the
  service's parsed-state budget), then the first append after a restart (a session the
  service does not hold in memory). For each, the bytes the service parsed per append (its
  status: records' reads plus raw memory's own) against the bytes appended, and the service's
  CPU seconds per append (its record listeners included: a figure the machine's load does not
  inflate the way it does wall times); the service's peak RSS (``VmHWM``) over everything.
* ``child``: ``pbot-watch pi serve`` (the Pi extension's child) on the big session, asked as the
  extension asks: the ``session`` announcement and ``cues`` at session start, then a pinned
  ``search_memory`` (which answers from the raw memory built so far, and says whether the
  session is all searched), in a child that has no saved cue ledger; then how long the child
  took to build the session's raw memory ahead (until a pinned search says it is all searched),
  and a warm search; then in a new child (Pi restarted) that finds the ledger the first one
  saved while idle; then after a turn and a compaction appended. All that where no service
  runs; then where the service read the session (``pbot-watch run`` started on the big session
  until caught up): a new child's cues
  from the ledger the service saved, and its first pinned search on the raw memory the
  service built; the ledgers' bytes on disk. The child's peak RSS over all of them.

Targets (issue 21, 2-core machine): appends p95 < 1 s, parsing about the appended bytes,
cues <= 2 s, first pinned search <= 5 s, RSS < 300 MB. Run by hand::

    .venv/bin/python bench/big_session.py                       # 200 and 300 MB, temp dirs
    .venv/bin/python bench/big_session.py --size-mb 200 --out /tmp/big   # keep (reuse) the sessions
    .venv/bin/python bench/big_session.py --size-mb 1 --appends 3 --json  # what the smoke test runs
    .venv/bin/python bench/big_session.py --size-mb 300 --parts service,child

Figures are printed, never asserted: ``tests/service/test_bench_big_session.py`` runs it tiny.
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
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

from first_run import _count, load_average, parsed_bytes, print_figures, sizes_mb  # noqa: E402
from index_throughput import Corpus, generate  # noqa: E402

from pbot_watch.history.nodes import new_record_id  # noqa: E402
from pbot_watch.memory.cue_follow import SAVED_FROM  # noqa: E402
from pbot_watch.search.literal import literal_match  # noqa: E402
from pbot_watch.service.status import read_status  # noqa: E402
from pbot_watch.sources import known_header  # noqa: E402
from tests.pi_bridge.child import ServeChild  # noqa: E402
from tests.support.service import ServiceProcess, wait_for  # noqa: E402

SIZES_MB = (200.0, 300.0)
SMALL_MB = 2.0
APPENDS = 20
PAUSE_S = 0.3
"""Between two appends: Pi's turns are seconds apart, and the service's debounce passes."""
RECORD_TIMEOUT_S = 120.0
POLL_S = 0.003
TOOL_LINES = 40
"""Mean lines of tool output in an appended turn (about 2 KB): a turn as Pi appends it."""


# ---- sessions --------------------------------------------------------------------------------------
@dataclass
class BenchSession:
    """One generated session file: where it is, whose it is, where its record will be."""

    path: Path
    session_id: str
    cwd: str

    @classmethod
    def make(cls, out: Path, size_mb: float, seed: int) -> BenchSession:
        """The session under ``out``, generated unless already there (``--out`` keeps it)."""
        root = out / "sessions"
        if not root.is_dir():
            generate(out, 1, size_mb, workspaces=1, seed=seed, spread=0.0)
        (path,) = sorted(root.rglob("*.jsonl"))
        header = known_header(path)
        assert header is not None
        assert header.workspace is not None
        return cls(path, header.id, header.workspace)

    def record(self, archive: Path) -> Path:
        return archive / f"{new_record_id(self.session_id)}.json"

    def shape(self) -> dict[str, Any]:
        counts = {"entries": 0, "tool calls": 0, "compactions": 0}
        with self.path.open("rb") as lines:
            for line in lines:
                counts["entries"] += 1
                counts["tool calls"] += line.count(b'"role":"toolResult"')
                counts["compactions"] += line.startswith(b'{"type":"compaction"')
        return {"MB": round(self.path.stat().st_size / 1e6, 1), **counts}


def append_turn(session: BenchSession, token: str, rng: random.Random) -> int:
    """A turn appended as Pi appends one, each entry its own write, a child of the leaf; its bytes.

    The question and the answer carry ``token``, the answer last: once the record holds it, the
    whole turn is in.
    """
    with session.path.open("rb") as handle:
        handle.seek(max(0, session.path.stat().st_size - (1 << 20)))
        last = handle.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    turn = Corpus(rng, session.session_id, session.cwd, int(time.time() * 1000))
    turn.lines.clear()
    turn.leaf = json.loads(last).get("id")
    turn.tool_lines = TOOL_LINES
    turn.user(
        f"where did {token} go? " + " ".join(rng.choice(("look", "in", "the", "logs")) for _ in range(20))
    )
    turn.assistant("let me look", tool=True)
    turn.tool_result()
    turn.assistant(
        f"{token} is in the answer: " + " ".join(rng.choice(("it", "was", "found")) for _ in range(80))
    )
    written = 0
    with session.path.open("ab") as out:
        for line in turn.lines:
            data = line.encode() + b"\n"
            out.write(data)
            out.flush()
            written += len(data)
    return written


def until_in_record(record: Path, token: bytes, timeout: float = RECORD_TIMEOUT_S) -> float | None:
    """Seconds until ``record`` holds ``token`` (read only when its stamp changes), ``None`` after ``timeout``."""
    start = time.perf_counter()
    seen: tuple[int, int] | None = None
    while time.perf_counter() - start < timeout:
        try:
            st = record.stat()
        except FileNotFoundError:
            st = None
        if st is not None and (st.st_mtime_ns, st.st_size) != seen:
            seen = (st.st_mtime_ns, st.st_size)
            try:
                if token in record.read_bytes():
                    return time.perf_counter() - start
            except FileNotFoundError:
                pass
        time.sleep(POLL_S)
    return None


def until_searchable(db: Path, token: str, timeout: float = RECORD_TIMEOUT_S) -> float | None:
    """Seconds until the history index finds ``token`` (its literal table), ``None`` after ``timeout``."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if _count(db, "SELECT count(*) FROM nodes_literal WHERE nodes_literal MATCH ?", literal_match(token)):
            return time.perf_counter() - start
        time.sleep(POLL_S)
    return None


def percentiles(samples: list[float], unit: str = "s") -> dict[str, float | None]:
    names = [f"p50 {unit}", f"p95 {unit}", f"max {unit}"]
    if not samples:
        return dict.fromkeys(names)
    p95 = statistics.quantiles(samples, n=100, method="inclusive")[94] if len(samples) > 1 else samples[0]
    return dict(
        zip(names, (round(v, 3) for v in (statistics.median(samples), p95, max(samples))), strict=True)
    )


# ---- the service part ------------------------------------------------------------------------------
class Service(ServiceProcess):
    """``pbot-watch run`` on the bench's sessions, records in one archive folder, state of its own."""

    def __init__(self, base: Path, roots: list[Path]) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PBOT_WATCH_")}
        env.update(XDG_STATE_HOME=str(base / "state"), XDG_CONFIG_HOME=str(base / "config"))
        super().__init__(
            roots,
            base / "archive",
            *("--log-level", "warning", "--idle-seconds", "3600"),
            state_dir=base / "state" / "pbot-watch",
            log=base / "service.log",
            env=env,
        )

    def cpu_seconds(self) -> float:
        """The service's own CPU time so far (user + system): what an append costs it, whatever the load."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def peak_rss_mb(self) -> float:
        return self.peak_rss_of(self.pid)

    @staticmethod
    def peak_rss_of(pid: int) -> float:
        """A process's peak resident memory (``VmHWM``) in MB."""
        for row in Path(f"/proc/{pid}/status").read_text().splitlines():
            if row.startswith("VmHWM:"):
                return int(row.split()[1]) / 1024
        return 0.0

    def caught_up(self, timeout: float) -> None:
        self.wait_status(
            lambda s: s.activity == "idle" and s.catch_up is not None and s.catch_up.finished is not None,
            "the service to catch up",
            timeout,
        )

    def parsed(self, before: int | None) -> int | None:
        """Bytes parsed since ``before``, once the status counts them (``None``: it never did)."""
        if before is None:
            return None
        after = wait_for(
            lambda: n if (n := parsed_bytes(self.state_dir)) is not None and n > before else None,
            timeout=15,
            what="the status to count the append",
            details=self.log_tail,
        )
        return int(after) - before


@dataclass
class Appends:
    """What a run of appends measured: seconds to the record, bytes appended and parsed."""

    seconds: list[float]
    appended: list[int]
    parsed: list[int]
    searchable: list[float] = field(default_factory=list)
    """Seconds from the append to the history index finding it."""
    missing: int = 0
    cpu: float = 0.0
    """The service's CPU seconds over the whole run of appends (the second session's included)."""

    def figures(self) -> dict[str, Any]:
        return {
            "appends": len(self.appended),
            **percentiles(self.seconds),
            **percentiles(self.searchable, "s searchable"),
            "missing": self.missing,
            "service CPU s per append": round(self.cpu / len(self.appended), 3) if self.appended else None,
            "appended bytes per append": round(statistics.median(self.appended)) if self.appended else None,
            "parsed bytes per append p50": round(statistics.median(self.parsed)) if self.parsed else None,
            "parsed bytes per append max": max(self.parsed) if self.parsed else None,
        }


def timed_appends(
    service: Service,
    big: BenchSession,
    archive: Path,
    count: int,
    rng: random.Random,
    before_each: Callable[[int], None] | None = None,
) -> Appends:
    """``count`` turns appended to ``big``, each timed to its record and counted in parsed bytes."""
    out = Appends([], [], [])
    cpu = service.cpu_seconds()
    for n in range(count):
        if before_each is not None:
            before_each(n)
        time.sleep(PAUSE_S)
        token = f"zqxbig{os.getpid()}n{n}r{rng.getrandbits(24)}"
        before = parsed_bytes(service.state_dir)
        out.appended.append(append_turn(big, token, rng))
        took = until_in_record(big.record(archive), token.encode())
        if took is None:
            out.missing += 1
            continue
        out.seconds.append(took)
        found = until_searchable(service.state_dir / "search.db", token)
        if found is not None:
            out.searchable.append(took + found)
        parsed = service.parsed(before)
        if parsed is not None:
            out.parsed.append(parsed)
    out.cpu = service.cpu_seconds() - cpu
    return out


def part_service(
    base: Path, big: BenchSession, small: BenchSession, args: argparse.Namespace
) -> dict[str, Any]:
    """Appends to the big session alone, beside a second active session, and after a restart."""
    run = base / "service"
    shutil.rmtree(run, ignore_errors=True)
    archive = run / "archive"
    rng = random.Random(11)
    roots = [big.path.parent.parent, small.path.parent.parent]
    restore = {p: p.stat().st_size for p in (big.path, small.path)}
    figures: dict[str, Any] = {}
    peak = 0.0
    try:
        service = Service(run, roots).start(wait=False)
        try:
            started = time.perf_counter()
            service.caught_up(args.index_timeout)
            figures["caught up s"] = round(time.perf_counter() - started, 1)
            figures["record MB"] = round(big.record(archive).stat().st_size / 1e6, 1)
            figures["alone"] = timed_appends(service, big, archive, args.appends, rng).figures()

            def small_turn(n: int) -> None:
                token = f"zqxsmall{os.getpid()}n{n}r{rng.getrandbits(24)}"
                append_turn(small, token, rng)
                until_in_record(small.record(archive), token.encode())

            both = timed_appends(service, big, archive, args.appends, rng, small_turn)
            figures["with a second active session"] = both.figures()
            peak = max(peak, service.peak_rss_mb())
        finally:
            service.stop()
        # Restarted: the big session is on disk only; its first append is what item 4 is about.
        service = Service(run, roots).start(wait=False)
        try:
            service.caught_up(args.index_timeout)
            first = timed_appends(service, big, archive, 1, rng)
            figures["first append after a restart"] = first.figures()
            peak = max(peak, service.peak_rss_mb())
        finally:
            service.stop()
    finally:
        for path, size in restore.items():
            os.truncate(path, size)  # a kept session stays as it was generated
    figures["peak RSS MB"] = round(peak)
    return figures


# ---- the child part --------------------------------------------------------------------------------
LEDGER_TIMEOUT_S = 120.0
"""How long an idle child may take to save the big session's cue ledger."""
AHEAD_POLL_S = 5.0
"""Between two pinned searches while the child builds the session's raw memory ahead."""


class Child(ServeChild):
    """``pbot-watch pi serve`` as the Pi extension starts it, on the state folder it is given."""

    def __init__(self, state_home: Path, roots: list[Path]) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PBOT_WATCH_")}
        env.update(XDG_STATE_HOME=str(state_home), XDG_CONFIG_HOME=str(state_home.parent / "config"))
        super().__init__(*(arg for root in roots for arg in ("--sessions", str(root))), env=env)
        assert self.ask("hello")["result"]["pid"] == self.proc.pid

    def not_searched(self, search: dict[str, Any], timeout: float) -> tuple[float, int]:
        """A pinned search's time and its ``sessionsNotSearched`` (1 while the child still builds)."""
        took, reply = self.timed("tool", search, timeout)
        assert "result" in reply, reply
        return took, int(reply["result"]["structured"].get("sessionsNotSearched", 0))

    def timed(self, method: str, params: dict[str, Any], timeout: float) -> tuple[float, dict[str, Any]]:
        started = time.perf_counter()
        request_id = self.send(method, params)
        reply = self.reply(timeout=timeout)
        assert reply["id"] == request_id, reply
        return round(time.perf_counter() - started, 3), reply

    def peak_rss_mb(self) -> float:
        return Service.peak_rss_of(self.proc.pid)


def append_compaction(session: BenchSession) -> None:
    """A compaction as Pi appends one after a turn: everything before the last turn leaves the context."""
    with session.path.open("rb") as handle:
        handle.seek(max(0, session.path.stat().st_size - (1 << 20)))
        leaf = json.loads(handle.read().rstrip(b"\n").rsplit(b"\n", 1)[-1])["id"]
    entry = {
        "type": "compaction",
        "id": f"{random.getrandbits(32):08x}",
        "parentId": leaf,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
        "summary": "## Goal\nKeep the marathon session live.",
        "firstKeptEntryId": leaf,
        "tokensBefore": 150_000,
    }
    with session.path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(entry) + "\n")


def part_child(
    base: Path, big: BenchSession, _small: BenchSession, args: argparse.Namespace
) -> dict[str, Any]:
    """Cues and pinned ``search_memory`` of the big session through ``pbot-watch pi serve``, never seen before.

    First where no service runs (a state of its own): a child with no saved cue ledger reads the
    file itself and builds raw memory ahead; then a second child (Pi restarted) finds the ledger
    the first saved, and a turn and a compaction are appended and asked again. Then where the
    service read the session (``pbot-watch run`` started here until caught up): a new child finds
    the ledger the service saved and the raw memory it built. The child's peak RSS over all of them.
    """
    roots = [big.path.parent.parent]
    cues = {"sessionFile": str(big.path), "leaf": None, "contextWindow": 200_000}
    search = {
        "name": "search_memory",
        "arguments": {"query": "npm test"},
        "scope": {"sessionFile": str(big.path), "sessionId": big.session_id},
    }
    size = big.path.stat().st_size
    figures: dict[str, Any] = {}
    peak = 0.0
    try:
        home = base / "child" / "state"
        shutil.rmtree(home, ignore_errors=True)
        ledgers = home / "pbot-watch" / "cue-ledgers"
        figures["raw memory built by"] = "the child"
        child = Child(home, roots)
        try:
            announced = time.perf_counter()
            child.timed("session", {"sessionFile": str(big.path), "sessionId": big.session_id}, 10)
            figures["cues s, no saved ledger"], reply = child.timed("cues", cues, args.index_timeout)
            figures["cue block lines"] = len((reply.get("result", {}).get("block") or "").splitlines())
            took, left = child.not_searched(search, args.index_timeout)
            figures["first pinned search s"], figures["first search: sessions not searched"] = took, left
            while left and time.perf_counter() - announced < args.index_timeout:
                time.sleep(AHEAD_POLL_S)
                _, left = child.not_searched(search, args.index_timeout)
            figures["raw memory built ahead after s"] = round(time.perf_counter() - announced, 1)
            figures["warm pinned search s"], _ = child.timed("tool", search, args.index_timeout)
            if size >= SAVED_FROM:  # smaller ledgers are not saved: such a file is read in well under 1 s
                started = time.perf_counter()
                wait_for(
                    lambda: any(ledgers.glob("*.cues")) or None,
                    timeout=LEDGER_TIMEOUT_S,
                    what="the idle child to save the cue ledger",
                )
                figures["ledger saved after s"] = round(time.perf_counter() - started, 1)
                figures["ledger MB"] = round(sum(p.stat().st_size for p in ledgers.glob("*.cues")) / 1e6, 2)
            peak = max(peak, child.peak_rss_mb())
        finally:
            child.close()
        child = Child(home, roots)  # Pi restarted on the marathon session
        try:
            figures["cues s, new child with the saved ledger"], _ = child.timed(
                "cues", cues, args.index_timeout
            )
            append_turn(big, f"zqxchild{os.getpid()}", random.Random(3))
            append_compaction(big)
            figures["cues s after a turn and a compaction"], _ = child.timed("cues", cues, args.index_timeout)
            figures["pinned search s after the append"], _ = child.timed("tool", search, args.index_timeout)
            peak = max(peak, child.peak_rss_mb())
        finally:
            child.close()
        os.truncate(big.path, size)
        prepared, peak_prepared = service_prepared(base, big, roots, cues, search, args)
        figures["where the service read it"] = prepared
        peak = max(peak, peak_prepared)
    finally:
        os.truncate(big.path, size)
    figures["peak RSS MB"] = round(peak)
    return figures


def service_prepared(
    base: Path,
    big: BenchSession,
    roots: list[Path],
    cues: dict[str, Any],
    search: dict[str, Any],
    args: argparse.Namespace,
) -> tuple[dict[str, Any], float]:
    """A new child's first cues and pinned search of the big session the service read; its peak RSS.

    On a service run here on the big session alone until caught up, then stopped (the child
    needs no running service: what it loads is on disk). Never on the service part's state: that
    part cuts the session back to its generated size after its appends, which a reader of its
    state rightly takes for a rewrite, and reads again whole.
    """
    figures: dict[str, Any] = {}
    run = base / "child-service"
    shutil.rmtree(run, ignore_errors=True)
    service_home = run / "state"
    service = Service(run, roots).start(wait=False)
    try:
        started = time.perf_counter()
        service.caught_up(args.index_timeout)
        figures["service caught up after s"] = round(time.perf_counter() - started, 1)
        figures["service peak RSS MB"] = round(service.peak_rss_mb())
        status = read_status(service.state_dir)
        figures["service: cue ledgers"] = status.extensions.get("cue_ledgers") if status else None
    finally:
        service.stop()
    ledgers = service_home / "pbot-watch" / "cue-ledgers"
    saved = list(ledgers.glob("*.cues"))
    figures["ledger MB on disk"] = round(sum(p.stat().st_size for p in saved) / 1e6, 2)
    child = Child(service_home, roots)
    try:
        child.timed("session", {"sessionFile": str(big.path), "sessionId": big.session_id}, 10)
        figures["cues s"], _ = child.timed("cues", cues, args.index_timeout)
        took, left = child.not_searched(search, args.index_timeout)
        figures["first pinned search s"], figures["first search: sessions not searched"] = took, left
        figures["warm pinned search s"], _ = child.timed("tool", search, args.index_timeout)
        return figures, child.peak_rss_mb()
    finally:
        child.close()


# ---- the parts, and one size ---------------------------------------------------------------------
PARTS: dict[str, Callable[[Path, BenchSession, BenchSession, argparse.Namespace], dict[str, Any]]] = {
    "service": part_service,
    "child": part_child,
}


def measure(base: Path, size_mb: float, args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    big = BenchSession.make(base / f"big-{size_mb:g}mb", size_mb, seed=5)
    small = BenchSession.make(base / "small", SMALL_MB, seed=6)
    figures: dict[str, Any] = {
        "session": {**big.shape(), "generated or found in s": round(time.perf_counter() - started, 1)},
        "second session MB": small.shape()["MB"],
    }
    for part in args.parts:
        figures[part] = {"load": load_average(), **PARTS[part](base, big, small, args)}
    return figures


def run(args: argparse.Namespace) -> dict[str, Any]:
    base = args.out or Path(tempfile.mkdtemp(prefix="pbot-big-session-"))
    try:
        results: dict[str, Any] = {"load": load_average()}
        for size in args.size_mb:
            results[f"{size:g} MB"] = measure(base, size, args)
        results["targets"] = (
            "appends p95 < 1 s, parsed bytes ~ the appended bytes, cues <= 2 s, first pinned search <= 5 s, "
            "RSS < 300 MB"
        )
        results["load after"] = load_average()
        return results
    finally:
        if args.out is None:
            shutil.rmtree(base, ignore_errors=True)


def parts(text: str) -> list[str]:
    chosen = [p for p in text.split(",") if p]
    unknown = [p for p in chosen if p not in PARTS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown part(s) {', '.join(unknown)}; known: {', '.join(PARTS)}")
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--size-mb",
        type=sizes_mb,
        default=list(SIZES_MB),
        help="sizes of the big session in MB, comma-separated (default 200,300)",
    )
    parser.add_argument(
        "--parts",
        type=parts,
        default=list(PARTS),
        help=f"parts to run, comma-separated (default {','.join(PARTS)})",
    )
    parser.add_argument(
        "--appends", type=int, default=APPENDS, help=f"timed appends per phase (default {APPENDS})"
    )
    parser.add_argument(
        "--index-timeout", type=float, default=900.0, help="seconds allowed for the first index of a session"
    )
    parser.add_argument("--out", type=Path, help="keep the generated sessions here (reused when present)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    figures = run(args)
    if args.json:
        print(json.dumps(figures, ensure_ascii=False, indent=2))
        return
    print_figures(figures)


if __name__ == "__main__":
    main()
