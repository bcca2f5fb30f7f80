"""Search latency at 100,000 exchanges: the FTS5 index against pbot's plain scan of record files.

Generates an archive (sessions of exchanges in English and Chinese with Zipf-distributed words,
plus their ready summaries), builds the search index from it, then times, in the same run:

- ``index``: ``search_history`` on the index (what ``pbot-watch search`` and MCP do), and
  ``refresh+index``: the same after the stat-based freshness check the CLI makes first;
- ``scan``: what pbot 0.2.3 does for every search — read and parse every record file, then a
  case-insensitive substring test over every node, sort, page.

Prints p50/p95 per query kind and the speed-up; ``cpu p50`` is the process's CPU time (on a
shared machine wall time also counts waiting for a core), and ``cold p50`` is a terms query
right after an index change, when common terms' pools are computed again, or a literal query's
first search, before its needle is tallied (its candidates confirmed from their texts). ``=exact@10`` is the
ranking quality the pools keep: the share of a terms query's first 10 hits that an exact
ranking (every node scored by FTS5, no pools) also has first. Run by hand:

    .venv/bin/python bench/search_latency.py               # 100,000 exchanges
    .venv/bin/python bench/search_latency.py --exchanges 2000 --repeat 3   # a quick look
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pbot_watch.history.jstext import dumps, locale_key
from pbot_watch.history.nodes import SessionHistory, index_history
from pbot_watch.search.index import RecordFolder, SearchIndex
from pbot_watch.search.queries import search_history
from pbot_watch.search.ranking import Ranking

EXCHANGES_PER_SESSION = 100
COMMON_EN = "error"
RARE_EN = "zanthoxylum"
COMMON_ZH = "数据"
RARE_ZH = "鲸鱼"
EXACT = Ranking(common_term_nodes=1 << 40)
"""Every term scored by FTS5 over all its nodes: the ranking the pools stand in for."""

EN_WORDS = [
    "the",
    "a",
    "to",
    "of",
    "and",
    "in",
    "is",
    "it",
    "for",
    "that",
    "on",
    "with",
    "this",
    "be",
    "you",
    "are",
    "as",
    "not",
    "at",
    "can",
    "we",
    "use",
    "file",
    "test",
    "run",
    "build",
    "fix",
    "code",
    "function",
    "error",
    "value",
    "config",
    "server",
    "client",
    "request",
    "response",
    "data",
    "table",
    "index",
    "query",
    "cache",
    "update",
    "change",
    "branch",
    "commit",
    "merge",
    "deploy",
    "release",
    "version",
    "module",
    "package",
    "import",
    "export",
    "type",
    "class",
    "method",
    "field",
    "string",
    "number",
    "list",
    "map",
    "set",
    "user",
    "session",
    "token",
    "model",
    "prompt",
    "summary",
    "history",
]
ZH_WORDS = [
    "数据",
    "文件",
    "测试",
    "问题",
    "函数",
    "配置",
    "服务",
    "用户",
    "会话",
    "模型",
    "摘要",
    "历史",
    "错误",
    "修复",
    "代码",
    "分支",
    "提交",
    "版本",
    "模块",
    "接口",
    "请求",
    "响应",
    "缓存",
    "索引",
    "查询",
    "部署",
    "发布",
    "性能",
    "内存",
    "日志",
    "权限",
    "目录",
    "路径",
    "脚本",
    "命令",
    "参数",
    "结果",
    "原因",
]


def zipf_pick(rng: random.Random, words: list[str]) -> str:
    # Rank r is chosen with probability ~ 1/r: a few words are everywhere, most are rare.
    r = int(len(words) ** rng.random()) - 1
    return words[min(r, len(words) - 1)]


def sentence(rng: random.Random, n: int) -> str:
    if rng.random() < 0.3:
        return "".join(zipf_pick(rng, ZH_WORDS) for _ in range(n // 2)) + "。"
    words = [zipf_pick(rng, EN_WORDS) for _ in range(n)]
    if rng.random() < 0.05:
        words[rng.randrange(n)] = f"v{rng.randrange(10**6)}"
    return " ".join(words).capitalize() + "."


def generated_record(
    session_id: str, title: str, session: int, exchanges: int, rng: random.Random, note: str = ""
) -> dict[str, Any]:
    """One session's record of ``exchanges`` generated exchanges, every summary ready.

    ``session`` places its exchanges in time; ``note`` ends every summary (a later round of
    the same record differs in it). ``team_scale.py`` builds its machines' records with this too.
    """
    branch = []
    for i in range(exchanges):
        minute = session * EXCHANGES_PER_SESSION + i
        stamp = f"2026-{1 + minute // 40000 % 12:02d}-{1 + minute // 1400 % 28:02d}T{minute // 60 % 24:02d}:{minute % 60:02d}:00.000Z"
        question = " ".join(sentence(rng, rng.randint(6, 14)) for _ in range(rng.randint(1, 2)))
        answer = " ".join(sentence(rng, rng.randint(8, 18)) for _ in range(rng.randint(2, 5)))
        if rng.random() < 0.0005:
            answer += f" {RARE_EN} {RARE_ZH}"
        branch.append(
            {
                "entryIds": [f"u{session}x{i}", f"a{session}x{i}"],
                "from": stamp,
                "to": stamp,
                "completed": True,
                "text": f"用户：\n{question}\n\n助手：\n{answer}",
            }
        )
    record = index_history(SessionHistory(session_id, title, [branch]))
    for node in record["nodes"]:
        if node["kind"] == "summary":
            node["text"] = " ".join(sentence(rng, 12) for _ in range(4)) + note
            node["ready"] = True
    return record


def generate(folder: Path, exchanges: int, seed: int = 7) -> int:
    """Write record files holding ``exchanges`` exchanges; every summary is ready. Returns nodes."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    sessions = max(1, exchanges // EXCHANGES_PER_SESSION)
    nodes = 0
    made = 0
    for s in range(sessions):
        count = exchanges - made if s == sessions - 1 else EXCHANGES_PER_SESSION
        made += count
        record = generated_record(f"session-{s}", f"Session {s}", s, count, rng)
        nodes += len(record["nodes"])
        (folder / f"{record['id']}.json").write_text(dumps(record) + "\n", encoding="utf-8")
    return nodes


