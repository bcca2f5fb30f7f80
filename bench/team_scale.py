"""The team index at scale: many machines pushing into one PostgreSQL on this machine.

Generates an archive per simulated machine (sessions of exchanges in English and Chinese with
Zipf-distributed words, as ``search_latency.py`` does, with ready summaries), then measures:

1. **push throughput**: every machine's ``pbot-watch team push`` (a real subprocess with its own
   state and config), ``--parallel`` at a time, into an empty team index;
2. **searchable after written**: a new record written into a machine's archive, handed to the
   service's own pusher (``TeamListener``, as the service does after each write), until a team
   search finds it; repeated ``--samples`` times;
3. **team search p50/p95** for the query classes of ``search_latency.py``, after each class's
   first search (also printed: the one that tallies a common query, ``tallies.py``), and for
   common queries narrowed to one session, one workspace name or one week (no tally: a
   filtered search counts its own hits);
4. **chaos**: every machine's archive changes (new records, rewritten summaries) and is pushed
   again while pushers are killed at random (``--kills`` SIGKILLs) and the server is restarted
   (``--restarts``); then one last push per machine, and a check that the index holds exactly
   the records and nodes of the archives (none lost, none twice), and that every tally the
   searches made still equals a plain count of its query;
5. **raw memory** (``team.raw_memory``, ``--memory-*``): session files of tool work on a few
   machines, each machine's raw memory built and pushed (sources/s), a source appended to a
   session found by a team memory search through the service's pusher, and team memory search
   p50/p95 per query class.

The server is started here (``tests/support/postgres.py``: initdb in a temporary folder, as the
``postgres`` user when run as root) unless ``--dsn`` names one. Run by hand:

    .venv/bin/python bench/team_scale.py                      # 50 machines x 20,000 exchanges
    .venv/bin/python bench/team_scale.py --machines 4 --exchanges 500 --kills 4 --restarts 1
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import psycopg  # noqa: E402
from search_latency import COMMON_EN, COMMON_ZH, RARE_EN, RARE_ZH, generated_record, sentence  # noqa: E402

from pbot_watch.config import Settings  # noqa: E402
from pbot_watch.history.jstext import dumps  # noqa: E402
from pbot_watch.memory.index import refresh_memory, sync_memory_file  # noqa: E402
from pbot_watch.search.index import SearchIndex  # noqa: E402
from pbot_watch.team.gate import secret_gate  # noqa: E402
from pbot_watch.team.listener import TeamListener  # noqa: E402
from pbot_watch.team.memory_search import team_memory_search  # noqa: E402
from pbot_watch.team.push import TeamPusher, connect_team  # noqa: E402
from pbot_watch.team.schema import migrate  # noqa: E402
from pbot_watch.team.search import team_search  # noqa: E402
from tests.support.pi_sessions import PiSession  # noqa: E402
from tests.support.postgres import PostgresServer  # noqa: E402

EXCHANGES_PER_SESSION = 100
QUERIES = [
    ("literal", "en common", COMMON_EN),
    ("literal", "en rare", RARE_EN),
    ("literal", "zh common", COMMON_ZH),
    ("literal", "zh rare", RARE_ZH),
    ("literal", "zh 1 char", "鲸"),
    ("terms", "en common", COMMON_EN),
    ("terms", "en rare", RARE_EN),
    ("terms", "en 3 words", "cache index error"),
    ("terms", "en 3 common", "use file test"),
    ("terms", "en question", "when did we fix the build error last May"),
    ("terms", "stop words", "what was it"),
    ("terms", "zh common", COMMON_ZH),
    ("terms", "zh rare", RARE_ZH),
]


def load_average() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def record_for(
    machine: int, session: int, exchanges: int, rng: random.Random, round_: int = 0
) -> dict[str, Any]:
    record = generated_record(
        f"m{machine}-s{session}",
        f"Session {machine}/{session}",
        session,
        exchanges,
        rng,
        f" (round {round_})" if round_ else "",
    )
    nodes = record.pop("nodes")
    record.update(
        machine=f"machine-{machine:02d}",
        user=f"user{machine:02d}",
        workspace=f"/home/user{machine:02d}/proj-{machine % 5}",
    )
    record["nodes"] = nodes
    return record


def write(folder: Path, record: dict[str, Any]) -> None:
    path = folder / f"{record['id']}.json"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(dumps(record) + "\n", encoding="utf-8")
    tmp.replace(path)


def generate(base: Path, machines: int, exchanges: int) -> list[Path]:
    folders = []
    for m in range(machines):
        folder = base / f"machine-{m:02d}" / "archive"
        folder.mkdir(parents=True, exist_ok=True)
        rng = random.Random(m)
        sessions = max(1, exchanges // EXCHANGES_PER_SESSION)
        for s in range(sessions):
            count = (
                exchanges - EXCHANGES_PER_SESSION * (sessions - 1)
                if s == sessions - 1
                else EXCHANGES_PER_SESSION
            )
            write(folder, record_for(m, s, count, rng))
        folders.append(folder)
    return folders


def machine_env(folder: Path, dsn: str) -> dict[str, str]:
    home = folder.parent / "home"
    for sub in ("state", "config"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    config = home / "config" / "pbot-watch" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        f'archive = "{folder}"\nsessions = ["{home / "sessions"}"]\nmachine = "{folder.parent.name}"\n'
        '[team]\nenabled = true\nworkspaces = ["*"]\nbatch_records = 50\n',
        encoding="utf-8",
    )
    return {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", ""),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "PI_CODING_AGENT_DIR": str(home / ".pi"),
        "PBOT_WATCH_TEAM_DSN": dsn,
        "PYTHONPATH": str(REPO),
    }


def push_command() -> list[str]:
    return [sys.executable, "-m", "pbot_watch", "team", "push"]


def push_all(envs: list[dict[str, str]], parallel: int) -> float:
    """Every machine's push, ``parallel`` at a time; wall seconds."""
    started = time.perf_counter()
    waiting = list(range(len(envs)))
    running: dict[int, subprocess.Popen[bytes]] = {}
    while waiting or running:
        while waiting and len(running) < parallel:
            m = waiting.pop(0)
            running[m] = subprocess.Popen(push_command(), env=envs[m], stdout=subprocess.DEVNULL)
        for m, child in list(running.items()):
            if child.poll() is not None:
                if child.returncode != 0:
                    raise SystemExit(f"push of machine {m} failed with {child.returncode}")
                del running[m]
        time.sleep(0.05)
    return time.perf_counter() - started


