"""How long the memory cues of a large session take to compute.

Writes one Pi 1.6.0-shaped session of about ``--size-mb`` MB (tool calls with outputs of a few
hundred bytes to tens of kilobytes, reads, edits, failing and passing commands, talk with
thinking, the model's recall_memory calls, and a compaction every ``--batch-kb`` KB, about what
a 128k-token model holds), then times, best of ``--repeat``:

* parse: the file through ``SessionReader`` (what any consumer pays once);
* cues: ``compute_cues`` over those entries, from the current leaf;
* total: both, as ``pbot-watch cues`` does after its start-up;
* ledger: the session's cue ledger read from the file and saved (``memory/cue_follow.py``),
  its size on disk, and a new process's load of it and cues from it (what a Pi child started on
  the session pays when the service or an earlier child saved the ledger).

``--corpus DIR`` instead measures the saved ledgers of every session of a corpus (its
``sessions/`` folder is only read): their bytes against the sessions', all of them and the
ones actually saved (files from 16 MB on).

Run by hand::

    python bench/cues.py                 # 20 MB
    python bench/cues.py --size-mb 2 --json
    python bench/cues.py --corpus /path/to/corpus      # ledgers' bytes on disk

What the block costs is measured on a session the real Pi wrote (``bench/pi_long_session.py``
writes one: hundreds of tool calls, several compactions, absolute paths, long commands)::

    python bench/cues.py --pi-session /tmp/pi-long.jsonl [--before DIR] [--window 200000 ...]

For each compaction, the block the next request carries (the cues of the branch at that
compaction): its tokens by the Anthropic tokenizer litellm ships and by Pi's characters / 4,
its lines, tokens per line, the tokens of the handles, the block over the compaction's own
summary, and whether every failure of the newest batch is a full line naming its call and
what went wrong. ``--before DIR`` computes the same blocks with the code in DIR (a checkout,
e.g. ``git archive <commit> pbot_watch | tar -x -C DIR``) in a subprocess, and prints both.

``measure(size_mb)`` returns the same figures for other benches (``bench/pi_tools.py``). Figures
are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

SESSION_ID = "01a228f5-31fa-7664-97b8-48c2bf54bd29"
# The words of every generated text. None holds a redaction rule's anchor ("passes" held the
# password rule's "pass"): a fourteenth of all words would then send the redaction through its
# slow path everywhere, which no real session does, and make the timings of what redacts the
# cues (the memory index, the child) a measure of that word (tests/memory/test_bench_cues.py).
WORDS = [
    "the",
    "budget",
    "limit",
    "test",
    "file",
    "returns",
    "value",
    "over",
    "check",
    "run",
    "build",
    "error",
    "fixes",
    "module",
]


class _Writer:
    def __init__(self, path: Path, rng: random.Random) -> None:
        self.handle = path.open("w", encoding="utf-8")
        self.rng = rng
        self.n = 0
        self.last: str | None = None
        self.size = 0
        self.results: list[str] = []
        self.write(
            {"type": "session", "version": 3, "id": SESSION_ID, "timestamp": self.stamp(), "cwd": "/w"}
        )

    def stamp(self) -> str:
        seconds = self.n * 7
        return f"2026-11-{1 + seconds // 86400:02d}T{seconds // 3600 % 24:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.000Z"

    def write(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, ensure_ascii=False) + "\n"
        self.size += len(line.encode())
        self.handle.write(line)

    def entry(self, body: dict[str, Any]) -> str:
        self.n += 1
        entry_id = f"{self.n:08x}"
        self.write(
            {
                "type": body.pop("type", "message"),
                "id": entry_id,
                "parentId": self.last,
                "timestamp": self.stamp(),
                **body,
            }
        )
        self.last = entry_id
        return entry_id

    def text(self, words: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(words))

    def output(self, lines: int) -> str:
        return "".join(f"{i:4d} {self.text(8)}\n" for i in range(lines))

    def tool(self, name: str, arguments: dict[str, Any], output: str, error: bool = False) -> None:
        call = f"call_{self.n}"
        self.entry(
            {
                "message": {
                    "role": "assistant",
                    "content": [{"type": "toolCall", "id": call, "name": name, "arguments": arguments}],
                    "stopReason": "toolUse",
                }
            }
        )
        result = self.entry(
            {
                "message": {
                    "role": "toolResult",
                    "toolCallId": call,
                    "toolName": name,
                    "content": [{"type": "text", "text": output}],
                    "isError": error,
                }
            }
        )
        self.results.append(result)

    def turn(self) -> str:
        user = self.entry({"message": {"role": "user", "content": [{"type": "text", "text": self.text(30)}]}})
        rng = self.rng
        for _ in range(rng.randint(2, 8)):
            roll = rng.random()
            path = f"src/mod{rng.randint(0, 40)}.ts"
            if roll < 0.35:
                self.tool("read", {"path": path}, self.output(rng.randint(20, 300)))
            elif roll < 0.45:
                self.tool(
                    "edit", {"path": path, "oldText": self.text(5), "newText": self.text(6)}, f"Edited {path}"
                )
            elif roll < 0.85:
                failed = rng.random() < 0.25
                self.tool(
                    "bash", {"command": f"npm test -- {path}"}, self.output(rng.randint(1, 400)), failed
                )
            elif self.results:
                handle = f"m1.{self.rng.choice(self.results)}"  # opaque to the model; any string will do
                self.tool("mcp__pbot_watch__recall_memory", {"handle": handle}, self.output(5))
        self.entry(
            {
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": self.text(60)},
                        {"type": "text", "text": self.text(80)},
                    ],
                    "stopReason": "stop",
                }
            }
        )
        return user


def write_session(path: Path, size_mb: float, batch_kb: int, seed: int = 7) -> dict[str, int]:
    """A session of about ``size_mb`` MB with a compaction every ``batch_kb`` KB of entries."""
    writer = _Writer(path, random.Random(seed))
    next_compaction = batch_kb * 1024
    compactions = 0
    while writer.size < size_mb * 1024 * 1024:
        kept = writer.turn()
        if writer.size >= next_compaction:
            writer.entry(
                {
                    "type": "compaction",
                    "summary": writer.text(300),
                    "firstKeptEntryId": kept,
                    "tokensBefore": 100_000,
                }
            )
            compactions += 1
            next_compaction = writer.size + batch_kb * 1024
    writer.handle.close()
    return {
        "bytes": path.stat().st_size,
        "entries": writer.n,
        "tool events": len(writer.results),
        "compactions": compactions,
    }


def measure(
    size_mb: float = 20, batch_kb: int = 500, repeat: int = 3, folder: Path | None = None
) -> dict[str, Any]:
    """Parse and cue-computation times (seconds, best of ``repeat``) for one generated session."""
    from pbot_watch.memory.cues import compute_cues
    from pbot_watch.pi.entries import SessionReader

    with tempfile.TemporaryDirectory() as temp:
        path = (folder or Path(temp)) / "big.jsonl"
        shape = write_session(path, size_mb, batch_kb)
        parse, cues, state = [], [], None
        for _ in range(repeat):
            started = time.perf_counter()
            reader = SessionReader()
            with path.open("rb") as handle:
                entries = [e for chunk in iter(lambda: handle.read(1 << 20), b"") for e in reader.feed(chunk)]
            parsed = time.perf_counter()
            state = compute_cues(entries, session_id=SESSION_ID)
            done = time.perf_counter()
            parse.append(parsed - started)
            cues.append(done - parsed)
        assert state is not None
        return {
            "session": {**shape, "MB": round(shape["bytes"] / 1e6, 1)},
            "parse s": round(min(parse), 3),
            "cues s": round(min(cues), 3),
            "total s": round(min(p + c for p, c in zip(parse, cues, strict=True)), 3),
            "batch": state.batch,
            "lines": len(state.lines),
            "block tokens": state.tokens,
            **ledger_figures(path, Path(temp) / "ledgers"),
        }


def ledger_figures(path: Path, store: Path) -> dict[str, Any]:
    """The session's saved cue ledger: read and saved by one process, loaded by a new one (a Pi child).

    The new process's cues come from the loaded ledger alone (it reads no session byte).
    """
    from pbot_watch.memory.cue_follow import FollowedCues
    from pbot_watch.memory.cues import ledger_cues

    first = FollowedCues(store, saved_from=0)
    started = time.perf_counter()
    first.ledger(path)
    read = time.perf_counter() - started
    first.save_all()
    saved = time.perf_counter() - started - read
    second = FollowedCues(store, saved_from=0)
    started = time.perf_counter()
    ledger = second.ledger(path)
    loaded = time.perf_counter() - started
    state = ledger_cues(ledger)
    assert second.bytes_read == 0, "the saved ledger was not used"
    return {
        "ledger: read from the file s": round(read, 3),
        "ledger: saved s": round(saved, 3),
        "ledger: KB on disk": round(sum(p.stat().st_size for p in store.iterdir()) / 1e3, 1),
        "ledger: loaded by a new process s": round(loaded, 3),
        "ledger: cues from it s": round(time.perf_counter() - started - loaded, 3),
        "ledger: lines": len(state.lines),
    }


def corpus_ledgers(folder: Path) -> dict[str, Any]:
    """The saved cue ledgers of every session of a corpus (``folder/sessions``; only read), and of those saved.

    Only ledgers of files from ``SAVED_FROM`` on are saved by the service and the child; the
    others' size says what saving every session would cost.
    """
    from pbot_watch.memory.cue_follow import SAVED_FROM, FollowedCues

    sessions = sorted((folder / "sessions").rglob("*.jsonl"))
    sizes = {path: path.stat().st_size for path in sessions}
    with tempfile.TemporaryDirectory() as temp:
        ledgers = FollowedCues(Path(temp), keep=1, saved_from=0)  # each one is saved as the next comes
        started = time.perf_counter()
        for path in sessions:
            ledgers.ledger(path)
        ledgers.save_all()
        took = time.perf_counter() - started
        saved = {
            path: file.stat().st_size for path in sessions if (file := ledgers.saved_file(path)) is not None
        }
    big = [path for path in sessions if sizes[path] >= SAVED_FROM]
    session_bytes = sum(sizes.values())
    return {
        "sessions": len(sessions),
        "session MB": round(session_bytes / 1e6, 1),
        "read and saved in s": round(took, 1),
        "ledger MB, every session": round(sum(saved.values()) / 1e6, 2),
        "ledger bytes / session bytes": round(sum(saved.values()) / session_bytes, 4),
        f"sessions from {SAVED_FROM >> 20} MB (saved)": len(big),
        "ledger MB saved": round(sum(saved[path] for path in big) / 1e6, 2),
    }


# ---- what the block costs, on a session the real Pi wrote ------------------------------------

BLOCKS = """
import inspect, json, sys
from pbot_watch.memory.cues import compute_cues
from pbot_watch.pi.entries import SessionReader
path, windows = sys.argv[1], json.loads(sys.argv[2])
reader = SessionReader()
entries = reader.feed(open(path, "rb").read())
extra = {"cwd": reader.header.workspace} if "cwd" in inspect.signature(compute_cues).parameters else {}
compactions = [e for e in entries if e.get("type") == "compaction"]
out = []
for window in windows:
    for n, compaction in enumerate(compactions, 1):
        state = compute_cues(entries, session_id=reader.header.id, leaf=compaction["id"], context_window=window, **extra)
        out.append({"window": window, "batch": n, "summary": compaction.get("summary") or "", "text": state.text,
                    "lines": [[x.text, x.cue_class, x.stage, x.batch] for x in state.lines]})
