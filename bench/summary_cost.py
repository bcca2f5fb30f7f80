"""What summaries cost with the content-keyed cache, against pbot's way without it.

Generates a history of N exchanges on a main line with side branches, plus forked sessions
(``pi --fork`` copies: new session ids, same entries), indexes it, and summarizes every node
twice against a scripted OpenAI-compatible server on 127.0.0.1, through litellm's real path:

* pbot-watch: the summary queue (one queue over all records, cache keyed by the input);
* no cache (pbot 0.2.3's behaviour): each record's pending nodes summarized on their own, so
  every fork pays again for the groups it shares with its original.

It counts the model requests the server received and their input tokens (the server's
estimate: characters / 4), prints both and the ratio. A real provider would bill the same
shape. Run by hand from the repository root::

    python bench/summary_cost.py                       # 400 exchanges, 3 branches, 3 forks
    python bench/summary_cost.py --exchanges 2000 --forks 10 --json

Figures are printed, never asserted: ``tests/summarize/test_bench_smoke.py`` runs it tiny.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pbot_watch.archive.files import ArchiveStore, read_record  # noqa: E402
from pbot_watch.config import Settings  # noqa: E402
from pbot_watch.indexer import index_all  # noqa: E402
from pbot_watch.log import configure_logging  # noqa: E402
from pbot_watch.summarize.base import node_input  # noqa: E402
from pbot_watch.summarize.litellm_model import LitellmSummarizer  # noqa: E402
from pbot_watch.summarize.worker import SummaryWorker  # noqa: E402
from tests.support.openai_server import OpenAIServer, Reply, Request  # noqa: E402
from tests.support.pi_sessions import generated_history  # noqa: E402

MODEL = "openai/bench-summarizer"


def deterministic(request: Request) -> Reply:
    """A stand-in model: the same input always gets the same short summary."""
    digest = hashlib.sha256(request.user_text.encode()).hexdigest()[:12]
    return Reply.answer(f"Summary {digest}: the exchanges discussed the work at hand and its outcome.")


def server_totals(server: OpenAIServer, since: int) -> tuple[int, int]:
    requests = server.chat_requests[since:]
    tokens = 0
    for request in requests:
        chars = sum(len(str(m.get("content", ""))) for m in request.messages)
        tokens += -(-chars // 4)
    return len(requests), tokens


def with_cache(server: OpenAIServer, root: Path) -> dict[str, Any]:
    settings = Settings.model_validate(
        {
            "sessions": [root / "sessions"],
            "archive": root / "archive-cached",
            "state_dir": root / "state",
            "max_calls_per_day": 10**9,
            "max_tokens_per_day": 10**12,
            "max_calls_per_idle": 10**9,
            "model": MODEL,
            "api_base": server.base_url,
        }
    )
    index_all(settings.sessions, ArchiveStore(central=settings.archive))
    summarizer = LitellmSummarizer(MODEL, api_base=server.base_url, retry_wait=0.01)
    worker = SummaryWorker(settings, summarizer=summarizer)
    start = len(server.chat_requests)
    started = time.perf_counter()
    report = worker.run_once(threading.Event())
    seconds = time.perf_counter() - started
    calls, tokens = server_totals(server, start)
    worker.close()
    return {
        "nodes_summarized": report.summarized,
        "from_cache": report.from_cache,
        "calls": calls,
        "input_tokens": tokens,
        "seconds": round(seconds, 2),
        "stop": report.stop,
    }


def without_cache(server: OpenAIServer, root: Path) -> dict[str, Any]:
    """pbot's organize(): per record, lowest level first, every pending node asked for."""
    archive = root / "archive-plain"
    store = ArchiveStore(central=archive)
    index_all([root / "sessions"], store)
    summarizer = LitellmSummarizer(MODEL, api_base=server.base_url, retry_wait=0.01)
    cancel = threading.Event()
    start = len(server.chat_requests)
    started = time.perf_counter()
    nodes = 0
    for path in sorted(archive.glob("*.json")):
        record = read_record(path)
        assert record is not None
        lookup = {n["id"]: n for n in record["nodes"]}
        progress = True
        while progress:
            progress = False
            for node in sorted(record["nodes"], key=lambda n: n["level"]):
                if node["kind"] != "summary" or node["ready"]:
                    continue
                children = [lookup[c] for c in node["children"]]
                if not all(c["ready"] for c in children):
                    continue
                node["text"] = summarizer.summarize(node_input(children), cancel).text
                node["ready"] = True
                nodes += 1
                progress = True
        store.write(path, record)
    seconds = time.perf_counter() - started
    calls, tokens = server_totals(server, start)
    return {"nodes_summarized": nodes, "calls": calls, "input_tokens": tokens, "seconds": round(seconds, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exchanges", type=int, default=400, help="exchanges on the main line")
    parser.add_argument("--branches", type=int, default=3, help="side branches off the main line")
    parser.add_argument("--forks", type=int, default=3, help="forked sessions of the main line")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    configure_logging(level="warning", stream=sys.stderr)
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-not-a-real-key")
    with (
        tempfile.TemporaryDirectory(prefix="pbot-summary-cost-") as tmp,
        OpenAIServer(handler=deterministic) as server,
    ):
        root = Path(tmp)
        files = generated_history(root / "sessions" / "--bench--", args.exchanges, args.branches, args.forks)
        cached = with_cache(server, root)
        plain = without_cache(server, root)
    ratio = cached["calls"] / plain["calls"] if plain["calls"] else 0.0
    token_ratio = cached["input_tokens"] / plain["input_tokens"] if plain["input_tokens"] else 0.0
    result = {
        "exchanges": args.exchanges,
        "branches": args.branches,
        "forks": args.forks,
        "session_files": len(files),
        "with_cache": cached,
        "without_cache": plain,
        "call_ratio": round(ratio, 3),
        "input_token_ratio": round(token_ratio, 3),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"history: {args.exchanges} exchanges, {args.branches} branches, {args.forks} forks ({len(files)} files)"
    )
    print(
        f"pbot-watch (cache):  {cached['calls']:>6} calls  {cached['input_tokens']:>9} input tokens  "
        f"({cached['nodes_summarized']} nodes written, {cached['from_cache']} from cache, {cached['seconds']} s)"
    )
    print(
        f"no cache (pbot):     {plain['calls']:>6} calls  {plain['input_tokens']:>9} input tokens  "
        f"({plain['nodes_summarized']} nodes, {plain['seconds']} s)"
    )
    print(f"ratio cache/no-cache: calls {ratio:.3f}, input tokens {token_ratio:.3f}")


if __name__ == "__main__":
    main()
