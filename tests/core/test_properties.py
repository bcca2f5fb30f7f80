"""Properties over generated sessions (hypothesis): chunking, growth and the record round trip."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pbot_watch.archive.encode import RecordEncoder
from pbot_watch.archive.files import read_own_record
from pbot_watch.history.jstext import dumps, dumps_utf8
from pbot_watch.history.nodes import RecordIndexer, SessionHistory, index_history
from pbot_watch.history.project import SessionFile
from pbot_watch.history.record import HistoryRecord
from pbot_watch.history.tree import SessionTree
from pbot_watch.pi.entries import ID_MISSING, ID_NULL
from tests.core.test_nodes import fill_summaries
from tests.support.pi_sessions import PiSession, session_builders

RECORD_PATH = Path("rec.json")
"""Where the encoder keeps a record's pieces (a key: nothing is written there)."""
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def record(state: SessionFile, previous: dict[str, Any] | None = None) -> dict[str, Any] | None:
    history = state.history()
    if history is None:
        return None
    return index_history(history, previous or {"id": "rec", "nodes": []})


def fed(data: bytes, cuts: list[int]) -> SessionFile:
    state = SessionFile()
    start = 0
    for cut in sorted({c % (len(data) + 1) for c in cuts}):
        state.feed(data[start:cut])
        start = cut
    state.feed(data[start:])
    return state


def whole(data: bytes) -> SessionFile:
    state = SessionFile()
    state.feed(data)
    return state


class TestChunking:
    @SETTINGS
    @given(
        builder=session_builders(max_entries=50, odd=True),
        cuts=st.lists(st.integers(min_value=0), max_size=30),
    )
    def test_random_chunks_equal_whole_file(self, builder: PiSession, cuts: list[int]) -> None:
        """Bytes fed in random pieces (cut inside lines and UTF-8 characters) give the whole file's record."""
        data = builder.data()
        assert record(whole(data)) == record(fed(data, cuts))

    @SETTINGS
    @given(builder=session_builders(max_entries=40), cuts=st.lists(st.integers(min_value=0), max_size=20))
    def test_history_asked_between_chunks_changes_nothing(self, builder: PiSession, cuts: list[int]) -> None:
        """Asking for the history after every piece (as the watcher does) leaves the final record the same."""
        data = builder.data()
        state = SessionFile()
        start = 0
        for cut in sorted({c % (len(data) + 1) for c in cuts}):
            state.feed(data[start:cut])
            state.history()
            start = cut
        state.feed(data[start:])
        assert record(whole(data)) == record(state)

    @SETTINGS
    @given(builder=session_builders(max_entries=30), size=st.integers(min_value=1, max_value=7))
    def test_byte_by_byte_small_steps(self, builder: PiSession, size: int) -> None:
        """Even pieces of a few bytes give the same entries, malformed counts and record."""
        data = builder.data()
        state = SessionFile()
        for i in range(0, len(data), size):
            state.feed(data[i : i + size])
        reference = whole(data)
        assert (reference.reader.malformed, record(reference)) == (state.reader.malformed, record(state))


class TestGrowth:
    @SETTINGS
    @given(
        builder=session_builders(max_entries=80, orphans=False, duplicates=False), split=st.floats(0.1, 0.9)
    )
    def test_grown_file_keeps_ids_and_ready_summaries(self, builder: PiSession, split: float) -> None:
        """Appending keeps every node id of the prefix, and every ready summary whose children did not change."""
        lines = builder.data().splitlines(keepends=True)
        cut = max(1, int(len(lines) * split))
        state = SessionFile()
        state.feed(b"".join(lines[:cut]))
        first = record(state)
        assume(first is not None)
        assert first is not None
        for node in first["nodes"]:
            if node["kind"] == "summary":
                node.update(text="done " + node["id"], ready=True)
        state.feed(b"".join(lines[cut:]))
        second = record(state, previous=first)
        assert second is not None
        before = {n["id"]: n for n in first["nodes"]}
        after = {n["id"]: n for n in second["nodes"]}

        def unchanged(node_id: str) -> bool:
            old, new = before[node_id], after.get(node_id)
            if new is None or new["children"] != old["children"]:
                return False
            if old["kind"] == "exchange":
                return (old["text"], old["completed"]) == (new["text"], new["completed"])
            return all(unchanged(child) for child in old["children"])

        for node in first["nodes"]:
            if node["kind"] == "exchange" and node["completed"]:
                # a finished exchange never changes: its node id survives any append
                assert node["id"] in after
            if node["kind"] == "summary" and unchanged(node["id"]):
                assert (node["text"], True) == (after[node["id"]]["text"], after[node["id"]]["ready"])

    @SETTINGS
    @given(turns=st.integers(min_value=4, max_value=70), more=st.integers(min_value=1, max_value=40))
    def test_linear_growth_keeps_every_summary(self, turns: int, more: int) -> None:
        """On a linear session, every summary of the prefix survives growth, text and all."""
        b = PiSession()
        for i in range(turns):
            b.turn(f"q{i}", f"a{i}")
        first = record(whole(b.data()))
        assert first is not None
        for node in first["nodes"]:
            if node["kind"] == "summary":
                node.update(text="done", ready=True)
        for i in range(more):
            b.turn(f"later {i}")
        second = record(whole(b.data()), previous=first)
        assert second is not None
        after = {n["id"]: n for n in second["nodes"]}
        for node in first["nodes"]:
            if node["kind"] != "session":
                assert node["id"] in after
                assert (node["text"], node["ready"]) == (
                    after[node["id"]]["text"],
                    after[node["id"]]["ready"],
                )


