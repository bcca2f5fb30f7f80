"""What redaction costs: indexing with it against indexing without it, on a generated corpus.

Generates (or reuses, with ``--out``) ``bench/index_throughput.py``'s corpus of Pi sessions and
times, interleaved so that other load hits both sides alike, each with redaction off and on:

* ``index``: ``index_all`` into empty archives (records written, exchange texts redacted);
* ``raw memory``: the raw-memory index built from the session files into a fresh state folder
  (every tool output redacted), as the first ``pbot-watch memory search`` builds it;
* the redaction step alone on every text of the corpus (MB/s).

It prints wall and CPU seconds and the ratio on/off (target: under 1.10 for both). With
``--shared PATH`` it also prints how many redactions the real fixtures (``PATH/fixtures``) and
the LoCoMo conversations (``PATH/data/locomo``) get, per kind. Run by hand::

    .venv/bin/python bench/redaction.py                                   # 20 MB, temp dir
    .venv/bin/python bench/redaction.py --out /tmp/corpus634 --sessions 300 --exchanges 200 \\
        --size-mb 634 --seed 1 --repeat 1 --shared ../shared

Figures are printed, never asserted: ``tests/redact/test_bench_redaction.py`` runs it tiny.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _timed(run: Callable[[], object]) -> tuple[float, float]:
    start, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - start, time.process_time() - cpu


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _texts(root: Path) -> list[str]:
    return [
        text
        for path in sorted(root.rglob("*.jsonl"))
        for line in path.read_bytes().splitlines()
        if line.strip()
        for text in _strings(json.loads(line))
    ]


def corpus(args: argparse.Namespace, out: Path) -> tuple[Path, list[Path]]:
    from index_throughput import generate

    root = out / "sessions"
    if root.is_dir():
        return root, sorted((out / "workspaces").iterdir())
    return generate(
        out, args.sessions, args.size_mb, args.workspaces, seed=args.seed, exchanges=args.exchanges
    )


def measure(args: argparse.Namespace, root: Path, spaces: list[Path]) -> dict[str, Any]:
    from pbot_watch.archive.files import ArchiveStore
    from pbot_watch.indexer import index_all
    from pbot_watch.memory.index import refresh_memory
    from pbot_watch.redact import policy, redact
    from pbot_watch.redact.policy import scrub
    from pbot_watch.search.index import SearchIndex

    def clear() -> None:
        for space in spaces:
            shutil.rmtree(space / ".pi", ignore_errors=True)
        os.sync()

    def index() -> None:
        index_all([root], ArchiveStore())

    def memory() -> None:
        state = Path(tempfile.mkdtemp(prefix="pbot-redact-state-"))
        try:
            with SearchIndex(SearchIndex.default_path(state)) as idx:
                refresh_memory(idx, [root])
        finally:
            shutil.rmtree(state, ignore_errors=True)

    runs: dict[str, dict[bool, list[tuple[float, float]]]] = {"index": {}, "raw memory": {}}
    for _ in range(args.repeat):
        for on in (False, True):
            policy.configure(on)
            clear()
            runs["index"].setdefault(on, []).append(_timed(index))
            if not args.skip_memory:
                runs["raw memory"].setdefault(on, []).append(_timed(memory))
    policy.configure(True)
    figures: dict[str, Any] = {}
    for name, sides in runs.items():
        if not sides:
            continue
        off, on = sides[False], sides[True]
        figures[name] = {
            "off s": round(statistics.median(r[0] for r in off), 2),
            "on s": round(statistics.median(r[0] for r in on), 2),
            "off cpu s": round(statistics.median(r[1] for r in off), 2),
            "on cpu s": round(statistics.median(r[1] for r in on), 2),
            "ratio on/off": round(statistics.median(b[0] / a[0] for a, b in zip(off, on, strict=True)), 3),
            "cpu ratio on/off": round(
                statistics.median(b[1] / a[1] for a, b in zip(off, on, strict=True)), 3
            ),
        }
    texts = _texts(root)
    size = sum(map(len, texts)) / 1e6
    wall, cpu = _timed(lambda: [redact(text) for text in texts])
    # What every boundary calls (records, raw memory, cues): the text alone, no counts.
    scrub_wall, scrub_cpu = _timed(lambda: [scrub(text) for text in texts])
    found = Counter[str]()
    for text in texts:
        found.update(redact(text).counts)
    figures["redact alone"] = {
        "texts": len(texts),
        "MB of text": round(size, 1),
        "MB/s": round(size / wall, 1),
        "cpu MB/s": round(size / cpu, 1) if cpu else None,
        "scrub MB/s": round(size / scrub_wall, 1),
        "scrub cpu MB/s": round(size / scrub_cpu, 1) if scrub_cpu else None,
        "redactions": dict(found),
    }
    return figures


def shared_counts(shared: Path) -> dict[str, Any]:
    """Redactions per kind in every string of the real fixtures and of the LoCoMo data."""
    from pbot_watch.redact import redact

    out: dict[str, Any] = {}
    fixtures = shared / "fixtures"
    if fixtures.is_dir():
        kinds = Counter[str]()
        where: dict[str, list[str]] = {}
        for path in sorted(fixtures.rglob("*.jsonl")):
            for line in path.read_bytes().splitlines():
                try:
                    value = json.loads(line)
                except ValueError:
                    continue  # torn and non-JSON lines are part of the fixtures
                for text in _strings(value):
                    counts = redact(text).counts
                    kinds.update(counts)
                    for kind in counts:
                        where.setdefault(kind, []).append(str(path.relative_to(shared)))
        out["fixtures"] = {"redactions": dict(kinds), "files": {k: sorted(set(v)) for k, v in where.items()}}
    locomo = shared / "data" / "locomo"
    if locomo.is_dir():
        kinds = Counter[str]()
        for path in sorted(locomo.glob("*.json")):
            for text in _strings(json.loads(path.read_text(encoding="utf-8"))):
                kinds.update(redact(text).counts)
        out["locomo"] = {"redactions": dict(kinds)}
    return out


def main() -> None:
    from figures import bench_parser, show_figures
    from index_throughput import corpus_arguments

    parser = bench_parser(__doc__)
    corpus_arguments(parser)
    parser.set_defaults(size_mb=20.0, sessions=40)
    parser.add_argument("--exchanges", type=int, help="exchanges per session (as bench/first_run.py)")
    parser.add_argument("--seed", type=int, default=1, help="the generator's seed (default 1)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per side; medians are shown")
    parser.add_argument("--out", type=Path, help="corpus folder, reused if present (default: a temp dir)")
    parser.add_argument("--skip-memory", action="store_true", help="only the index pass")
    parser.add_argument(
        "--shared", type=Path, help="also count redactions in PATH/fixtures and PATH/data/locomo"
    )
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="pbot-redact-"))
    try:
        root, spaces = corpus(args, out)
        figures: dict[str, Any] = {
            "corpus": {
                "sessions": sum(1 for _ in root.rglob("*.jsonl")),
                "MB": round(sum(p.stat().st_size for p in root.rglob("*.jsonl")) / 1e6, 1),
                "load average": os.getloadavg()[0],
            },
            **measure(args, root, spaces),
        }
        if args.shared:
            figures["shared"] = shared_counts(args.shared)
        figures["target"] = "ratio on/off under 1.10 for index and raw memory"
    finally:
        if args.out is None:
            shutil.rmtree(out, ignore_errors=True)
    show_figures(figures, as_json=args.json)


if __name__ == "__main__":
    main()
