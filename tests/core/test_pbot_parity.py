"""Our records against personal-bot 0.2.3's own code, run on Pi 1.6.0 (see ``pbot_oracle``).

These tests are the proof of "exactly as pbot": the same input bytes go to pbot's
``projectHistory``/``indexHistory`` and to ours, and the records must serialise identically,
key order included. Where pbot fails (no timestamp among several roots) we must still write.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings

from pbot_watch.history.nodes import index_history
from pbot_watch.history.project import SessionFile
from tests.core.pbot_oracle import Oracle
from tests.e2e.pi_install import PiInstall
from tests.support.paths import FIXTURES
from tests.support.pi_sessions import PiSession, has_cycle, session_builders

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

RECORD_ID = "6c0d1f7e-3b7a-4f7e-9a51-1d0c2b3a4e5f"
PARITY = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def oracle(pi_install: PiInstall) -> Iterator[Oracle]:
    pbot = Oracle(pi_install)
    yield pbot
    pbot.close()


def ours(data: bytes, previous: dict[str, Any] | None = None) -> dict[str, Any] | None:
    state = SessionFile()
    state.feed(data)
    history = state.history()
    if history is None:
        return None
    base = previous or {"id": RECORD_ID, "sessionId": history.session_id, "name": "", "nodes": []}
    return index_history(history, base)


def text(record: dict[str, Any] | None) -> str:
    return json.dumps(record, ensure_ascii=False)


def remap_entry_ids(mine: dict[str, Any], theirs: dict[str, Any]) -> str:
    """Our JSON with our deterministic v1 entry ids replaced by Pi's random ones, in order."""
    serial = text(mine)
    ids_mine = [i for n in mine["nodes"] if n["level"] == 0 for i in n["entryIds"]]
    ids_theirs = [i for n in theirs["nodes"] if n["level"] == 0 for i in n["entryIds"]]
    assert len(ids_mine) == len(ids_theirs)
    for a, b in zip(ids_mine, ids_theirs, strict=True):
        serial = serial.replace(a, b)
    return serial


def fill_missing_times(record: dict[str, Any]) -> dict[str, Any]:
    """pbot leaves ``from``/``to`` out of a node whose entry has no timestamp; we write ""."""
    nodes = []
    for node in record["nodes"]:
        if node["kind"] == "session":
            nodes.append(node)
            continue
        order = (
            ("entryIds", "from", "to", "completed", "text")
            if node["kind"] == "exchange"
            else ("entryIds", "text", "from", "to", "completed")
        )
        filled = {key: node.get(key, "") for key in order}
        filled.update((k, v) for k, v in node.items() if k not in filled)
        nodes.append(filled)
    return {**record, "nodes": nodes}


class TestRealFixtures:
    @pytest.mark.parametrize("path", sorted(FIXTURES.rglob("*.jsonl")), ids=lambda p: p.name)
    def test_record_equals_pbot(self, oracle: Oracle, path: Path) -> None:
        """Every real Pi file gives pbot's record byte for byte (v1 files up to Pi's random ids)."""
        data = path.read_bytes()
        expected = oracle.record(data, RECORD_ID)
        actual = ours(data)
        if "error" in expected:
            # pbot refuses files without a session header; so do we.
            assert actual is None
            return
        if expected["record"] is None or actual is None:
            assert expected["record"] is None and actual is None
            return
        if b'"version"' not in data.split(b"\n", 1)[0]:
            assert text(expected["record"]) == remap_entry_ids(actual, expected["record"])
        else:
            assert text(expected["record"]) == text(actual)


class TestGeneratedTrees:
    @PARITY
    @given(builder=session_builders(max_entries=60, odd=True))
    def test_any_tree_equals_pbot(self, oracle: Oracle, builder: PiSession) -> None:
        """Branches, roots, orphans, duplicate ids, odd ids and odd text blocks: pbot's record exactly."""
        assume(not has_cycle(builder.entries))
        data = builder.data()
        expected = oracle.record(data, RECORD_ID)
        assert "error" not in expected
        assert text(expected["record"]) == text(ours(data))

    @PARITY
    @given(builder=session_builders(max_entries=30, untimed=True))
    def test_missing_timestamps_match_where_pbot_writes(self, oracle: Oracle, builder: PiSession) -> None:
        """Without timestamps we match pbot's record where it writes one, and still write where it fails."""
        assume(not has_cycle(builder.entries))
        data = builder.data()
        expected = oracle.record(data, RECORD_ID)
        actual = ours(data)
        if "error" in expected:
            assert actual is not None
        elif expected["record"] is None:
            assert actual is None
        else:
            assert text(fill_missing_times(expected["record"])) == text(actual)

    def test_hundreds_of_exchanges_with_branches(self, oracle: Oracle) -> None:
        """Three levels of summaries over two branches sharing a long prefix match pbot."""
        builder = PiSession()
        for i in range(150):
            builder.turn(f"question {i}", f"answer {i}")
        fork = builder.leaf
        for i in range(90):
            builder.turn(f"left {i}", f"left answer {i}")
        builder.leaf = fork
        for i in range(70):
            builder.turn(f"right {i}", f"right answer {i}")
        data = builder.data()
        actual = ours(data)
        assert actual is not None
        assert max(n["level"] for n in actual["nodes"]) == 3
        assert text(oracle.record(data, RECORD_ID)["record"]) == text(actual)

    @pytest.mark.parametrize("prefix", ["", "a", "ab", "abc"])
    def test_name_fallback_cut_matches_pbot(self, oracle: Oracle, prefix: str) -> None:
        """The 80-unit cut through emoji (surrogate pairs) and whitespace runs matches pbot."""
        builder = PiSession()
        builder.turn(prefix + "😀 \t\n  " * 30)
        data = builder.data()
        assert text(oracle.record(data, RECORD_ID)["record"]) == text(ours(data))


class TestReuse:
    @PARITY
    @given(builder=session_builders(max_entries=120, orphans=False, duplicates=False))
    def test_grown_file_reuses_like_pbot(self, oracle: Oracle, builder: PiSession) -> None:
        """A record written for a prefix, summaries then filled in, re-indexed on the grown file: as pbot."""
        lines = builder.data().splitlines(keepends=True)
        cut = max(1, len(lines) * 2 // 3)
        first = ours(b"".join(lines[:cut]))
        assume(first is not None)
        assert first is not None
        for node in first["nodes"]:
            if node["kind"] == "summary" and zlib.crc32(node["id"].encode()) % 3:
                node["text"], node["ready"] = f"summary of {node['id']}", True
        data = b"".join(lines)
        expected = oracle.record(data, RECORD_ID, previous=first)
        assert text(expected["record"]) == text(ours(data, previous=json.loads(text(first))))
