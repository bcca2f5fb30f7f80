"""Memory handles and cursors: stable bytes, and anything altered is refused, never a crash."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pbot_watch.memory.handles import (
    MAX_INTEGER,
    cursor_key,
    make_cursor,
    make_handle,
    parse_cursor,
    parse_handle,
)
from pbot_watch.search.errors import BadCursor, UnknownHandle


def crafted(value: object, prefix: str = "m1") -> str:
    """A handle-shaped string carrying any JSON value, as a model could write one."""
    raw = json.dumps(value, separators=(",", ":")).encode()
    return f"{prefix}." + base64.urlsafe_b64encode(raw).decode().rstrip("=")


class TestHandles:
    def test_bytes_are_those_handed_out_before(self) -> None:
        """Handles keep the exact encoding earlier versions gave out, so saved handles still work."""
        assert "m1.WyJzZXNzLTEiLCJ0MiIsM10" == make_handle("sess-1", "t2", 3)
        assert "m1.WyLkvJror50iLCLmnaHnm64iLDBd" == make_handle("会话", "条目", 0)
        assert ("sess-1", "t2", 3) == parse_handle("m1.WyJzZXNzLTEiLCJ0MiIsM10")

    @given(st.text(), st.text(), st.integers(min_value=0, max_value=MAX_INTEGER))
    def test_round_trip(self, session_id: str, entry_id: str, part: int) -> None:
        """Any session id, entry id and part comes back from its handle unchanged."""
        assert (session_id, entry_id, part) == parse_handle(make_handle(session_id, entry_id, part))

    @pytest.mark.parametrize(
        "handle",
        [
            crafted(["s", "e", 10**30]),
            crafted(["s", "e", MAX_INTEGER + 1]),
            crafted(["s", "e", -1]),
            crafted(["s", "e", True]),
            crafted(["s", "e", 1.5]),
            crafted(["s", "e"]),
            crafted({"s": "e"}),
            crafted(["s", "e", 0], prefix="m2"),
            "m1." + "9" * 5000,
            "m1.!!!",
            "no dot",
            "#",
            "",
        ],
    )
    def test_altered_handle_is_unknown(self, handle: str) -> None:
        """A handle with a huge, negative or non-integer part, or no handle at all, is an unknown handle."""
        with pytest.raises(UnknownHandle):
            parse_handle(handle)


class TestCursors:
    def test_bytes_are_those_handed_out_before(self) -> None:
        """Cursors keep their encoding: version, key, offset, snapshot."""
        key = "0123456789abcdef"
        cursor = "eyJ2IjoxLCJrIjoiMDEyMzQ1Njc4OWFiY2RlZiIsIm8iOjIwLCJzIjo0Mn0"
        assert cursor == make_cursor(key, 20, 42)
        assert (20, 42) == parse_cursor(cursor, key)

    def test_key_names_query_and_scope(self) -> None:
        """A cursor is bound to its query, match mode, --in, session and leaf."""
        key = cursor_key("q", "literal", None, None, None)
        others = [
            cursor_key("Q", "literal", None, None, None),
            cursor_key("q", "terms", None, None, None),
            cursor_key("q", "literal", "m1.x", None, None),
            cursor_key("q", "literal", None, "s", None),
            cursor_key("q", "literal", None, None, "e"),
        ]
        assert key not in others
        with pytest.raises(BadCursor, match="different query"):
            parse_cursor(make_cursor(key, 1, 1), others[0])

    @pytest.mark.parametrize(
        "value",
        [
            {"v": 1, "k": "k", "o": 10**30, "s": 1},
            {"v": 1, "k": "k", "o": 1, "s": 10**30},
            {"v": 1, "k": "k", "o": -1, "s": 1},
            {"v": 1, "k": "k", "o": True, "s": 1},
            {"v": 2, "k": "k", "o": 1, "s": 1},
            {"v": 1, "k": "k"},
            [1, 2],
        ],
    )
    def test_altered_cursor_is_bad(self, value: object) -> None:
        """A cursor with a huge or negative offset, another version or another shape is refused."""
        with pytest.raises(BadCursor, match="not a cursor"):
            parse_cursor(crafted(value).removeprefix("m1."), "k")