def chaos(
    envs: list[dict[str, str]],
    server: PostgresServer | None,
    parallel: int,
    kills: int,
    restarts: int,
    rng: random.Random,
) -> tuple[int, int]:
    """Pushes with random SIGKILLs and server restarts until both budgets are spent."""
    killed = restarted = 0
    kill_every = 0.5
    restart_at = {int(kills * (i + 1) / (restarts + 1)) for i in range(restarts)} if server else set()
    running: dict[int, subprocess.Popen[bytes]] = {}
    pending = list(range(len(envs)))
    while killed < kills or restarted < len(restart_at):
        while pending and len(running) < parallel:
            m = pending.pop(0)
            running[m] = subprocess.Popen(
                push_command(), env=envs[m], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        time.sleep(rng.uniform(0.05, kill_every))
        for m, child in list(running.items()):
            if child.poll() is not None:
                del running[m]
                if child.returncode != 0:
                    pending.append(m)  # failed (the server was away): push it again
        if running and killed < kills:
            m = rng.choice(list(running))
            running[m].send_signal(signal.SIGKILL)
            running[m].wait()
            del running[m]
            pending.append(m)
            killed += 1
            if killed in restart_at and server is not None:
                server.restart()
                restarted += 1
        if not running and not pending and killed < kills:
            pending = list(range(len(envs)))  # everything pushed: push again (replays) to keep killing
    for child in running.values():
        child.wait()
    return killed, restarted


def change_archives(folders: list[Path], exchanges: int) -> None:
    """Round two: a tenth of each machine's records get new summaries, and each gets new records."""
    for m, folder in enumerate(folders):
        rng = random.Random(1000 + m)
        sessions = max(1, exchanges // EXCHANGES_PER_SESSION)
        for s in rng.sample(range(sessions), max(1, sessions // 10)):
            count = (
                exchanges - EXCHANGES_PER_SESSION * (sessions - 1)
                if s == sessions - 1
                else EXCHANGES_PER_SESSION
            )
            write(folder, record_for(m, s, count, random.Random(m * 100_000 + s), round_=2))
        for extra in range(3):
            write(folder, record_for(m, sessions + extra, 20, rng))


def expected(folders: list[Path]) -> dict[str, int]:
    out = {}
    for folder in folders:
        for path in folder.glob("*.json"):
            record = json.loads(path.read_bytes())
            out[record["id"]] = len(record["nodes"])
    return out


def verify(dsn: str, folders: list[Path]) -> tuple[int, int, int]:
    """(missing records, records with a wrong node count, records with stale content)."""
    want = expected(folders)
    with psycopg.connect(dsn) as conn:
        have = dict(conn.execute("SELECT record_id, count(*) FROM pbot_nodes GROUP BY 1").fetchall())
        stale = conn.execute("SELECT count(*) FROM pbot_nodes WHERE text LIKE '%(round 2)%'").fetchone()
    missing = sum(1 for rid in want if rid not in have)
    wrong = sum(1 for rid, count in want.items() if rid in have and have[rid] != count)
    extra = sum(1 for rid in have if rid not in want)
    assert stale is not None
    return missing, wrong + extra, int(stale[0])


def check_tallies(dsn: str) -> tuple[int, int]:
    """(tallies, tallies whose total differs from a plain count of their query) after the chaos."""
    wrong = 0
    with psycopg.connect(dsn) as conn:
        tallies = conn.execute(
            "SELECT key, mode, pattern, query::text FROM pbot_tallies WHERE ready"
        ).fetchall()
        for key, mode, pattern, query in tallies:
            kept = conn.execute(
                "SELECT coalesce(sum(delta), 0) FROM pbot_tally_deltas WHERE key = %s", (key,)
            ).fetchone()
            test = "text_lower LIKE %s" if mode == "literal" else "terms @@ %s::tsquery"
            counted = conn.execute(
                f"SELECT count(*) FROM pbot_nodes WHERE searchable AND {test}",
                (pattern if mode == "literal" else query,),
            ).fetchone()
            wrong += kept != counted
    return len(tallies), wrong


def searchable_latency(folder: Path, state: Path, dsn: str, samples: int) -> list[float]:
    """Seconds from a record written to a team search finding it, through the service's pusher."""
    settings = Settings.model_validate(
        {
            "state_dir": state,
            "archive": folder,
            "sessions": [state / "none"],
            "machine": "bench",
            "team": {"enabled": True, "workspaces": ["*"]},
        }
    )
    (state / "none").mkdir(parents=True, exist_ok=True)
    listener = TeamListener(settings, dsn)
    listener.wait_idle(600)
    out = []
    with connect_team(dsn) as conn:
        for i in range(samples):
            word = f"quokka{i}x{random.randrange(10**9)}"
            record = record_for(99, 900_000 + i, 4, random.Random(i))
            record["nodes"][0]["text"] += f" {word}"
            started = time.perf_counter()
            write(folder, record)
            listener(folder / f"{record['id']}.json", record["sessionId"])
            while team_search(conn, word).total == 0:
                time.sleep(0.01)
            out.append(time.perf_counter() - started)
    listener.stop()
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def search_latency(dsn: str, repeat: int) -> None:
    """p50/p95 of each query class; ``first ms`` is its first search, which tallies a common query."""
    print(f"\n{'mode':8} {'query':12} {'hits':>8} {'first ms':>9} {'p50 ms':>8} {'p95 ms':>8}")
    with connect_team(dsn) as conn:  # as search --team connects
        for mode, label, query in QUERIES:
            started = time.perf_counter()
            team_search(conn, query, match=mode)  # type: ignore[arg-type]
            first = (time.perf_counter() - started) * 1000
            times = []
            total = 0
            for _ in range(repeat):
                started = time.perf_counter()
                total = team_search(conn, query, match=mode).total  # type: ignore[arg-type]
                times.append((time.perf_counter() - started) * 1000)
            print(
                f"{mode:8} {label:12} {total:>8} {first:>9.0f} {statistics.median(times):>8.1f} {pct(times, 0.95):>8.1f}"
            )


FILTERS = [
    ("session", {"session_id": "m0-s0"}),
    ("workspace", {"workspace": "proj-0"}),
    ("a week", {"from_": "2026-01-01", "to": "2026-01-07"}),
]
"""Filtered searches of common queries: one session, a fifth of the machines' workspaces, a week."""


def filtered_latency(dsn: str, repeat: int) -> None:
    """p50/p95 of common queries narrowed by a filter (a filtered search counts for itself, no tally)."""
    print(f"\n{'mode':8} {'query':10} {'filter':10} {'hits':>8} {'first ms':>9} {'p50 ms':>8} {'p95 ms':>8}")
    with connect_team(dsn) as conn:
        for mode, label, query in [QUERIES[0], QUERIES[2], QUERIES[5]]:
            for name, narrowing in FILTERS:
                times = []
                total = 0
                for _ in range(repeat + 1):
                    started = time.perf_counter()
                    total = team_search(conn, query, match=mode, **narrowing).total  # type: ignore[arg-type]
                    times.append((time.perf_counter() - started) * 1000)
                first, rest = times[0], times[1:]
                print(
                    f"{mode:8} {label:10} {name:10} {total:>8} {first:>9.0f} {statistics.median(rest):>8.1f} {pct(rest, 0.95):>8.1f}"
                )


MEMORY_QUERIES = [QUERIES[0], QUERIES[1], QUERIES[2], QUERIES[3], QUERIES[4], QUERIES[5]]


def memory_settings(state: Path, sessions: Path, machine: int) -> Settings:
    return Settings.model_validate(
        {
            "state_dir": state,
            "sessions": [sessions],
            "machine": f"machine-{machine:02d}",
            "team": {"enabled": True, "workspaces": ["*"], "raw_memory": True},
        }
    )


def memory_sessions(root: Path, machine: int, sessions: int, turns: int) -> None:
    """Pi session files of tool work: each turn a question, a bash call, its output, an answer."""
    rng = random.Random(100 + machine)
    for s in range(sessions):
        pi = PiSession(f"mem-m{machine}-s{s}", f"/home/user{machine:02d}/proj-{machine % 5}")
        for t in range(turns):
            pi.user(sentence(rng, rng.randint(6, 14)))
            pi.assistant(sentence(rng, 10), calls=[(f"call_{t}", "bash", {"command": "pytest -q"})])
            output = "\n".join(sentence(rng, rng.randint(6, 16)) for _ in range(rng.randint(2, 30)))
            if rng.random() < 0.002:
                output += f"\n{RARE_EN} {RARE_ZH}"
            pi.tool_result(output, call_id=f"call_{t}")
            pi.assistant(sentence(rng, rng.randint(8, 18)))
        pi.write(root / f"{pi.session_id}.jsonl")


def memory_stage(base: Path, dsn: str, machines: int, sessions: int, turns: int, args: Any) -> None:
    """Raw memory (``team.raw_memory``): push throughput, searchable after written, search p50/p95.

    Each machine's raw memory is built first (not timed), then pushed by ``TeamPusher.push_memory``.
    """
    pushed = 0
    seconds = 0.0
    for m in range(machines):
        root, state = base / f"memory-{m}" / "sessions", base / f"memory-{m}" / "state"
        memory_sessions(root, m, sessions, turns)
        index = SearchIndex(state / "search.db")
        refresh_memory(index, [root])  # this machine's own raw memory, as the service keeps it
        pusher = TeamPusher(memory_settings(state, root, m), dsn, secret_gate())
        started = time.perf_counter()
        report = pusher.push_memory(index)
        seconds += time.perf_counter() - started
        pushed += report.pushed
        pusher.close()
        index.close()
    print(
        f"\nraw memory push: {pushed} sources ({machines} machines x {sessions} sessions x {turns} turns) in "
        f"{seconds:.1f} s = {pushed / seconds:.0f} sources/s, one pusher at a time; load average {load_average()}"
    )
    root, state = base / "memory-0" / "sessions", base / "memory-0" / "state"
    listener = TeamListener(memory_settings(state, root, 0), dsn)
    listener.wait_idle(600)
    index = SearchIndex(state / "search.db")
    path = root / "mem-m0-s0.jsonl"
    lags = []
    leaf = json.loads(path.read_text(encoding="utf-8").splitlines()[-1])["id"]
    with connect_team(dsn) as conn:
        for i in range(args.samples):
            word = f"quokka{i}x{random.randrange(10**9)}"
            line = {
                "type": "message",
                "id": f"late{i:04d}",
                "parentId": f"late{i - 1:04d}" if i else leaf,  # the branch grows, as in Pi
                "timestamp": "2026-12-01T00:00:00.000Z",
                "message": {"role": "user", "content": [{"type": "text", "text": f"what about {word}"}]},
            }
            started = time.perf_counter()
            with path.open("a", encoding="utf-8") as out:
                out.write(json.dumps(line) + "\n")
            sync_memory_file(index, path)  # what the service's reading thread does as the file grows
            while team_memory_search(conn, word).total == 0:
                time.sleep(0.01)
            lags.append(time.perf_counter() - started)
    listener.stop()
    index.close()
    print(
        f"raw memory searchable after written: p50 {statistics.median(lags):.2f} s, max {max(lags):.2f} s over "
        f"{len(lags)} sources (the service looks every second)"
    )
    print(
        f"\n{'mode':8} {'query':12} {'hits':>8} {'first ms':>9} {'p50 ms':>8} {'p95 ms':>8}  (memory search --team)"
    )
    with connect_team(dsn) as conn:
        for mode, label, query in MEMORY_QUERIES:
            times = []
            total = 0
            for _ in range(args.repeat + 1):
                started = time.perf_counter()
                total = team_memory_search(conn, query, match=mode).total  # type: ignore[arg-type]
                times.append((time.perf_counter() - started) * 1000)
            first, rest = times[0], times[1:]
            print(
                f"{mode:8} {label:12} {total:>8} {first:>9.0f} {statistics.median(rest):>8.1f} {pct(rest, 0.95):>8.1f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--machines", type=int, default=50)
    parser.add_argument("--exchanges", type=int, default=20_000, help="exchanges per machine")
    parser.add_argument("--parallel", type=int, default=4, help="pushers running at once")
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--samples", type=int, default=20, help="searchable-after-write samples")
    parser.add_argument("--repeat", type=int, default=21, help="timed runs per search query")
    parser.add_argument("--memory-machines", type=int, default=4, help="machines pushing raw memory")
    parser.add_argument("--memory-sessions", type=int, default=25, help="session files per machine")
    parser.add_argument("--memory-turns", type=int, default=100, help="tool turns per session")
    parser.add_argument("--dsn", help="an existing, empty database (default: start a server here)")
    parser.add_argument("--keep", type=Path, help="generate into this folder and keep it")
    args = parser.parse_args()

    base = args.keep or Path(tempfile.mkdtemp(prefix="pbot-team-bench-"))
    server = None
    if args.dsn:
        dsn = args.dsn
    else:
        server = PostgresServer.create()
        server.create_database("team")
        dsn = server.dsn_for("team")
    try:
        with psycopg.connect(dsn) as conn:
            migrate(conn)
        started = time.perf_counter()
        folders = generate(base, args.machines, args.exchanges)
        total = args.machines * args.exchanges
        print(
            f"archives: {args.machines} machines x {args.exchanges} exchanges = {total} exchanges, generated in {time.perf_counter() - started:.0f} s"
        )
        envs = [machine_env(folder, dsn) for folder in folders]
        print(f"load average before the push: {load_average()}")
        seconds = push_all(envs, args.parallel)
        print(
            f"push: {total} exchanges ({sum(expected(folders).values())} nodes) in {seconds:.1f} s = "
            f"{total / seconds:.0f} exchanges/s with {args.parallel} pushers; load average {load_average()}"
        )
        with psycopg.connect(dsn) as conn:
            size = conn.execute("SELECT pg_size_pretty(pg_database_size(current_database()))").fetchone()
        print(f"team database: {size[0] if size else '?'}")
        latencies = searchable_latency(folders[0], base / "listener-state", dsn, args.samples)
        print(
            f"searchable after written: p50 {statistics.median(latencies):.2f} s, max {max(latencies):.2f} s "
            f"over {len(latencies)} records (target <= 5 s)"
        )
        search_latency(dsn, args.repeat)
        filtered_latency(dsn, args.repeat)
        print(f"load average after the searches: {load_average()}")
        if args.memory_machines:
            memory_stage(base, dsn, args.memory_machines, args.memory_sessions, args.memory_turns, args)
        change_archives(folders, args.exchanges)
        killed, restarted = chaos(envs, server, args.parallel, args.kills, args.restarts, random.Random(7))
        push_all(envs, args.parallel)
        missing, wrong, stale = verify(dsn, folders)
        print(
            f"chaos: {killed} pushers killed, {restarted} server restarts; then one push each: "
            f"{missing} records missing, {wrong} records with wrong or extra nodes, {stale} round-2 summaries present"
        )
        tallies, off = check_tallies(dsn)
        print(
            f"tallies kept through the chaos: {tallies}, {off} with a total other than a count of their query"
        )
    finally:
        if server is not None:
            server.destroy()
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)  # a 1,000,000-exchange run leaves about 1 GB


if __name__ == "__main__":
    main()
