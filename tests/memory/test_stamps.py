"""``stamps.py``: a timestamp's stored key orders as its text does, and gives the text back; and a
tool call's block as ``mem_calls`` keeps it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pbot_watch.memory import stamps
from pbot_watch.memory.index import call_block, call_json, refresh_memory
from pbot_watch.memory.query import search_memory
from pbot_watch.search.index import SearchIndex
from tests.support.pi_sessions import PiSession

PI = "2026-12-03T09:11:23.123Z"

# Pi's form, and texts near it: cut short, lengthened, a character changed, other forms and zones.
_pi_form = st.builds(
    "{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}.{:03d}Z".format,
    st.integers(1900, 4100),
    st.integers(0, 13),
    st.integers(0, 32),
    st.integers(0, 25),
    st.integers(0, 61),
    st.integers(0, 61),
    st.integers(0, 999),
)
_near = st.builds(
    lambda text, cut, extra, at, char: (text[:at] + char + text[at + 1 :])[:cut] + extra,
    _pi_form,
    st.integers(0, 30),
    st.sampled_from(["", "Z", "0", "+01:00", " ", "\u00e9", "\U0001f600"]),
    st.integers(0, 24),
    st.sampled_from("0129-:.TZ /\u0663\u00e9"),
)
_stamp = st.one_of(_pi_form, _near, st.text(max_size=30).map(lambda t: t.replace("\x00", "")))


def _bytes_order(text: str) -> bytes:
    return text.encode("utf-8") + b"\xff"


@given(_stamp)
def test_decode_gives_the_text_back(text: str) -> None:
    key, kept = stamps.encode(text)
    assert stamps.decode(key, kept) == text
    assert -(1 << 47) <= key < 1 << 47  # six bytes in a record
    assert (kept is None) == (key % 2 == 0)


@given(_stamp, _stamp)
def test_keys_order_as_the_texts_and_0xff(a: str, b: str) -> None:
    ka, kb = stamps.order(*stamps.encode(a)), stamps.order(*stamps.encode(b))
    assert (ka < kb) == (_bytes_order(a) < _bytes_order(b))
    assert (ka == kb) == (a == b)


def test_pi_form_keeps_no_text() -> None:
    assert stamps.encode(PI)[1] is None
    assert stamps.encode("2026-12-03T09:11:23Z")[1] == "2026-12-03T09:11:23Z"
    assert stamps.encode("\u0662026-12-03T09:11:23.123Z")[1] is not None  # a digit of another script


@given(st.lists(_stamp, max_size=40))
def test_sqlite_orders_the_keys_as_the_texts(texts: list[str]) -> None:
    """``NEWEST_FIRST`` in SQLite is the texts' bytes and 0xFF, descending."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, stamp INTEGER NOT NULL, stamp_text TEXT)")
    conn.executemany(
        "INSERT INTO t(id, stamp, stamp_text) VALUES (?, ?, ?)",
        [(i, *stamps.encode(text)) for i, text in enumerate(texts)],
    )
    got = [
        i for (i,) in conn.execute(f"SELECT id FROM t ORDER BY {stamps.NEWEST_FIRST.format(t='t')}, id DESC")
    ]
    want = sorted(range(len(texts)), key=lambda i: (_bytes_order(texts[i]), i), reverse=True)
    assert got == want


ODD = [
    "2026-12-03T09:11:23.123Z",
    "2026-12-03T09:11:23",
    "2026-12-03T09:11:23.123Z+x",
    "2026-12-03T09:11:23.124Z",
    "",
    "2026-12-03T10:00:00+01:00",
    "2026-12-03T09:11:23.122Z",
    "2026-12-03T09:11:23.123Z",
    "2026-12-03T09:11:23.1",
]
"""Pi's form, its prefixes, a longer text it begins, other forms: timestamps a session may hold."""


@pytest.mark.parametrize("session_id", [None, "sess-1"])
def test_searches_order_every_timestamp_as_its_text(tmp_path: Path, session_id: str | None) -> None:
    """Listing (the texts' order), literal and terms (0xFF after each: a prefix first), unscoped and
    scoped: the same order the stored texts gave, and the timestamps shown as written."""
    pi = PiSession("sess-1", file=tmp_path / "sessions" / "ws" / "s.jsonl")
    for i, stamp in enumerate(ODD):
        pi.user(f"findme {i}", id=f"u{i}", timestamp=stamp)
    listing = sorted(range(len(ODD)), key=lambda i: (ODD[i].encode(), i), reverse=True)
    newest = sorted(range(len(ODD)), key=lambda i: (_bytes_order(ODD[i]), i), reverse=True)
    ranked = sorted(
        range(len(ODD)), key=lambda i: (_bytes_order(ODD[i]), -i), reverse=True
    )  # ties: the older first
    with SearchIndex(tmp_path / "search.db") as index:
        refresh_memory(index, [tmp_path / "sessions"])
        for query, match, order in (
            ("", "literal", listing),
            ("findme", "literal", newest),
            ("findme", "terms", ranked),
        ):
            hits = search_memory(index, query, match, session_id=session_id, limit=50).hits  # type: ignore[arg-type]
            assert [(h.entry_id, h.timestamp) for h in hits] == [(f"u{i}", ODD[i]) for i in order], (
                query,
                match,
            )


@given(st.text(max_size=8), st.one_of(st.none(), st.text(max_size=8), st.lists(st.integers(), max_size=2)))
def test_a_call_block_reads_back_as_it_was(name: str, arguments: Any) -> None:
    for block in (
        {"type": "toolCall", "id": "c1", "name": name, "arguments": arguments},
        {"type": "toolCall", "id": "c2", "name": name, "arguments": arguments},
        {"id": "c1", "type": "toolCall", "name": name, "arguments": arguments},
        {"type": "toolCall", "id": "c1", "name": name},
        [name, arguments],
        [name],
        name,
    ):
        assert call_block("c1", call_json("c1", block)) == block  # type: ignore[arg-type]
    assert len(call_json("c1", {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {}}) or "") < 20
