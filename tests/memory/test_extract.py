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
