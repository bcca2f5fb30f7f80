"""The pure parts: node input, content keys, splitting and the merge loop."""

from __future__ import annotations

import pytest

from pbot_watch.history.jstext import utf16_len
from pbot_watch.summarize.base import (
    NotShorter,
    Summary,
    budget_for_context,
    content_key,
    node_input,
    split_units,
    summarize_in_parts,
)


class TestNodeInput:
    def test_matches_pbot_organize(self) -> None:
        """Children are headed by their span, unfinished ones marked, joined by a blank line."""
        children = [
            {"from": "a", "to": "b", "completed": True, "text": "one"},
            {"from": "c", "to": "d", "completed": False, "text": "two"},
        ]
        assert node_input(children) == "[a — b]\none\n\n[c — d；未完成]\ntwo"


class TestContentKey:
    def test_tagged_and_stable(self) -> None:
        """The key names its algorithm and depends only on its three inputs."""
        key = content_key("text", "offline/1", "p@1")
        assert key.startswith("sha256:")
        assert key == content_key("text", "offline/1", "p@1")

    def test_every_part_counts(self) -> None:
        """Another input, summarizer or prompt gives another key, even when concatenations agree."""
        keys = {
            content_key("text", "m", "p"),
            content_key("text2", "m", "p"),
            content_key("text", "m2", "p"),
            content_key("text", "m", "p2"),
            content_key("p", "m", "text"),
            content_key("", "mtext", "p"),
        }
        assert len(keys) == 6


class TestSplit:
    def test_never_splits_a_surrogate_pair(self) -> None:
        """An astral character (two UTF-16 units) is never cut in half."""
        text = "ab😀cd😀😀e"
        pieces = split_units(text, 3)
        assert "".join(pieces) == text
        assert all(utf16_len(p) <= 3 for p in pieces)
        assert all(not (0xD800 <= ord(ch) <= 0xDFFF) for p in pieces for ch in p)

    def test_tiny_budget_still_progresses(self) -> None:
        """A budget of two units still takes one astral character per piece."""
        assert split_units("😀😀", 2) == ["😀", "😀"]


class TestInParts:
    def test_over_long_input_is_summarized_in_parts_then_merged(self) -> None:
        """Parts are summarized, joined, and summarized once more when they fit."""
        asked: list[str] = []

        def ask(text: str) -> Summary:
            asked.append(text)
            return Summary(text[:3], "m", input_tokens=len(text), output_tokens=1, calls=1)

        result = summarize_in_parts("x" * 25, 14, ask, "m")
        assert [len(a) for a in asked] == [14, 11, 3 + 2 + 3]
        assert result.text == "xxx"
        assert result.calls == 3
        assert result.input_tokens == 25 + 8

    def test_must_shrink(self) -> None:
        """A model that answers at length would loop forever: the loop stops with NotShorter."""

        def ask(text: str) -> Summary:
            return Summary(text + "!", "m", calls=1)

        with pytest.raises(NotShorter):
            summarize_in_parts("y" * 30, 10, ask, "m")

    def test_budget_follows_the_context_window(self) -> None:
        """Half the window, clamped to pbot's 2,000..24,000; unknown models get a safe default."""
        assert budget_for_context(128_000) == 24_000
        assert budget_for_context(8192) == 4096
        assert budget_for_context(1000) == 2000
        assert budget_for_context(None) == 4096