def pbot_scan(folder: Path, query: str, limit: int = 20) -> tuple[int, list[str]]:
    """pbot's search: every record file read and parsed, every node tested, sorted, paged."""
    records = [json.loads(p.read_bytes()) for p in sorted(folder.glob("*.json"))]
    needle = query.strip().lower()
    matches = []
    for record in records:
        for node in record["nodes"]:
            if needle:
                ok = node["kind"] != "session" and node["ready"] and needle in node["text"].lower()
            else:
                ok = node["kind"] == "session"
            if ok:
                start = max(0, node["text"].lower().find(needle) - 80)
                matches.append((node["to"], node["id"], node["text"][start : start + 400]))
    matches.sort(key=lambda m: locale_key(m[1]))
    matches.sort(key=lambda m: locale_key(m[0]), reverse=True)
    return len(matches), [m[1] for m in matches[:limit]]


def forget_tallies(index: SearchIndex) -> None:
    """As before the first search of a needle: the history index's tallies dropped."""
    with index.transaction():
        index.conn.execute("DELETE FROM node_tally_nodes")
        index.conn.execute("DELETE FROM node_tallies")


CPU_TIMES: list[float] = []
"""CPU milliseconds of every timed run, in order: on a shared machine wall time also counts waiting."""


def timed(
    fn: Callable[[], Any], repeat: int, before: Callable[[], Any] | None = None
) -> tuple[list[float], Any]:
    out = []
    value = None
    for _ in range(repeat):
        if before is not None:
            before()
        started, cpu = time.perf_counter(), time.process_time()
        value = fn()
        out.append((time.perf_counter() - started) * 1000)
        CPU_TIMES.append((time.process_time() - cpu) * 1000)
    return out, value


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--exchanges", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=21, help="timed runs per query on the index")
    parser.add_argument("--scan-repeat", type=int, default=3, help="timed runs per query of the plain scan")
    parser.add_argument("--keep", type=Path, help="build in this folder and keep it")
    parser.add_argument(
        "--reuse", action="store_true", help="with --keep: reuse the archive and index built before"
    )
    args = parser.parse_args()

    base = args.keep or Path(tempfile.mkdtemp(prefix="pbot-bench-"))
    archive = base / "archive"
    db = base / "search.db"
    reused = args.reuse and db.exists() and archive.is_dir()
    if reused:
        index = SearchIndex(db)
        print(f"reusing {archive} and its index ({index.counts()['nodes']} nodes)")
    if reused and index.counts()["nodes"] == 0:
        # Opening an index of an older schema version started it over: build it again.
        index.close()
        reused = False
    if not reused:
        started = time.perf_counter()
        if not (args.reuse and archive.is_dir()):
            nodes = generate(archive, args.exchanges)
            print(
                f"archive: {args.exchanges} exchanges, {nodes} nodes in {len(list(archive.glob('*.json')))} records "
                f"({sum(p.stat().st_size for p in archive.glob('*.json')) / 1e6:.0f} MB) in {time.perf_counter() - started:.1f} s"
            )
        for suffix in ("", "-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
        index = SearchIndex(db)
        started = time.perf_counter()
        index.rebuild([RecordFolder(archive, None)])
        index.optimize()
        print(f"index: built in {time.perf_counter() - started:.1f} s, {db.stat().st_size / 1e6:.0f} MB")
    folders = [RecordFolder(archive, None)]

    queries = [
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
    print(
        f"\n{'mode':8} {'query':12} {'hits':>7} {'index p50':>10} {'p95':>8} {'cpu p50':>8} {'+refresh p50':>13}"
        f" {'p95':>8} {'scan p50':>9} {'speed-up':>9} {'cold p50':>9} {'=exact@10':>9}"
    )
    index_p50: list[float] = []
    ratios: list[float] = []
    for mode, label, query in queries:

        def run(query: str = query, mode: Any = mode) -> Any:
            return search_history(index, query, match=mode)

        def refresh_run(query: str = query, mode: Any = mode) -> Any:
            index.update_from_archive(folders)
            return search_history(index, query, match=mode)

        run()  # warm the page cache once, as a second query would find it
        CPU_TIMES.clear()
        plain, result = timed(run, args.repeat)
        cpu = statistics.median(CPU_TIMES)
        refreshed, _ = timed(refresh_run, args.repeat)
        scan_cell = ""
        ratio_cell = ""
        cold_cell = ""
        exact_cell = ""
        if mode == "terms":
            # As after an index change: common terms' pools (search/pools.py) are computed again.
            cold, _ = timed(run, args.repeat, lambda: index.conn.execute("DELETE FROM term_pools"))
            cold_cell = f"{statistics.median(cold):7.1f}ms"
            exact = search_history(index, query, match=mode, limit=10, ranking=EXACT)
            ours = {m.id for m in result.matches[:10]}
            same = len(ours & {m.id for m in exact.matches}) / max(1, len(exact.matches))
            exact_cell = f"{same:8.2f}"
        if mode == "literal":
            # The first search of a needle: no tally yet (search/literal.py), its candidates confirmed.
            cold, _ = timed(run, min(args.repeat, 5), lambda: forget_tallies(index))
            cold_cell = f"{statistics.median(cold):7.1f}ms"
            scans, (total, top) = timed(lambda query=query: pbot_scan(archive, query), args.scan_repeat)
            assert total == result.total, (query, total, result.total)
            assert top == [m.id for m in result.matches], query
            ratio = statistics.median(scans) / statistics.median(refreshed)
            ratios.append(ratio)
            scan_cell = f"{statistics.median(scans):8.0f}ms"
            ratio_cell = f"{ratio:8.0f}x"
        index_p50.append(statistics.median(plain))
        print(
            f"{mode:8} {label:12} {result.total:7d} {statistics.median(plain):8.1f}ms {pct(plain, 0.95):6.1f}ms"
            f" {cpu:6.1f}ms {statistics.median(refreshed):11.1f}ms {pct(refreshed, 0.95):6.1f}ms {scan_cell:>9}"
            f" {ratio_cell:>9} {cold_cell:>9} {exact_cell:>9}"
        )
    index.close()
    print(
        f"\nall queries: index p50 of medians {statistics.median(index_p50):.1f} ms, worst median {max(index_p50):.1f} ms; "
        f"literal speed-up over the scan (with refresh): min {min(ratios):.0f}x, median {statistics.median(ratios):.0f}x"
    )


if __name__ == "__main__":
    main()
