"""Raw memory extraction: labels of huge texts, and a file fed in pieces."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pbot_watch.history.jstext import collapse_whitespace
from pbot_watch.memory import extract
from pbot_watch.memory.extract import MemoryFeed, _line_count, _short, session_memory
from pbot_watch.memory.index import stored_label
from pbot_watch.memory.texts import capped
from pbot_watch.pi.entries import SessionReader
from tests.support.paths import FIXTURES

WHITESPACE_AND_LINES = st.text(
    alphabet=st.sampled_from(list("ab é \n\t\u3000\u2028\x1c\r\x85")), max_size=900
)


def entry(n: int, kind: str, k: int) -> dict[str, Any]:
    """A Pi entry of one of a few kinds; ``k`` picks among a few tool call ids."""
    body: dict[str, Any]
    if kind == "call":
        body = {
            "role": "assistant",
            "content": [
                {"type": "toolCall", "id": f"c{k}", "name": "bash", "arguments": {"command": f"run {k}"}}
            ],
        }
    elif kind == "result":
        body = {
            "role": "toolResult",
            "toolCallId": f"c{k}",
            "toolName": "bash",
            "content": [{"type": "text", "text": f"out {k}"}],
        }
    else:
        body = {"role": "user", "content": f"question {k}"}
    return {"type": "message", "id": f"e{n}", "parentId": f"e{n - 1}" if n else None, "message": body}


class TestLabels:
    @settings(max_examples=500, deadline=None)
    @given(WHITESPACE_AND_LINES, st.integers(min_value=1, max_value=100))
    def test_short_flattens_only_the_head_it_needs(self, text: str, limit: int) -> None:
        """The label of a text is the label its whole flattened text gives."""
        flat = collapse_whitespace(text).strip()
        assert (flat if len(flat) <= limit else flat[: limit - 1] + "…") == _short(text, limit)

    @settings(max_examples=500, deadline=None)
    @given(WHITESPACE_AND_LINES)
    def test_line_count_is_splitlines(self, text: str) -> None:
        """Lines are counted as str.splitlines counts them, without making them."""
        assert len(text.splitlines()) == _line_count(text)

    @settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(WHITESPACE_AND_LINES)
    def test_long_text_line_count_is_splitlines(self, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
        """A text too long to split is counted without its lines, as str.splitlines counts them."""
        monkeypatch.setattr(extract, "_SPLIT_CHARS", 0)
        assert len(text.splitlines()) == _line_count(text)


class TestDerivedLabels:
    """A source marked ``derived`` stores no label: the kind and the text give it back exactly."""

    @staticmethod
    def check(entries: list[dict[str, Any]]) -> int:
        derived = 0
        for source in session_memory(entries).sources:
            text = "\n".join(source.lines)
            sections = [(s.title, s.first, s.last) for s in source.sections]
            if source.derived:
                derived += 1
                assert stored_label(source.kind, text, source.label, sections) is None or capped(text)
        return derived

    @settings(max_examples=300, deadline=None)
    @given(WHITESPACE_AND_LINES, st.sampled_from(["user", "assistant", "thinking", "custom", "branch"]))
    def test_any_text(self, text: str, role: str) -> None:
        message: dict[str, Any]
        if role == "thinking":
            message = {"role": "assistant", "content": [{"type": "thinking", "thinking": text}]}
        elif role == "custom":
            message = {"role": "custom", "customType": "note", "content": text}
        else:
            message = {"role": role, "content": [{"type": "text", "text": text}]}
        entry = {"type": "message", "id": "e1", "parentId": None, "message": message}
        if role == "branch":
            entry = {"type": "branch_summary", "id": "e1", "parentId": None, "summary": text}
        self.check([entry])

    def test_every_fixture(self) -> None:
        derived = 0
        for path in sorted(FIXTURES.rglob("*.jsonl")):
            reader = SessionReader()
            entries = reader.feed(path.read_bytes())
            if reader.header is not None:
                derived += self.check(entries)
        assert derived > 100


class TestMemoryFeed:
    @settings(max_examples=200, deadline=None)
    @given(
        st.lists(st.tuples(st.sampled_from(["user", "call", "result"]), st.integers(0, 3)), max_size=16),
        st.lists(st.integers(min_value=0, max_value=16), max_size=5),
    )
    def test_pieces_give_the_whole(self, steps: list[tuple[str, int]], cuts: list[int]) -> None:
        """Fed in pieces, with each newly answered call's lone source dropped: the sources of the whole."""
        entries = [entry(n, kind, k) for n, (kind, k) in enumerate(steps)]
        feed = MemoryFeed()
        kept: list[Any] = []
        bounds = [0, *sorted(c for c in cuts if c <= len(entries)), len(entries)]
        for start, end in itertools.pairwise(bounds):
            fed = feed.feed(entries[start:end])
            kept = [s for s in kept if s.unanswered not in fed.answered_now] + fed.sources
        whole = session_memory(entries)
        assert [vars(s) for s in whole.sources] == [vars(s) for s in kept]