class TestRoundTrip:
    @SETTINGS
    @given(builder=session_builders(max_entries=60, odd=True))
    def test_record_json_model_json_unchanged(self, builder: PiSession) -> None:
        """record -> JSON -> pydantic HistoryRecord -> JSON gives the same JSON (aliases and extras kept)."""
        built = record(whole(builder.data()))
        assume(built is not None)
        for node in built["nodes"] if built else []:
            if node["kind"] == "summary":
                node.update(text="s", ready=True, summarizer="offline")
        text = dumps(built)
        model = HistoryRecord.model_validate_json(text)
        assert json.loads(text) == json.loads(model.model_dump_json(by_alias=True))
        assert text == dumps(model.model_dump(by_alias=True, mode="json"))


# ---- the incremental record (history/nodes.py RecordIndexer) ------------------------------------
OPERATIONS = st.lists(
    st.sampled_from(("turn", "turn", "turn", "tool", "open", "tree", "compaction", "name", "aborted")),
    min_size=8,
    max_size=80,
)


def grown(operations: list[str], rng_picks: list[int]) -> tuple[bytes, list[int]]:
    """A session written by ``operations`` (turns, tool turns, ``/tree`` moves, compactions,
    renames), and the byte offsets after each one: where an append may end."""
    b = PiSession()
    offsets: list[int] = []
    answers: list[str] = []
    for n, operation in enumerate(operations):
        pick = rng_picks[n % len(rng_picks)] if rng_picks else 0
        if operation == "turn":
            answers.append(b.turn(f"q{n}", f"a{n}")[1])
        elif operation == "tool":
            b.user(f"run {n}")
            b.assistant("calling", "toolUse", tool=True)
            b.tool_result(f"out {n}")
            answers.append(b.assistant(f"done {n}"))
        elif operation == "open":
            b.user(f"still thinking {n}")
        elif operation == "aborted":
            b.user(f"stop {n}")
            b.assistant("half", "aborted")
        elif operation == "tree" and answers:
            target = answers[pick % len(answers)]
            b.branch_at(target)
            b.branch_summary(target)
        elif operation == "compaction" and answers:
            b.compaction(answers[pick % len(answers)])
        elif operation == "name":
            b.info(f"name {n}")
        offsets.append(len(b.data()))
    return b.data(), offsets


def histories_at(data: bytes, offsets: list[int], appends: list[int]) -> Iterator[tuple[int, SessionHistory]]:
    """``data`` fed to one ``SessionFile`` in appends ending at the picked ``offsets`` (and at its
    end): each step's number with the history it gives, once it gives one."""
    cuts = sorted({offsets[a % len(offsets)] for a in appends} | {len(data)})
    state = SessionFile()
    start = 0
    for step, cut in enumerate(cuts):
        state.feed(data[start:cut])
        start = cut
        history = state.history()
        if history is not None:
            yield step, history


def walked_tips(tree: SessionTree) -> list[str]:
    """pbot's tips by a walk over every entry: what ``SessionTree.tips`` keeps as entries arrive."""
    seen: dict[str, None] = {}
    for step in tree.steps:
        if step.id is not None:
            if not tree.parent_count[step.id]:
                seen.setdefault(step.id, None)
        elif tree.leaf is not None and (
            (step.links & ID_NULL and not tree.parent_null)
            or (step.links & ID_MISSING and not tree.parent_missing)
        ):
            seen.setdefault(tree.leaf, None)
    return list(seen)


class TestTips:
    @settings(SETTINGS, max_examples=200)
    @given(
        builder=session_builders(max_entries=60, odd=True),
        cuts=st.lists(st.integers(min_value=0), max_size=12),
    )
    def test_kept_tips_equal_a_walk_of_every_entry(self, builder: PiSession, cuts: list[int]) -> None:
        """Branches, orphans, duplicate ids, parents arriving late, entries without ids, grown a few
        lines at a time: the tips kept as entries arrive are those a walk of every entry finds."""
        lines = builder.data().splitlines(keepends=True)
        state = SessionFile()
        start = 0
        for cut in [*sorted({c % (len(lines) + 1) for c in cuts}), len(lines)]:
            state.feed(b"".join(lines[start:cut]))
            start = cut
            assert state.tree.tips() == walked_tips(state.tree)


