"""Pre-tokenisation: CJK unigrams and bigrams, words and identifier parts, found again by FTS5."""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from pbot_watch.search.tokens import document, fts_any, fts_quote, query_terms, tokens


def fts_table() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='porter unicode61 remove_diacritics 2')")
    return conn


def finds(text: str, query: str) -> bool:
    conn = fts_table()
    conn.execute("INSERT INTO t(rowid, body) VALUES (1, ?)", (document(text),))
    terms = query_terms(query)
    return (
        bool(terms)
        and conn.execute("SELECT count(*) FROM t WHERE t MATCH ?", (fts_any(terms),)).fetchone()[0] == 1
    )


class TestTokens:
    def test_chinese_gives_unigrams_and_bigrams(self) -> None:
        """A Chinese run yields every character and every neighbouring pair."""
        assert ["数", "数据", "据", "据库", "库"] == tokens("数据库")

    def test_latin_words_are_lowercased(self) -> None:
        """Latin words come out lower-cased, split on punctuation."""
        assert ["hello", "world"] == tokens("Hello, WORLD!")

    def test_identifier_parts(self) -> None:
        """camelCase, acronyms and snake_case give the whole word and its parts."""
        assert ["parsehttpresponse", "parse", "http", "response"] == tokens("parseHTTPResponse")
        assert ["max", "len"] == tokens("max_len")

    def test_mixed_scripts_split_at_script_change(self) -> None:
        """A CJK run glued to latin letters is split where the script changes."""
        assert ["用", "用了", "了", "pytest", "测", "测试", "试"] == tokens("用了pytest测试")

    def test_query_drops_function_words_unless_alone(self) -> None:
        """Function words are dropped from a query with other words, kept when alone."""
        assert ["caroline", "go"] == query_terms("When did Caroline go?")
        assert ["the"] == query_terms("the")

    def test_quote_escapes_double_quotes(self) -> None:
        """A token with a double quote is a valid FTS5 string."""
        assert '"a""b"' == fts_quote('a"b')


class TestFoundAgain:
    def test_one_and_two_character_cjk_words(self) -> None:
        """Chinese, Japanese and Korean words of one and two characters are found."""
        assert finds("我们明天去北京开会", "北京")
        assert finds("我们明天去北京开会", "京")
        assert finds("今日は東京で会議です", "東京")
        assert finds("今日は東京で会議です", "は")
        assert finds("내일 서울에서 회의가 있습니다", "서울")
        assert finds("내일 서울에서 회의가 있습니다", "회")
        assert not finds("我们明天去北京开会", "上海")

    @settings(max_examples=150, deadline=None)
    @given(st.text(min_size=1, max_size=60), st.data())
    def test_every_token_of_a_text_finds_it(self, text: str, data: st.DataObject) -> None:
        """Any token the tokenizer emits for a text, used as a query, finds that text."""
        emitted = tokens(text)
        if not emitted:
            return
        token = data.draw(st.sampled_from(emitted))
        assert finds(text, token), (text, token)

    @settings(max_examples=150, deadline=None)
    @given(
        st.lists(
            st.text(alphabet=st.characters(categories=["Lu", "Ll", "Lo", "Nd"]), min_size=1, max_size=12),
            min_size=1,
            max_size=8,
        ),
        st.data(),
    )
    def test_every_word_of_a_text_finds_it(self, words: list[str], data: st.DataObject) -> None:
        """A word of a space-separated text, in any case, finds the text."""
        text = " ".join(words)
        word = data.draw(st.sampled_from(words))
        query = data.draw(st.sampled_from([word, word.upper(), word.lower()]))
        if query.lower() != word.lower():
            return  # case mapping changed the word (ß -> SS): not the same word any more
        assert finds(text, query), (text, query)
