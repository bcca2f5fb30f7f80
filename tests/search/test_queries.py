"""The text helpers of the history queries look only at what they show, and equal pbot's whole-text forms."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pbot_watch.history.jstext import collapse_whitespace, utf16_len, utf16_slice
from pbot_watch.search.queries import PREVIEW_LENGTH, _utf16_index, _utf16_window, preview

TEXTS = st.text(alphabet=st.sampled_from(list("ab \n\t\u3000é😀北\ud83d\udc00")), max_size=700)


class TestBoundedTextHelpers:
    @settings(max_examples=400, deadline=None)
    @given(TEXTS)
    def test_preview_is_the_head_of_the_collapsed_text(self, text: str) -> None:
        """The preview equals the first 100 units of the whole text collapsed."""
        assert utf16_slice(collapse_whitespace(text), 0, PREVIEW_LENGTH) == preview(text)

    @settings(max_examples=400, deadline=None)
    @given(TEXTS, st.integers(min_value=0, max_value=900), st.integers(min_value=0, max_value=500))
    def test_window_is_the_utf16_slice(self, text: str, start: int, length: int) -> None:
        """A window of UTF-16 units equals the slice of the whole text's units."""
        assert utf16_slice(text, start, start + length) == _utf16_window(text, start, start + length)

    @settings(max_examples=400, deadline=None)
    @given(TEXTS, st.text(alphabet=st.sampled_from(list("a b😀北")), min_size=1, max_size=3))
    def test_index_counts_utf16_units(self, text: str, needle: str) -> None:
        """indexOf in UTF-16 units, as JavaScript counts."""
        found = text.find(needle)
        assert (found if found <= 0 else utf16_len(text[:found])) == _utf16_index(text, needle)
