"""LoCoMo evidence recall of ``pbot-watch search --match terms``.

Converts LoCoMo conversations (default: ``../shared/data/locomo/locomo-dev.json`` beside the
repository, or ``--data FILE`` of the same format) into Pi session files — one session per
LoCoMo session, its date kept in the entry timestamps, the speaker who opens the session as
the user and the other as the assistant, each turn's text prefixed with its speaker's name (a
shared photo's caption kept as ``[shares a photo: ...]``). Consecutive turns of one speaker
become one message, so every turn lands in an exchange. Then ``pbot-watch index`` writes the
archive, the search index is built from it, and every question is searched with
``--match terms`` inside its own conversation (the conversation is the workspace).

Scoring is per turn, to compare with a plain BM25 over single turns: hits are exchanges, in
rank order; each hit contributes its turns, the turns sharing more query words first; the
first k distinct turns are the top k. recall@k is the share of a question's evidence turns
among them, averaged over questions. Answers are never looked at.

Beside it, the exchange measure (the one ranking changes are judged by, so figures compare
across versions): for every question of categories 1-4 (5, adversarial, has no evidence to
find), keep the first 10 *exchange* hits of ``search --match terms`` (nodes ``…:0:<entryId>``;
a summary hit counts only where the search itself turned it into exchanges), and count the
share of the question's evidence turns those exchanges contain; averaged over questions,
overall, per category and per conversation, beside a naive BM25 (FTS5's default tokenizer over
the same exchanges' texts, the question's words OR-ed). It is printed as ``exchanges@10`` rows
and an ``exchange recall@10`` line; ``--ablation`` adds the measure with each signal off in turn.

The last line is ``recall@5 0.xxx recall@10 0.xxx``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pbot_watch.search.index import RecordFolder, SearchIndex  # noqa: E402
from pbot_watch.search.queries import read_node, search_history  # noqa: E402
from pbot_watch.search.ranking import DEFAULT_RANKING, Ranking  # noqa: E402
from pbot_watch.search.terms import TermRules  # noqa: E402
from pbot_watch.search.tokens import query_terms, tokens  # noqa: E402
from pbot_watch.search.when import MONTHS  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
NAMESPACE = uuid.UUID("0c0c0c0c-1111-4222-8333-444455556666")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
HITS = 20
"""Exchanges read per question: enough to fill 10 turns even when hits overlap."""
EXCHANGE_HITS = 10
"""The exchange measure keeps this many exchange hits."""
SEARCH_PAGE = 50
"""Hits read for the exchange measure: summaries in between must not push exchanges off the page."""
SCORED_CATEGORIES = (1, 2, 3, 4)
"""Categories the exchange measure averages over; 5 (adversarial) has no evidence to find."""

_DATE = re.compile(r"(\d{1,2}):(\d{2})\s*(am|pm)\s+on\s+(\d{1,2})\s+(\w+),?\s+(\d{4})", re.IGNORECASE)
_MONTHS = {m: i for i, m in enumerate(MONTHS, 1)}


def session_start(text: str) -> datetime:
    """``1:56 pm on 8 May, 2023`` -> a UTC datetime (LoCoMo gives no zone)."""
    match = _DATE.search(text or "")
    if match is None:
        return datetime(2023, 1, 1, tzinfo=UTC)
    hour, minute, half, day, month, year = match.groups()
    h = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    return datetime(int(year), _MONTHS.get(month.lower(), 1), int(day), h, int(minute), tzinfo=UTC)


def turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {turn.get('text', '')}"
    caption = turn.get("blip_caption")
    if caption:
        text += f" [shares a photo: {caption}]"
    return text


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def write_sessions(data: list[dict[str, Any]], root: Path) -> dict[str, list[str]]:
    """Write Pi session files; return entry id -> LoCoMo dia_ids it holds."""
    entries: dict[str, list[str]] = {}
    for conversation in data:
        sample = conversation["sample_id"]
        conv = conversation["conversation"]
        numbers = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
        for n in numbers:
            turns = conv.get(f"session_{n}") or []
            if not turns:
                continue
            start = session_start(conv.get(f"session_{n}_date_time", ""))
            session_id = str(uuid.uuid5(NAMESPACE, f"{sample}/{n}"))
            user = turns[0]["speaker"]
            lines = [
                {
                    "type": "session",
                    "version": 3,
                    "id": session_id,
                    "timestamp": stamp(start),
                    "cwd": f"/locomo/{sample}",
                }
            ]
            parent = f"{sample}-{n}-info"
            lines.append(
                {
                    "type": "session_info",
                    "id": parent,
                    "parentId": None,
                    "timestamp": stamp(start),
                    "name": f"{sample} session {n} ({conv.get(f'session_{n}_date_time', '')})",
                }
            )
            # Consecutive turns of one speaker are one message: no turn falls outside an exchange.
            groups: list[list[dict[str, Any]]] = []
            for turn in turns:
                if groups and groups[-1][0]["speaker"] == turn["speaker"]:
                    groups[-1].append(turn)
                else:
                    groups.append([turn])
            for i, group in enumerate(groups):
                entry_id = f"{sample}-{n}-{i}"
                entries[entry_id] = [t["dia_id"] for t in group]
                text = "\n".join(turn_text(t) for t in group)
                when = stamp(start + timedelta(minutes=i))
                if group[0]["speaker"] == user:
                    message: dict[str, Any] = {"role": "user", "content": [{"type": "text", "text": text}]}
                else:
                    message = {
                        "role": "assistant",
                        "content": [{"type": "text", "text": text}],
                        "stopReason": "stop",
                    }
                lines.append(
                    {
                        "type": "message",
                        "id": entry_id,
                        "parentId": parent,
                        "timestamp": when,
                        "message": message,
                    }
                )
                parent = entry_id
            path = root / sample / f"{n:03d}_{session_id}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(
                "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8"
            )
    return entries


def turns_texts(data: list[dict[str, Any]]) -> dict[str, str]:
    out = {}
    for conversation in data:
        for key, value in conversation["conversation"].items():
            if re.fullmatch(r"session_\d+", key) and isinstance(value, list):
                for turn in value:
                    out[f"{conversation['sample_id']}/{turn['dia_id']}"] = turn_text(turn)
    return out


def ranked_turns(
    hits: list[Any], entries: dict[str, list[str]], texts: dict[str, str], sample: str, query: str
) -> list[str]:
    """Turns in rank order: hit by hit, the turns sharing more query words first."""
    wanted = set(query_terms(query))
    out: list[str] = []
    seen: set[str] = set()
    for hit in hits:
        turns = [d for entry in hit.source_entries for d in entries.get(entry, [])]
        scored = []
        for position, dia in enumerate(turns):
            shared = len(wanted & set(tokens(texts.get(f"{sample}/{dia}", ""))))
            scored.append((-shared, position, dia))
        for _, _, dia in sorted(scored):
            if dia not in seen:
                seen.add(dia)
                out.append(dia)
    return out


def exchange_turns(
    index: SearchIndex,
    question: str,
    sample: str,
    entries: dict[str, list[str]],
    ranking: Ranking = DEFAULT_RANKING,
    now: datetime | None = None,
) -> set[str]:
    """The turns held by the first ``EXCHANGE_HITS`` exchange hits of a terms search."""
    result = search_history(
        index,
        question,
        match="terms",
        workspace=f"/locomo/{sample}",
        limit=SEARCH_PAGE,
        ranking=ranking,
        now=now,
    )
    exchanges = [m for m in result.matches if m.kind == "exchange"][:EXCHANGE_HITS]
    found: set[str] = set()
    for match in exchanges:
        for entry in read_node(index, match.id, limit=1).source.entry_ids:
            found.update(entries.get(entry, []))
    return found


def asked_at(conversation: dict[str, Any]) -> datetime:
    """When the questions are asked: the day after the conversation's last session.

    Relative times in a question ("last year") then mean what they meant to the speakers.
    """
    conv = conversation["conversation"]
    dates = [session_start(v) for k, v in conv.items() if re.fullmatch(r"session_\d+_date_time", k)]
    return max(dates, default=datetime(2023, 1, 1, tzinfo=UTC)) + timedelta(days=1)


def questions(
    data: list[dict[str, Any]], texts: dict[str, str], *, scored_only: bool = False
) -> Iterator[tuple[dict[str, Any], str, dict[str, Any], set[str]]]:
    """Each question whose evidence turns are in ``texts``: its conversation, sample id, the
    question and those turns. One with none is not asked: no search could find its answer.
    ``scored_only``: the exchange measure's categories only (``SCORED_CATEGORIES``).
    """
    for conversation in data:
        sample = conversation["sample_id"]
        for qa in conversation["qa"]:
            if scored_only and qa.get("category") not in SCORED_CATEGORIES:
                continue
            evidence = {e.strip() for e in qa.get("evidence", []) if isinstance(e, str)}
            evidence = {e for e in evidence if f"{sample}/{e}" in texts}
            if evidence:
                yield conversation, sample, qa, evidence


def exchange_measure(
    index: SearchIndex,
    data: list[dict[str, Any]],
    entries: dict[str, list[str]],
    texts: dict[str, str],
    ranking: Ranking = DEFAULT_RANKING,
) -> dict[str, list[float]]:
    """The exchange measure's per-question values, under ``all`` and each category's label."""
    totals: dict[str, list[float]] = defaultdict(list)
    for conversation, sample, qa, evidence in questions(data, texts, scored_only=True):
        now = asked_at(conversation)
        found = exchange_turns(index, str(qa["question"]), sample, entries, ranking, now)
        value = len(evidence & found) / len(evidence)
        totals["all"].append(value)
        totals[CATEGORIES[qa["category"]]].append(value)
        totals[sample].append(value)
    return totals


def plain_bm25_exchanges(
    index: SearchIndex, data: list[dict[str, Any]], entries: dict[str, list[str]], texts: dict[str, str]
) -> dict[str, list[float]]:
    """The exchange measure's reference point: naive BM25 over the same exchanges' texts.

    FTS5's default tokenizer (no stems, no stop words), one row per exchange as the archive
    cut it, the question's words OR-ed, the first ``EXCHANGE_HITS`` in the question's
    conversation; scored exactly as ``exchange_measure`` scores ``terms`` search.
    """
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE exchanges USING fts5(workspace UNINDEXED, entry_ids UNINDEXED, body)")
    conn.executemany(
        "INSERT INTO exchanges(workspace, entry_ids, body) VALUES (?, ?, ?)",
        index.conn.execute(
            "SELECT r.workspace, n.entry_ids, node_text(t.text, t.packed) FROM nodes n JOIN records r ON r.rowid = n.record "
            "JOIN node_texts t ON t.rowid = n.rowid WHERE n.level = 0 AND n.searchable"
        ).fetchall(),
    )
    totals: dict[str, list[float]] = defaultdict(list)
    for _conversation, sample, qa, evidence in questions(data, texts, scored_only=True):
        words = re.findall(r"\w+", str(qa["question"]).lower())
        found: set[str] = set()
        if words:
            query = " OR ".join(f'"{w}"' for w in dict.fromkeys(words))
            for (entry_ids,) in conn.execute(
                "SELECT entry_ids FROM exchanges WHERE exchanges MATCH ? AND workspace = ? "
                "ORDER BY bm25(exchanges) LIMIT ?",
                (query, f"/locomo/{sample}", EXCHANGE_HITS),
            ):
                for entry in json.loads(entry_ids):
                    found.update(entries.get(entry, []))
        value = len(evidence & found) / len(evidence)
        totals["all"].append(value)
        totals[CATEGORIES[qa["category"]]].append(value)
        totals[sample].append(value)
    return totals


ABLATION: dict[str, Ranking | TermRules] = {
    "no stemming": TermRules(stemming=False),
    "no stop words": TermRules(stop_words=False),
    "no sides": TermRules(sides=False),
    "no summary lift": Ranking(summary_lift=0.0),
    "no neighbours": Ranking(neighbours=0.0),
    "no session name": Ranking(session_name=0.0),
    "no time match": Ranking(time_match=0.0),
    "no when/time words": Ranking(when_mentions=0.0),
    "no expansion": Ranking(expansion=0.0),
    "BM25 only": Ranking(
        summary_lift=0.0, neighbours=0.0, session_name=0.0, time_match=0.0, when_mentions=0.0, expansion=0.0
    ),
}
"""Each ranking signal off in turn (term rules need their own index)."""


def summary_line(name: str, totals: dict[str, list[float]], reference: float | None = None) -> str:
    def mean(key: str) -> float:
        values = totals[key]
        return sum(values) / len(values) if values else 0.0

    delta = f" ({mean('all') - reference:+.3f})" if reference is not None else ""
    parts = " ".join(f"{label} {mean(label):.3f}" for label in list(CATEGORIES.values())[:4])
    return f"{name:22} {mean('all'):.3f}{delta:9} {parts}"


class Hit:
    def __init__(self, entry_ids: list[str]) -> None:
        self.source_entries = entry_ids


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON (a list of conversations)"
    )
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    parser.add_argument("--baseline", action="store_true", help="also score a plain BM25 over single turns")
    parser.add_argument(
        "--ablation", action="store_true", help="also the exchange measure with each signal off"
    )
    parser.add_argument(
        "--summaries", action="store_true", help="summarize (offline, no model) before searching"
    )
    parser.add_argument("--only", help="comma-separated sample ids to keep (e.g. a tuning split)")
    args = parser.parse_args()
    data = json.loads(args.data.read_text(encoding="utf-8"))
    if args.only:
        keep = set(args.only.split(","))
        data = [c for c in data if c["sample_id"] in keep]
    work = args.keep or Path(tempfile.mkdtemp(prefix="pbot-locomo-"))
    sessions, archive, state = work / "sessions", work / "archive", work / "state"
    entries = write_sessions(data, sessions)
    texts = turns_texts(data)
    env = {**os.environ, "XDG_STATE_HOME": str(state), "XDG_CONFIG_HOME": str(work / "config")}
    pbot = Path(sys.executable).with_name("pbot-watch")
    command = [str(pbot)] if pbot.exists() else [sys.executable, "-m", "pbot_watch"]

    def pbot_watch(step: str) -> str:
        """``pbot-watch STEP`` on the converted sessions; its last output line (exits on failure)."""
        done = subprocess.run(
            [*command, step, "--sessions", str(sessions), "--archive", str(archive)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if done.returncode != 0:
            sys.exit(f"pbot-watch {step} failed: {done.stderr.strip()}")
        lines = done.stdout.strip().splitlines()
        return lines[-1] if lines else ""

    print(f"indexed: {pbot_watch('index')}")
    if args.summaries:
        print(f"summarized: {pbot_watch('summarize')}")

    index = SearchIndex(work / "search.db")
    index.update_from_archive([RecordFolder(archive, None)])
    totals: dict[str, list[float]] = defaultdict(list)
    for _conversation, sample, qa, evidence in questions(data, texts):
        question = str(qa["question"])
        result = search_history(index, question, match="terms", workspace=f"/locomo/{sample}", limit=HITS)
        hits = [Hit(read_node(index, m.id, limit=1).source.entry_ids) for m in result.matches]
        ranked = ranked_turns(hits, entries, texts, sample, question)
        label = CATEGORIES.get(qa.get("category"), str(qa.get("category")))
        for k in (5, 10):
            value = len(evidence & set(ranked[:k])) / len(evidence)
            totals[f"all@{k}"].append(value)
            totals[f"{label}@{k}"].append(value)
    exchanges = exchange_measure(index, data, entries, texts)
    naive = plain_bm25_exchanges(index, data, entries, texts)
    ablations: dict[str, dict[str, list[float]]] = {}
    if args.ablation:
        for name, variant in ABLATION.items():
            if isinstance(variant, TermRules):
                with SearchIndex(work / f"search-{variant.key.replace(' ', '-')}.db", variant) as other:
                    other.update_from_archive([RecordFolder(archive, None)])
                    ablations[name] = exchange_measure(other, data, entries, texts)
            else:
                ablations[name] = exchange_measure(index, data, entries, texts, variant)
    index.close()
    if args.baseline:
        for k, value in plain_bm25(data, texts).items():
            print(f"baseline: plain BM25 over single turns recall@{k} {value:.3f}")

    def mean(key: str) -> float:
        values = totals[key]
        return sum(values) / len(values) if values else 0.0

    print(f"{'category':12} {'questions':>9} {'recall@5':>9} {'recall@10':>10}")
    for label in [*CATEGORIES.values(), "all"]:
        if totals[f"{label}@5"]:
            print(
                f"{label:12} {len(totals[f'{label}@5']):9d} {mean(f'{label}@5'):9.3f} {mean(f'{label}@10'):10.3f}"
            )
    print(f"\n{'exchanges@10':12} {'questions':>9} {'terms':>7} {'naive BM25':>11}")
    samples = [c["sample_id"] for c in data]
    for label in [*list(CATEGORIES.values())[:4], "all", *samples]:
        if exchanges[label]:
            ours = sum(exchanges[label]) / len(exchanges[label])
            plain = sum(naive[label]) / max(1, len(naive[label]))
            print(f"{label:12} {len(exchanges[label]):9d} {ours:7.3f} {plain:11.3f}")
    if ablations:
        reference = sum(exchanges["all"]) / len(exchanges["all"])
        print("\nablation (exchange recall@10, change against all signals on, per category)")
        print(summary_line("all signals", exchanges))
        for name, values in ablations.items():
            print(summary_line(name, values, reference))
    print(f"exchange recall@10 {sum(exchanges['all']) / max(1, len(exchanges['all'])):.3f}")
    print(f"recall@5 {mean('all@5'):.3f} recall@10 {mean('all@10'):.3f}")


def plain_bm25(data: list[dict[str, Any]], texts: dict[str, str]) -> dict[int, float]:
    """The reference point: FTS5's default tokenizer and BM25, one row per turn, the question's words OR-ed."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE turns USING fts5(sample UNINDEXED, dia UNINDEXED, body)")
    conn.executemany(
        "INSERT INTO turns(sample, dia, body) VALUES (?, ?, ?)",
        [(key.split("/", 1)[0], key.split("/", 1)[1], text) for key, text in texts.items()],
    )
    scores: dict[int, list[float]] = {5: [], 10: []}
    for _conversation, sample, qa, evidence in questions(data, texts):
        words = re.findall(r"\w+", str(qa["question"]).lower())
        if not words:
            continue
        query = " OR ".join(f'"{w}"' for w in dict.fromkeys(words))
        ranked = [
            d
            for (d,) in conn.execute(
                "SELECT dia FROM turns WHERE turns MATCH ? AND sample = ? ORDER BY bm25(turns) LIMIT 10",
                (query, sample),
            )
        ]
        for k, found in scores.items():
            found.append(len(evidence & set(ranked[:k])) / len(evidence))
    return {k: sum(v) / len(v) for k, v in scores.items() if v}


if __name__ == "__main__":
    main()
