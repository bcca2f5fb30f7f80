"""Session lines decode as ``JSON.parse`` reads them, on the fast path and on the fallback alike."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pbot_watch.pi.jsonline import Malformed, loads_line
from tests.support.pi_sessions import PiSession, history_of


def reference(line: bytes) -> Any:
    """What the reader did before msgspec: Node's UTF-8 decoding, then a strict ``json``."""

    def reject(name: str) -> Any:
        raise ValueError(name)

    text = line.decode("utf-8", "replace")
    return json.JSONDecoder(parse_constant=reject).decode(text)


def answer_line(b: PiSession, raw_text: bytes) -> bytes:
    """An assistant answer whose text block's ``text`` is the raw JSON ``raw_text``."""
    b.assistant("PLACEHOLDER")
    entry = b.entries.pop()
    b.leaf = entry["parentId"]
    return json.dumps(entry, separators=(",", ":")).encode().replace(b'"PLACEHOLDER"', raw_text) + b"\n"


def answer_text(raw_text: bytes) -> str:
    """The exchange text of a one-question session whose answer's text is the raw JSON ``raw_text``."""
    b = PiSession()
    b.user("q")
    data = b.data() + answer_line(b, raw_text)
    history = history_of(data)
    assert history is not None
    text: str = history.branches[0][0]["text"]
    return text.rsplit("\n", 1)[1]


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


class TestNumbersInText:
    @pytest.mark.parametrize(
        ("raw", "expected"),
        [
            ("1.0", "1"),
            ("1e21", "1e+21"),
            ("1e-7", "1e-7"),
            ("123456789012345678901234567890", "1.2345678901234568e+29"),
            ("-0", "0"),
            ("0.1", "0.1"),
            ("1e400", "Infinity"),
        ],
    )
    def test_a_number_as_text_prints_as_javascript(self, raw: str, expected: str) -> None:
        """A text block holding a number joins the exchange as ``String(number)`` would print it."""
        assert expected == answer_text(raw.encode())


class TestLoneSurrogates:
    def test_escaped_lone_surrogate_survives(self) -> None:
        r"""A ``\ud800`` escape without its pair stays in the string, as JavaScript keeps it."""
        assert {"a": "x\ud800y"} == loads_line(rb'{"a":"x\ud800y"}')

    def test_reversed_pair_stays_two_lone_surrogates(self) -> None:
        """A low surrogate before a high one is two lone code units, not a character."""
        assert "\udfff\ud800" == loads_line(rb'"\udfff\ud800"')

    def test_escaped_pair_is_one_character(self) -> None:
        """A well-formed escaped pair decodes to the character it encodes."""
        assert "😀" == loads_line(rb'"\ud83d\ude00"')

    def test_lone_surrogate_reaches_the_exchange_text(self) -> None:
        """The answer text keeps the lone surrogate through the whole pipeline."""
        assert "half \udc00 emoji" == answer_text(rb'"half \udc00 emoji"')


class TestDuplicateKeys:
    def test_last_key_wins(self) -> None:
        """``JSON.parse`` keeps the last of duplicate keys; so do we."""
        assert {"a": 2, "b": 1} == loads_line(b'{"a":1,"b":1,"a":2}')

    def test_duplicate_role_decides_the_message(self) -> None:
        """An entry whose ``role`` repeats is what its last ``role`` says."""
        b = PiSession()
        b.user("q")
        line = answer_line(b, b'"yes"').replace(b'"role":"assistant"', b'"role":"user","role":"assistant"')
        history = history_of(b.data() + line)
        assert history is not None
        assert history.branches[0][0]["completed"]


class TestMalformed:
    @pytest.mark.parametrize(
        "line",
        [
            b"NaN",
            b'{"a":NaN}',
            b'{"a":Infinity}',
            b'{"a":-Infinity}',
            b"[" * 100_000,
            b'{"a":1} x',
            b"\xef\xbb\xbf{}",
        ],
        ids=["NaN", "NaN value", "Infinity", "-Infinity", "deep nesting", "trailing data", "BOM"],
    )
    def test_refused(self, line: bytes) -> None:
        """What ``JSON.parse`` refuses (and nesting deeper than we decode) is malformed."""
        with pytest.raises(Malformed):
            loads_line(line)

    def test_deep_nesting_counts_as_malformed_and_the_file_goes_on(self) -> None:
        """A line nested 100,000 deep is one malformed line; the exchange after it is read."""
        b = PiSession()
        b.user("q")
        data = b.data() + b"[" * 100_000 + b"]" * 100_000 + b"\n" + answer_line(b, b'"a"')
        history = history_of(data)
        assert history is not None
        assert history.branches[0][0]["completed"]


class TestInvalidUtf8:
    def test_invalid_bytes_become_replacement_characters(self) -> None:
        """Bytes that are not UTF-8 decode to U+FFFD, as Node's ``readFile(..., "utf8")`` does."""
        assert {"a": "x\ufffd\ufffdy"} == loads_line(b'{"a":"x\xff\xfey"}')

    def test_encoded_surrogate_is_three_replacements(self) -> None:
        """A surrogate written as raw UTF-8 bytes (CESU) is invalid UTF-8: three U+FFFD, as in Node."""
        assert "\ufffd\ufffd\ufffd" == loads_line(b'"\xed\xa0\x80"')

    def test_cut_character_in_text_reaches_the_exchange(self) -> None:
        """A character cut in half inside an answer leaves U+FFFD in the exchange text."""
        assert "ab\ufffd" == answer_text(b'"ab\xe4\xb8"')


class TestAgreesWithReference:
    @settings(max_examples=300, deadline=None)
    @given(json_values)
    def test_every_json_value(self, value: Any) -> None:
        """Any JSON value, as JSON.stringify would write it, decodes to what the reference gives."""
        line = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
        expected = reference(line)
        actual = loads_line(line)
        assert repr(expected) == repr(actual)

    @settings(max_examples=300, deadline=None)
    @given(json_values, st.data())
    def test_damaged_lines(self, value: Any, data: st.DataObject) -> None:
        """A line with a byte changed is accepted or refused exactly as the reference does."""
        line = bytearray(json.dumps(value, separators=(",", ":")).encode())
        at = data.draw(st.integers(0, len(line) - 1))
        line[at] = data.draw(st.integers(0, 255))
        try:
            expected: Any = ("value", repr(reference(bytes(line))))
        except (ValueError, RecursionError):
            expected = ("malformed",)
        try:
            actual: Any = ("value", repr(loads_line(bytes(line))))
        except Malformed:
            actual = ("malformed",)
        assert expected == actual