print(json.dumps(out))
"""
"""Run with the code to measure first on ``sys.path``: the blocks of each compaction, as JSON."""


def blocks_with(code: Path | None, session: Path, windows: list[int]) -> list[dict[str, Any]]:
    """The cue blocks of ``session`` computed by the code in ``code`` (default: this checkout)."""
    import os
    import subprocess
    import sys

    root = code or Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    # Run outside any checkout, so that the folder on PYTHONPATH is the code measured.
    done = subprocess.run(
        [sys.executable, "-c", BLOCKS, str(session.resolve()), json.dumps(windows)],
        capture_output=True, text=True, check=True, env=env, cwd=tempfile.gettempdir(),
    )  # fmt: skip
    return list(json.loads(done.stdout))


def _failure_named(line: str) -> bool:
    """A full failure line names its call and says what went wrong after the mark."""
    call, _, rest = line.partition("(")
    outcome = rest.split("✗", 1)[1] if "✗" in rest else ""
    said = outcome.rsplit(" [", 1)[0].strip(" →")
    return bool(call.split()[-1]) and len(said.split()) >= 2


def cost(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per block: tokens (tokenizer and Pi's), lines, tokens per line and of handles, ÷ summary."""
    from pbot_watch.memory.cue_tokens import count_tokens, pi_estimate

    rows = []
    widest = max(b["window"] for b in blocks)
    all_failures = {
        b["batch"]: sum(1 for _t, c, _s, n in b["lines"] if c == "failure" and n == b["batch"])
        for b in blocks
        if b["window"] == widest
    }
    for block in blocks:
        lines = [x[0] for x in block["lines"]]
        counted = count_tokens(
            [block["text"], block["summary"], *lines, *(x.rsplit(" ", 1)[0] for x in lines)]
        )
        tokens, summary = counted[0], counted[1]
        per_line = counted[2 : 2 + len(lines)]
        handles = sum(a - b for a, b in zip(per_line, counted[2 + len(lines) :], strict=True))
        newest = [x for x in block["lines"] if x[1] == "failure" and x[3] == block["batch"]]
        rows.append(
            {
                "window": block["window"],
                "batch": block["batch"],
                "lines": len(lines),
                "tokens": tokens,
                "pi tokens": pi_estimate(block["text"]),
                "chars": len(block["text"]),
                "tokens/line": round(sum(per_line) / len(lines), 1) if lines else 0,
                "handle tokens": handles,
                "summary tokens": summary,
                "block/summary": round(tokens / summary, 2) if summary else None,
                "newest failures": f"{sum(1 for x in newest if x[2] == 'full' and _failure_named(x[0]))}"
                f"/{all_failures.get(block['batch'], len(newest))}",
            }
        )
    return rows


