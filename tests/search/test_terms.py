"""Ranking terms: stop words out, English stems, CJK and identifier parts kept; a query finds its text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pbot_watch.search.terms import TermRules, document, exchange_sides, query_terms, terms


class TestTerms:
    def test_words_are_stemmed(self) -> None:
        """Forms of one English word become one term."""
        assert ["stem", "stem", "stem"] == terms("stemming stems stemmed")

    def test_stop_words_are_dropped(self) -> None:
        """Function words are not ranking terms."""
        assert ["deploy", "servic"] == terms("we deployed the service")

    def test_cjk_and_identifier_parts_are_kept(self) -> None:
        """CJK characters and pairs, and the parts of an identifier, stay terms."""
        assert ["数", "数据", "据", "parsehttprespons", "pars", "http", "respons"] == terms(
            "数据 parseHTTPResponse"
        )

    def test_rules_switch_stemming_off(self) -> None:
        """Without stemming a word stays as it was written (lower-cased)."""
        assert ["stemming"] == document("stemming", TermRules(stemming=False)).split()

    def test_query_of_stop_words_only_has_no_terms(self) -> None:
        """A query of function words alone has nothing to look for."""
        assert [] == query_terms("what was it")

    def test_exchange_sides_keep_their_labels(self) -> None:
        """An exchange is cut where the answer starts; each side keeps its label."""
        assert ("用户：\nquestion", "\n\n助手：\nanswer") == exchange_sides(
            "用户：\nquestion\n\n助手：\nanswer"
        )

    @given(st.text())
    def test_query_finds_its_own_text(self, text: str) -> None:
        """Every term of a query is a term of the same text indexed."""
        assert set(query_terms(text)) <= set(terms(text))

    @given(
        st.text(
            alphabet=st.one_of(st.characters(), st.sampled_from(list(" _-./\n:'\"数据了的"))), max_size=120
        ),
        st.sampled_from([TermRules(), TermRules(stemming=False), TermRules(stop_words=False)]),
    )
    def test_document_is_the_terms_joined(self, text: str, rules: TermRules) -> None:
        """``document`` makes each run's terms once (``tokens.RunDocuments``): the same string as
        the text's terms, token by token, separated by spaces."""
        assert document(text, rules) == " ".join(terms(text, rules))
