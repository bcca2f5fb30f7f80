"""Pre-tokenisation: CJK unigrams and bigrams, words and identifier parts, found again by FTS5."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pbot_watch.search import tokens as tokens_module
from pbot_watch.search import unicode_classes
from pbot_watch.search.tokens import document, fts_any, fts_quote, is_cjk, query_terms, tokens
from tests.search import tokens_oracle as oracle

# Every script people write, and the characters that trip tokenizers: marks (precomposed and
# not), CJK with its radicals and voicing marks, characters above U+FFFF (emoji, CJK ext B,
# astral marks, unassigned code points in CJK blocks), lone surrogates, separators, "_".
SCRIPTS = {
    "ascii": st.characters(min_codepoint=0x20, max_codepoint=0x7E),
    "latin": st.characters(min_codepoint=0xC0, max_codepoint=0x24F),
    "combining": st.characters(min_codepoint=0x300, max_codepoint=0x36F),
    "greek-cyrillic": st.characters(min_codepoint=0x370, max_codepoint=0x4FF),
    "hebrew-arabic": st.characters(min_codepoint=0x590, max_codepoint=0x6FF),
    "devanagari-bengali": st.characters(min_codepoint=0x900, max_codepoint=0x9FF),
    "thai": st.characters(min_codepoint=0xE00, max_codepoint=0xE7F),
    "hangul-jamo": st.characters(min_codepoint=0x1100, max_codepoint=0x11FF),
    "new-tai-lue-vedic": st.sampled_from([chr(c) for c in sorted(unicode_classes.UNICODE61_MARK_LETTERS)]),
    "cjk-radicals-kana": st.characters(min_codepoint=0x2E80, max_codepoint=0x31FF),
    "han": st.characters(min_codepoint=0x4E00, max_codepoint=0x4FFF),
    "hangul": st.characters(min_codepoint=0xAC00, max_codepoint=0xAC80),
    "halfwidth": st.characters(min_codepoint=0xFF00, max_codepoint=0xFFEF),
    "emoji": st.characters(min_codepoint=0x1F300, max_codepoint=0x1F6FF),
    "astral-marks": st.characters(min_codepoint=0x1D165, max_codepoint=0x1D1AD),
    "cjk-ext-b-edges": st.characters(min_codepoint=0x2A6D0, max_codepoint=0x2A710),
    "surrogates": st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, categories=["Cs"]),
    "separators": st.sampled_from(list(" _-./\t\n:;,'\"()[]{}")),
}
ANY_SCRIPT = st.text(alphabet=st.one_of(st.characters(), *SCRIPTS.values()), max_size=80)
ONE_SCRIPT = st.sampled_from(sorted(SCRIPTS)).flatmap(
    lambda name: st.text(alphabet=st.one_of(SCRIPTS[name], SCRIPTS["separators"]), max_size=80)
)


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


class TestSameAsBefore:
    """The regex tokenizer gives exactly the tokens of the per-character one (tests/search/tokens_oracle.py)."""

    @settings(max_examples=400, deadline=None)
    @given(st.one_of(ANY_SCRIPT, ONE_SCRIPT))
    @example("数据库 parseHTTPResponse max_len café e\u0301 हिन्दी ⼀中 か\u3099 ・ 𠀀\U0002a6e0 😀\ud83d")
    def test_tokens_document_and_query_terms(self, text: str) -> None:
        """tokens(), document() and query_terms() equal the oracle's for any text."""
        assert oracle.tokens(text) == tokens(text)
        assert oracle.document(text) == document(text)
        assert oracle.query_terms(text) == query_terms(text)

    @pytest.mark.slow
    def test_every_code_point_is_classified_as_before(self) -> None:
        """Over all of Unicode, the same characters make words, CJK runs and separators."""
        every = "".join(map(chr, range(0x110000)))
        # "_" is a separator: the tokenizer turns it into a space before matching runs.
        spans = [m.span() for m in tokens_module._patterns().run.finditer(every.replace("_", " "))]
        token_chars = {i for start, end in spans for i in range(start, end)}
        cjk = {i for i in token_chars if is_cjk(every[i])}
        expected_cjk = {i for i in range(0x110000) if oracle.is_cjk(every[i])}
        expected_words = {i for i in range(0x110000) if oracle._is_word_char(every[i])}
        assert expected_cjk == cjk
        assert expected_words | expected_cjk == token_chars

    def test_spelled_run_class_is_run_bmps_below_u10000(self) -> None:
        """The run class spelled out as ranges holds exactly the characters below U+10000 ``run_bmp`` does."""
        patterns = tokens_module._patterns()
        differ = [
            code
            for code in range(0x10000)
            if (tokens_module._run_spelled().fullmatch(chr(code)) is None)
            != (patterns.run_bmp.fullmatch(chr(code)) is None)
        ]
        assert [] == differ

    @settings(max_examples=400, deadline=None)
    @given(st.one_of(ANY_SCRIPT, ONE_SCRIPT, st.text(st.characters(max_codepoint=0x7F))))
    @example("")
    @example("_")
    @example("a_b __init__ x1_2 CamelCase_X\t\n")
    @example("é\u0301_中文 ab")
    @example("max_len 😀 𠀀 \U0001d165x")
    def test_runs_are_the_general_patterns(self, text: str) -> None:
        """``_runs``'s fast paths cut any text as the pattern its characters need does (``run``
        when an astral extra character is there, else ``run_bmp``)."""
        patterns = tokens_module._patterns()
        spaced = text.replace("_", " ")
        astral = "".join(ch for ch in spaced if ord(ch) > 0xFFFF)
        general = patterns.run if patterns.astral_extra.search(astral) else patterns.run_bmp
        assert general.findall(spaced) == tokens_module._runs(text)
        # Long enough for the spelled-out class (``SPELLED_FROM``), where it applies.
        long = (text + " ") * (tokens_module.SPELLED_FROM // (len(text) + 1) + 1)
        assert general.findall(long.replace("_", " ")) == tokens_module._runs(long)

    def test_kept_unicode_classes_are_unicodedatas(self) -> None:
        """The classes kept for Python 3.11's Unicode version are what unicodedata says."""
        # (On another Unicode version classes() is scan() itself, and this holds trivially.)
        assert unicode_classes.scan() == unicode_classes.classes()

    def test_run_cache_is_bounded(self) -> None:
        """The memory of runs seen is cleared when full, and tokens stay right after."""
        runs = tokens_module._DOCUMENTS
        words = " ".join(f"w{i}" for i in range(tokens_module.RUN_CACHE_SIZE + 10))
        document(words)
        assert len(runs) <= tokens_module.RUN_CACHE_SIZE
        assert ["w1", "w", "1"] == tokens("w1")


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

    def test_radicals_and_voicing_marks_are_separators(self) -> None:
        """Symbols in the CJK blocks separate words, as unicode61 makes them: no token is unfindable."""
        assert [] == tokens("⼀")
        assert ["中"] == tokens("⼀中")
        assert ["か"] == tokens("か\u3099")
        assert ["カ", "タ"] == tokens("カ・タ")
        assert [] == tokens("\u19b0\u19b1")

    @pytest.mark.slow
    def test_every_single_character_token_is_kept_by_unicode61(self) -> None:
        """Each code point the tokenizer keeps on its own gives FTS5 at least one token."""
        conn = fts_table()
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        kept = {code: document(chr(code)) for code in range(0x110000)}
        kept = {code: doc for code, doc in kept.items() if doc}
        conn.executemany("INSERT INTO t(rowid, body) VALUES (?, ?)", kept.items())
        found = {doc for (doc,) in conn.execute("SELECT DISTINCT doc FROM v")}
        assert set() == set(kept) - found

    @settings(max_examples=150, deadline=None)
    @given(st.one_of(st.text(min_size=1, max_size=60), ANY_SCRIPT, ONE_SCRIPT), st.data())
    @example("⼀", None)
    def test_every_token_of_a_text_finds_it(self, text: str, data: st.DataObject | None) -> None:
        """Any token the tokenizer emits for a text, used as a query, finds that text."""
        emitted = tokens(text)
        if not emitted:
            return
        token = emitted[0] if data is None else data.draw(st.sampled_from(emitted))
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
