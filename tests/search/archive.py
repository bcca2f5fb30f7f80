"""Real record files for search tests, and pbot's own search written out plainly as the oracle.

``write_record`` builds a record with the project's ``index_history`` (so node ids, summaries
and parents are what the indexer writes) and saves it as JSON where the index will find it.
``pbot_search`` is personal-bot 0.2.3's ``HistoryService.search`` line by line, scanning the
record files: the literal mode must give exactly its answer.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pbot_watch.history.jstext import collapse_whitespace, dumps, js_trim, locale_key, utf16_len, utf16_slice
from pbot_watch.history.nodes import SessionHistory, index_history
from pbot_watch.search.dates import parse_ms


def exchange(entry: str, text: str, from_: str, to: str | None = None) -> dict[str, Any]:
    return {
        "entryIds": [entry + "u", entry],
        "from": from_,
        "to": to or from_,
        "completed": True,
        "text": text,
    }


def write_record(
    folder: Path,
    session_id: str,
    name: str,
    branches: list[list[dict[str, Any]]],
    summaries: dict[int, str] | None = None,
    workspace: str | None = None,
) -> dict[str, Any]:
    """Write a record; ``summaries`` maps a level to the text its *first* summary gets (made ready).

    The other summaries stay pending (empty, not ready), as they are before the summarizer ran.
    """
    record = index_history(SessionHistory(session_id, name, branches))
    done: set[int] = set()
    for node in record["nodes"]:
        if (
            node["kind"] == "summary"
            and summaries
            and node["level"] in summaries
            and node["level"] not in done
        ):
            done.add(node["level"])
            node["text"] = f"{summaries[node['level']]} ({node['id']})"
            node["ready"] = True
    if workspace is not None:
        record["workspace"] = workspace
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{record['id']}.json").write_text(dumps(record) + "\n", encoding="utf-8")
    return record


def load_records(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]


def _brief(record: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": node["id"],
        "kind": node["kind"],
        "sessionId": record["sessionId"],
        "name": record["name"],
        "preview": utf16_slice(collapse_whitespace(node["text"]), 0, 100),
        "from": node["from"],
        "to": node["to"],
        "ready": node["ready"],
        "completed": node["completed"],
    }


def _js_index(haystack: str, needle: str) -> int:
    found = haystack.find(needle)
    return found if found <= 0 else utf16_len(haystack[:found])


def pbot_search(
    records: list[dict[str, Any]],
    query: str = "",
    session_id: str | None = None,
    from_: str | None = None,
    to: str | None = None,
    offset: int = 0,
    limit: int = 20,
) -> dict[str, Any]:
    needle = js_trim(query).lower()
    after = -math.inf if from_ is None else parse_ms(from_)
    before = math.inf if to is None else parse_ms(to)
    assert after is not None and before is not None and after <= before

    def within(node: dict[str, Any]) -> bool:
        t, f = parse_ms(node["to"]), parse_ms(node["from"])
        return t is not None and f is not None and t >= after and f <= before

    matches = []
    for record in records:
        if session_id and record["sessionId"] != session_id:
            continue
        for node in record["nodes"]:
            ok = (
                node["kind"] != "session" and node["ready"] and needle in node["text"].lower()
                if needle
                else node["kind"] == "session"
            )
            if ok and within(node):
                start = max(0, _js_index(node["text"].lower(), needle) - 80)
                matches.append(
                    {
                        **_brief(record, node),
                        "parents": node["parents"],
                        "snippet": utf16_slice(node["text"], start, start + 400),
                    }
                )
    matches.sort(key=lambda m: locale_key(m["id"]))
    matches.sort(key=lambda m: locale_key(m["to"]), reverse=True)
    page = matches[offset : offset + limit]
    return {
        "matches": page,
        "total": len(matches),
        "nextOffset": offset + limit if offset + limit < len(matches) else None,
    }
