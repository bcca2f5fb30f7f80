"""The 4-ary node tree and the summary reuse rule (``indexHistory``)."""

from __future__ import annotations

import json
from typing import Any

from pbot_watch.history.nodes import index_history, new_record_id
from pbot_watch.history.record import HistoryRecord
from tests.support.pi_sessions import MISSING, PiSession, history_of, record_of


def linear(count: int, builder: PiSession | None = None) -> PiSession:
    b = builder or PiSession()
    for i in range(count):
        b.turn(f"question {i}", f"answer {i}")
    return b


def by_id(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["id"]: n for n in record["nodes"]}


def fill_summaries(record: dict[str, Any]) -> dict[str, Any]:
    """What a summarizer does: every summary becomes ready with a text and an extra field."""
    copy = json.loads(json.dumps(record))
    for node in copy["nodes"]:
        if node["kind"] == "summary":
            node.update(text=f"summary {node['id']}", ready=True, summarizer="offline")
    return copy


class TestGrouping:
    def test_hundreds_of_exchanges_make_levels(self) -> None:
        """300 exchanges: 75 level-1, 18 level-2, 4 level-3 and 1 level-4 summaries."""
        record = record_of(linear(300).data())
        summaries = [n for n in record["nodes"] if n["kind"] == "summary"]
        levels = {level: sum(1 for n in summaries if n["level"] == level) for level in (1, 2, 3, 4)}
        assert {1: 75, 2: 18, 3: 4, 4: 1} == levels

    def test_node_ids_and_entry_ranges(self) -> None:
        """Node id is recordId:level:lastEntryId; a summary covers its first child's first entry to its last child's last."""
        b = PiSession()
        turns = [b.turn(f"q{i}") for i in range(4)]
        record = record_of(b.data())
        nodes = by_id(record)
        last = turns[-1][1]
        summary = nodes[f"rec:1:{last}"]
        assert [turns[0][0], last] == summary["entryIds"]
        assert [f"rec:0:{a}" for _, a in turns] == summary["children"]
        assert ("", False) == (summary["text"], summary["ready"])
        for _, a in turns:
            assert [f"rec:1:{last}"] == nodes[f"rec:0:{a}"]["parents"]

    def test_leftovers_hang_from_the_session(self) -> None:
        """Seven exchanges: one summary of four, and the three left over are top-level nodes."""
        b = PiSession()
        turns = [b.turn(f"q{i}") for i in range(7)]
        record = record_of(b.data())
        session = record["nodes"][-1]
        assert "session" == session["kind"] and "rec" == session["id"] and -1 == session["level"]
        assert [f"rec:1:{turns[3][1]}"] + [f"rec:0:{a}" for _, a in turns[4:]] == session["children"]

    def test_leftovers_at_every_level(self) -> None:
        """21 exchanges: 5 level-1 summaries; level 2 groups four, the fifth and the 21st exchange are top-level."""
        b = PiSession()
        turns = [b.turn(f"q{i}") for i in range(21)]
        record = record_of(b.data())
        session = record["nodes"][-1]
        assert [f"rec:2:{turns[15][1]}", f"rec:1:{turns[19][1]}", f"rec:0:{turns[20][1]}"] == session[
            "children"
        ]

    def test_session_node_fields(self) -> None:
        """The session node holds the name, the time span of all nodes and whether all are completed."""
        b = PiSession()
        b.turn("q1")
        b.user("unanswered")
        record = record_of(b.data())
        session = record["nodes"][-1]
        assert list(session) == [
            "id",
            "kind",
            "level",
            "entryIds",
            "text",
            "ready",
            "completed",
            "from",
            "to",
            "parents",
            "children",
        ]
        assert (False, True, []) == (session["completed"], session["ready"], session["entryIds"])
        assert session["from"] == record["nodes"][0]["from"]
        assert session["to"] == record["nodes"][1]["to"]

    def test_key_order_matches_pbot_object_literals(self) -> None:
        """Exchange and summary nodes keep pbot's key order, so pbot sees our records as unchanged."""
        record = record_of(linear(4).data())
        exchange = record["nodes"][0]
        summary = next(n for n in record["nodes"] if n["kind"] == "summary")
        tail = ["id", "kind", "level", "children", "parents", "ready"]
        assert ["entryIds", "from", "to", "completed", "text", *tail] == list(exchange)
        assert ["entryIds", "text", "from", "to", "completed", *tail] == list(summary)
        assert ["id", "sessionId", "name", "nodes"] == list(record)

    def test_branches_group_separately_and_share_prefix_nodes(self) -> None:
        """Two branches sharing 4 exchanges share their summary; their own exchanges never mix."""
        b = linear(4)
        fork = b.leaf
        left = [b.turn(f"left {i}") for i in range(4)]
        b.leaf = fork
        right = [b.turn(f"right {i}") for i in range(2)]
        record = record_of(b.data())
        nodes = by_id(record)
        shared = f"rec:1:{fork}"
        assert [f"rec:1:{left[-1][1]}"] == [
            n["id"] for n in nodes.values() if n["level"] == 1 and n["id"] != shared
        ]
        assert ["rec"] == nodes[shared]["parents"]
        session = record["nodes"][-1]
        assert [shared, f"rec:1:{left[-1][1]}", *(f"rec:0:{a}" for _, a in right)] == session["children"]

    def test_new_record_id_is_stable_per_session(self) -> None:
        """A session seen first by pbot-watch gets a UUID derived from its session id."""
        history = history_of(linear(1).data())
        assert index_history(history)["id"] == new_record_id(history.session_id)
        assert index_history(history)["id"] != new_record_id("another")

    def test_record_validates_against_the_contract_model(self) -> None:
        """Every record we build is a valid HistoryRecord."""
        HistoryRecord.model_validate(record_of(linear(9).data()))