def pi_session_report(session: Path, windows: list[int], before: Path | None) -> dict[str, Any]:
    """The cost of each block after the code here, and before it with ``before``'s code."""
    report: dict[str, Any] = {"after": cost(blocks_with(None, session, windows))}
    if before is not None:
        report["before"] = cost(blocks_with(before, session, windows))
    return report


def print_pi_report(report: dict[str, Any]) -> None:
    from pbot_watch.memory.cue_tokens import counter_name

    print(f"tokens: {counter_name()}; pi tokens: characters / 4")
    keys = list(report["after"][0])
    for name in ("before", "after"):
        if name not in report:
            continue
        print(f"\n{name}:")
        print("  ".join(f"{k:>14}" for k in keys))
        for row in report[name]:
            print("  ".join(f"{row[k]!s:>14}" for k in keys))
    if "before" in report:
        print("\nafter / before, tokens (tokenizer) and pi tokens:")
        for old, new in zip(report["before"], report["after"], strict=True):
            ratio = new["tokens"] / old["tokens"] if old["tokens"] else 0
            pi_ratio = new["pi tokens"] / old["pi tokens"] if old["pi tokens"] else 0
            print(
                f"  window {new['window']:>7} batch {new['batch']}: {old['tokens']:>6} -> {new['tokens']:>6} "
                f"tokens ({1 - ratio:.0%} fewer), {old['pi tokens']:>6} -> {new['pi tokens']:>6} by chars/4 "
                f"({1 - pi_ratio:.0%} fewer)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--pi-session", type=Path, help="measure the cost of the blocks of this session instead"
    )
    parser.add_argument("--before", type=Path, help="with --pi-session: also with the code in this folder")
    parser.add_argument(
        "--window", type=int, action="append", help="context windows (default 200000, 128000, 32000)"
    )
    parser.add_argument("--size-mb", type=float, default=20)
    parser.add_argument("--batch-kb", type=int, default=500, help="session bytes between compactions")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--corpus", type=Path, help="the saved cue ledgers' size for every session of this corpus instead"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.corpus is not None:
        figures = corpus_ledgers(args.corpus)
        print(json.dumps(figures, indent=None if args.json else 2))
        return
    if args.pi_session is not None:
        report = pi_session_report(args.pi_session, args.window or [200_000, 128_000, 32_000], args.before)
        print(json.dumps(report)) if args.json else print_pi_report(report)
        return
    figures = measure(args.size_mb, args.batch_kb, args.repeat)
    if args.json:
        print(json.dumps(figures))
        return
    shape = figures["session"]
    print(
        f"session: {shape['MB']} MB, {shape['entries']} entries, {shape['tool events']} tool events, "
        f"{shape['compactions']} compactions"
    )
    print(
        f"parse {figures['parse s']} s + cues {figures['cues s']} s = {figures['total s']} s (best of {args.repeat})"
    )
    print(f"cue state: batch {figures['batch']}, {figures['lines']} lines, ~{figures['block tokens']} tokens")
    for name, value in figures.items():
        if name.startswith("ledger: "):
            print(f"{name}: {value}")


if __name__ == "__main__":
    main()