class TestIncrementalRecord:
    @settings(SETTINGS, max_examples=200)
    @given(
        operations=OPERATIONS,
        picks=st.lists(st.integers(min_value=0, max_value=1000), max_size=20),
        appends=st.lists(st.integers(min_value=0), min_size=4, max_size=20),
        summarize=st.lists(st.booleans(), max_size=12),
    )
    def test_appends_equal_a_full_rebuild(
        self, operations: list[str], picks: list[int], appends: list[int], summarize: list[bool]
    ) -> None:
        """Fed appends of random size (turns, tool turns, /tree moves, compactions, renames), the
        indexer that keeps its last record gives at every step what ``index_history`` gives; a
        record changed by someone else (the summarizer) in between is indexed in full, and right."""
        indexer = RecordIndexer()
        previous: dict[str, Any] = {"id": "rec", "nodes": []}
        for step, history in histories_at(*grown(operations, picks), appends):
            if step < len(summarize) and summarize[step]:
                previous = fill_summaries(previous)
            expected = index_history(history, json.loads(json.dumps(previous)))
            previous = indexer.index(history, previous)
            assert json.dumps(expected) == json.dumps(previous)

    @settings(SETTINGS, max_examples=100)
    @given(
        operations=OPERATIONS,
        picks=st.lists(st.integers(min_value=0, max_value=1000), max_size=20),
        appends=st.lists(st.integers(min_value=0), min_size=4, max_size=20),
        restarts=st.lists(st.booleans(), min_size=1, max_size=12),
    )
    def test_a_restart_between_appends_writes_what_a_full_rebuild_writes(
        self, operations: list[str], picks: list[int], appends: list[int], restarts: list[bool]
    ) -> None:
        """Restarted between appends (a new indexer and encoder, the record read back from the
        bytes last written, its nodes' JSON cut out of them), the next record's bytes are those
        of a full rebuild's encoding, as they are without a restart."""
        indexer, encoder = RecordIndexer(), RecordEncoder()
        previous: dict[str, Any] = {"id": "rec", "nodes": []}
        written: bytes | None = None
        for step, history in histories_at(*grown(operations, picks), appends):
            read: dict[str, Any] | None = None
            read_json: list[bytes] | None = None
            if written is not None and restarts[step % len(restarts)]:
                indexer, encoder = RecordIndexer(), RecordEncoder()
                found = read_own_record(written)
                assert found is not None
                previous, read_json = found
                read = previous
            expected = index_history(history, json.loads(json.dumps(previous)))
            previous = indexer.index(history, previous)
            written = encoder.encode(RECORD_PATH, previous, read, read_json)
            assert written == dumps_utf8(expected) + b"\n"

    @SETTINGS
    @given(
        builder=session_builders(max_entries=60, odd=True),
        cuts=st.lists(st.integers(min_value=0), max_size=12),
    )
    def test_odd_files_grown_line_by_line_equal_a_full_rebuild(
        self, builder: PiSession, cuts: list[int]
    ) -> None:
        """Branches, new roots, orphans, duplicate ids and odd links, appended a few lines at a
        time: the kept trunk and last branch never give another record than a full rebuild."""
        lines = builder.data().splitlines(keepends=True)
        state = SessionFile()
        indexer = RecordIndexer()
        previous: dict[str, Any] = {"id": "rec", "nodes": []}
        start = 0
        for cut in [*sorted({c % (len(lines) + 1) for c in cuts}), len(lines)]:
            state.feed(b"".join(lines[start:cut]))
            start = cut
            history = state.history()
            if history is None:
                continue
            expected = index_history(history, json.loads(json.dumps(previous)))
            previous = indexer.index(history, previous)
            assert json.dumps(expected) == json.dumps(previous)

    def test_an_append_to_the_current_branch_keeps_the_rest(self) -> None:
        """The cheap path is taken: an append to the last branch keeps the trunk and the exchanges before it."""
        b = PiSession()
        answers = [b.turn(f"q{i}", f"a{i}")[1] for i in range(30)]
        b.branch_at(answers[10])
        for i in range(20):
            b.turn(f"r{i}", f"b{i}")
        state = SessionFile()
        state.feed(b.data())
        indexer = RecordIndexer()
        history = state.history()
        assert history is not None
        first = indexer.index(history, None)
        assert indexer.reused == -1
        size = len(b.data())
        b.turn("later", "yes")
        state.feed(b.data()[size:])
        history = state.history()
        assert history is not None
        second = indexer.index(history, first)
        assert indexer.reused == 20 + 11
        assert json.dumps(second) == json.dumps(index_history(history, json.loads(json.dumps(first))))
        kept = {id(n) for n in first["nodes"]}
        assert sum(id(n) in kept for n in second["nodes"]) > len(first["nodes"]) * 3 // 4


_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(st.characters(exclude_categories=())),  # lone surrogates too
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=30,
)


class TestRecordBytes:
    @SETTINGS
    @given(value=_JSON_VALUES)
    def test_fast_encoding_gives_json_dumps_bytes(self, value: Any) -> None:
        """Records are written through msgspec when they can be; the bytes are ``json.dumps``'s,
        lone surrogates escaped the way ``JSON.stringify`` escapes them, floats or not."""
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        expected = "".join(f"\\u{ord(ch):04x}" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text).encode()
        assert dumps_utf8(value) == expected
