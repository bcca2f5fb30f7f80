"""What the terms index sees of a text: its chunks, whichever way they are made."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pbot_watch.memory.texts import CHUNK_LINES, _chunk_texts, indexed_lines, term_rows
from pbot_watch.search.index import INDEXED_CHARS
from pbot_watch.search.tokens import document


def chunks_of_lines(text: str) -> list[tuple[int, int, str]]:
    """The chunks as made from the text's indexed lines, each joined again (the general way)."""
    seen = list(indexed_lines(text.split("\n")))
    return [
        (
            start + 1,
            len(seen[start : start + CHUNK_LINES]),
            document("\n".join(seen[start : start + CHUNK_LINES])),
        )
        for start in range(0, len(seen), CHUNK_LINES)
    ]


def term_chunks(text: str) -> list[tuple[int, int, str]]:
    """The chunks ``term_rows`` is made of (a one-chunk text taken whole), each as its whole document."""
    return [(first, count, document(piece)) for first, count, piece in _chunk_texts(text)]


class TestTermChunks:
    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.sampled_from(["", "a", "fooBar", "中文", "x_y 1", "  "]), max_size=3 * CHUNK_LINES))
    def test_one_chunk_texts_are_tokenised_whole(self, lines: list[str]) -> None:
        """A text of any number of lines gives the chunks its lines give (one or more chunks)."""
        text = "\n".join(lines)
        assert chunks_of_lines(text) == term_chunks(text)

    def test_edges_of_a_single_chunk(self) -> None:
        """At CHUNK_LINES lines and at INDEXED_CHARS characters, and one past each."""
        texts = [
            "\n".join(["w"] * CHUNK_LINES),
            "\n".join(["w"] * (CHUNK_LINES + 1)),
            "a" * INDEXED_CHARS,
            "a" * (INDEXED_CHARS + 1),
            "ab\n" * (INDEXED_CHARS // 3) + "x",
        ]
        for text in texts:
            assert chunks_of_lines(text) == term_chunks(text)


class TestTermRows:
    """What ``mem_terms`` stores: each chunk's tokens once, counted as its whole document counts them."""

    @settings(max_examples=300, deadline=None)
    @given(
        st.lists(
            st.sampled_from(
                ["", "a", "fooBar", "中文配置", "x_y 1", "  ", "HTTPServer2", "a" * 70, "é́", "🙂x"]
            ),
            max_size=3 * CHUNK_LINES,
        )
    )
    def test_the_same_tokens_as_the_whole_documents(self, lines: list[str]) -> None:
        text = "\n".join(lines)
        whole = term_chunks(text)
        rows = term_rows(text)
        assert [line for line, _count, _doc in whole] == [line for line, _tokens, _body in rows]
        for (_line, _count, doc), (_first, tokens, body) in zip(whole, rows, strict=True):
            assert set(body.split()) == set(doc.split())
            assert tokens == len(doc.split())

    @settings(max_examples=200, deadline=None)
    @given(st.text(max_size=400))
    def test_any_text(self, text: str) -> None:
        for (_line, _count, doc), (_first, tokens, body) in zip(
            term_chunks(text), term_rows(text), strict=True
        ):
            assert set(body.split()) == set(doc.split())
            assert tokens == len(doc.split())
