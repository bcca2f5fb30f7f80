"""The resumable form of a session file's state: resumed at any saved cursor, it goes on as if never dropped."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pbot_watch.history.project import SessionFile
from pbot_watch.history.resume import frame, frames, resume
from pbot_watch.pi.cursor import Cursor
from tests.core.test_properties import record, whole
from tests.support.paths import FIXTURES
from tests.support.pi_sessions import PiSession, session_builders

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def cursor_at(offset: int) -> Cursor:
    """A cursor as the tailer makes one (the fingerprints only have to differ per offset here)."""
    return Cursor(1, 2, offset, "head", f"tail-{offset}")


def logged(data: bytes, cuts: list[int]) -> tuple[bytes, list[Cursor]]:
    """``data`` fed in pieces, a frame logged after each (as the tailer logs each saved cursor)."""
    state = SessionFile()
    log = b""
    marks: list[Cursor] = []
    start = steps = 0
    for cut in [*sorted({c % (len(data) + 1) for c in cuts}), len(data)]:
        state.feed(data[start:cut])
        start = cut
        offset = state.reader.consumed
        if state.header is None or (marks and marks[-1].offset == offset):
            continue
        marks.append(cursor_at(offset))
        log += frame(state, marks[-1], steps)[0]
        steps = len(state.tree.steps)
    return log, marks


class TestResume:
    @SETTINGS
    @given(
        builder=session_builders(max_entries=50, odd=True),
        cuts=st.lists(st.integers(min_value=0), max_size=12),
        pick=st.integers(min_value=0),
    )
    def test_resumed_at_any_saved_cursor_equals_the_whole_file(
        self, builder: PiSession, cuts: list[int], pick: int
    ) -> None:
        """Branches, forks, orphans, duplicate ids, odd values: the resumed state's record is the file's."""
        data = builder.data()
        log, marks = logged(data, cuts)
        if not marks:
            return
        mark = marks[pick % len(marks)]
        full = whole(data)
        assert full.header is not None
        found = resume(log, mark, full.header)
        assert found is not None
        state = found.state
        state.feed(data[mark.offset :])
        assert record(full) == record(state)
        assert (full.reader.malformed, full.reader.entries) == (state.reader.malformed, state.reader.entries)
        assert full.tree.tips() == state.tree.tips()

    @SETTINGS
    @given(
        builder=session_builders(max_entries=30),
        cuts=st.lists(st.integers(min_value=0), max_size=8),
        keep=st.floats(min_value=0, max_value=1),
    )
    def test_a_torn_log_resumes_only_where_it_is_whole(
        self, builder: PiSession, cuts: list[int], keep: float
    ) -> None:
        """A log cut anywhere resumes at a cursor its whole frames reach, or not at all."""
        data = builder.data()
        log, marks = logged(data, cuts)
        torn = log[: int(len(log) * keep)]
        whole_frames = list(frames(torn))
        full = whole(data)
        for n, mark in enumerate(marks):
            assert full.header is not None
            found = resume(torn, mark, full.header)
            assert (found is not None) == (n < len(whole_frames))
            if found is not None:
                found.state.feed(data[mark.offset :])
                assert record(full) == record(found.state)

    def test_a_cursor_the_log_never_saw_is_not_resumed(self) -> None:
        w = PiSession("s")
        w.user("hello")
        w.assistant("hi")
        data = w.data()
        log, marks = logged(data, [])
        full = whole(data)
        assert full.header is not None
        assert resume(log, cursor_at(marks[-1].offset + 1), full.header) is None
        other = Cursor(9, 9, marks[-1].offset, "head", marks[-1].tail)  # another file (inode)
        assert resume(log, other, full.header) is None
        assert resume(b"\x00" * 64, marks[-1], full.header) is None


def test_every_fixture_resumes_at_every_cursor() -> None:
    """Files Pi wrote (v1 with its numbered ids and kept-entry indexes, v2, v3): resumed anywhere, the same record."""
    for path in sorted(FIXTURES.rglob("*.jsonl")):
        data = path.read_bytes()
        newlines = [i + 1 for i, byte in enumerate(data) if byte == 0x0A]
        cuts = newlines[:: max(1, len(newlines) // 12)]
        log, marks = logged(data, cuts)
        full = whole(data)
        if full.header is None or full.reader.not_session:
            continue
        expected = record(full)
        for mark in marks:
            found = resume(log, mark, full.header)
            assert found is not None, path
            found.state.feed(data[mark.offset :])
            assert expected == record(found.state), (path, mark.offset)