class TestReuseRule:
    def test_previous_record_id_is_kept(self) -> None:
        """A record found for the session (pbot's random UUID) keeps its id in every node id."""
        history = history_of(linear(4).data())
        record = index_history(history, {"id": "0b6e3f43-random-pbot", "nodes": []})
        assert "0b6e3f43-random-pbot" == record["id"]
        assert all(n["id"].startswith("0b6e3f43-random-pbot") for n in record["nodes"])

    def test_ready_summary_kept_when_children_unchanged(self) -> None:
        """Appending to a session keeps the text, readiness and extra fields of finished summaries."""
        b = linear(5)
        first = fill_summaries(record_of(b.data()))
        linear(3, b)
        second = record_of(b.data(), previous=first)
        old = next(n for n in first["nodes"] if n["kind"] == "summary")
        new = by_id(second)[old["id"]]
        assert (old["text"], True, "offline") == (new["text"], new["ready"], new["summarizer"])

    def test_changed_child_makes_summary_pending(self) -> None:
        """A child whose text changed (a completed tail now answered) resets its summary to pending and empty."""
        b = linear(3)
        b.user("still open")
        first = fill_summaries(record_of(b.data()))
        summary_id = next(n["id"] for n in first["nodes"] if n["kind"] == "summary")
        b.assistant("now answered")
        second = record_of(b.data(), previous=first)
        # the open exchange's last entry was the user message; the answer gives it a new id
        assert summary_id not in by_id(second)
        new_summary = next(n for n in second["nodes"] if n["kind"] == "summary")
        assert ("", False) == (new_summary["text"], new_summary["ready"])
        assert "summarizer" not in new_summary

    def test_child_text_change_under_same_id_resets(self) -> None:
        """Same node ids, but one child's text differs (duplicate id rewrite): the summary is pending again."""
        b = linear(4)
        first = fill_summaries(record_of(b.data()))
        first["nodes"][1]["text"] = "edited elsewhere"
        second = record_of(b.data(), previous=first)
        summary = next(n for n in second["nodes"] if n["kind"] == "summary")
        assert ("", False) == (summary["text"], summary["ready"])

    def test_change_propagates_up_levels(self) -> None:
        """A changed exchange resets its level-1 summary and every summary above it."""
        b = linear(16)
        first = fill_summaries(record_of(b.data()))
        first["nodes"][0]["completed"] = False
        second = record_of(b.data(), previous=first)
        pending = sorted(n["level"] for n in second["nodes"] if n["kind"] == "summary" and not n["ready"])
        assert [1, 2] == pending

    def test_pending_summary_stays_pending(self) -> None:
        """A summary that was not ready stays not ready, even when unchanged."""
        b = linear(4)
        first = record_of(b.data())
        second = record_of(b.data(), previous=first)
        assert first == second

    def test_truthy_ready_follows_javascript(self) -> None:
        """``Boolean(before.ready)``: a stored ``[]`` counts as ready, ``0`` does not."""
        b = linear(4)
        first = fill_summaries(record_of(b.data()))
        summary = next(n for n in first["nodes"] if n["kind"] == "summary")
        summary["ready"] = []
        assert next(n for n in record_of(b.data(), previous=first)["nodes"] if n["kind"] == "summary")[
            "ready"
        ]
        summary["ready"] = 0
        assert not next(n for n in record_of(b.data(), previous=first)["nodes"] if n["kind"] == "summary")[
            "ready"
        ]


class TestMissingTimestamps:
    def test_untimed_roots_still_make_a_record(self) -> None:
        """Entries without timestamp among several roots (pbot throws there): "" times, session ``to`` empty."""
        b = PiSession()
        u1 = b.user("untimed question", timestamp=MISSING)
        a1 = b.assistant("untimed answer", timestamp=MISSING)
        b.leaf = None
        u2, a2 = b.turn("timed")
        record = record_of(b.data())
        nodes = by_id(record)
        assert ("", "") == (nodes[f"rec:0:{a1}"]["from"], nodes[f"rec:0:{a1}"]["to"])
        session = record["nodes"][-1]
        assert (nodes[f"rec:0:{a2}"]["from"], "") == (session["from"], session["to"])
        # pbot compares a missing time as the string "undefined": after every timestamp
        assert [f"rec:0:{a2}", f"rec:0:{a1}"] == session["children"]
        assert u1 and u2
