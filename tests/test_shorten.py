"""``shorten``: the one rule by which labels, snippets, status values and messages are cut."""

from __future__ import annotations

import sys

from hypothesis import given
from hypothesis import strategies as st

from pbot_watch.history.jstext import JS_WHITESPACE, collapse_whitespace, flat_text
from pbot_watch.shorten import ELLIPSIS, shorten

TEXTS = st.text(alphabet=st.sampled_from("ab \n\t\u3000x"), max_size=400)
# Every character that is whitespace to Python or to JavaScript (they differ on six).
EITHER_WHITESPACE = sorted(
    {chr(code) for code in range(sys.maxunicode + 1) if chr(code).isspace()} | set(JS_WHITESPACE)
)


class TestShorten:
    @given(TEXTS, st.integers(1, 60))
    def test_fits_the_limit_with_the_mark(self, text: str, limit: int) -> None:
        """The result is the text when it fits, else its head and the mark, in ``limit`` characters."""
        shown = shorten(text, limit)
        expected = text if len(text) <= limit else text[: limit - 1] + ELLIPSIS
        assert (expected, True) == (shown, len(shown) <= limit)

    @given(TEXTS, st.integers(1, 60))
    def test_flatten_reads_only_a_head_yet_cuts_the_whole(self, text: str, limit: int) -> None:
        """Flattening a head gives what flattening the whole text and cutting it gives."""
        assert shorten(collapse_whitespace(text).strip(), limit) == shorten(text, limit, flatten=True)

    def test_trim_cut_drops_the_space_before_the_mark(self) -> None:
        """Offline summaries never end a cut in a space."""
        assert ("one …", "one…") == (shorten("one two", 5), shorten("one two", 5, trim_cut=True))

    def test_a_huge_text_is_not_flattened_whole(self) -> None:
        """A 50 MB text is cut from its head: fast, and the same label."""
        text = "word " * 10_000_000
        assert "word word" + ELLIPSIS == shorten(text, 10, flatten=True)


class TestFlatText:
    def test_every_whitespace_character_is_flattened_as_the_regex_does(self) -> None:
        """Alone, between words, doubled and next to a space: the str.split path or the regex one."""
        for ch in EITHER_WHITESPACE:
            for text in (ch, f"a{ch}b", ch * 2, f" {ch}a{ch} ", f"{ch}x", f"x{ch}"):
                assert collapse_whitespace(text).strip() == flat_text(text), repr(text)

    @given(st.text(alphabet=st.sampled_from([*EITHER_WHITESPACE, "a", "é", "中"]), max_size=40))
    def test_is_collapsed_and_stripped(self, text: str) -> None:
        """``flat_text`` is ``collapse_whitespace(text).strip()`` for any mix of whitespace."""
        assert collapse_whitespace(text).strip() == flat_text(text)

    def test_a_long_text_is_flattened_as_the_regex_does(self) -> None:
        """Past the length it splits, the text is collapsed by the regex: the same text on one line."""
        text = " a\t\u3000b\n" * 20_000
        assert collapse_whitespace(text).strip() == flat_text(text)
