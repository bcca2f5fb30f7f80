"""The cursor rule (``pi/cursor``): what a change to a session file means, from stat and fingerprints."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pbot_watch.pi.cursor import Cursor, fingerprint, hasher, plan, verify
from pbot_watch.sources import WholeDigest, plan_open

DATA = b"".join(b'{"line": %d}\n' % i for i in range(2000))
OFFSET = len(DATA)
MTIME = 1_000


def cursor_of(data: bytes, *, mtime_ns: int = MTIME, whole: str | None = None) -> Cursor:
    (hs, hl), (ts, tl) = Cursor.windows(len(data))
    return Cursor(
        1,
        2,
        len(data),
        fingerprint(data[hs : hs + hl]),
        fingerprint(data[ts : ts + tl]),
        mtime_ns,
        fingerprint(data) if whole is None else whole,
    )


def plan_for(cursor: Cursor | None, data: bytes, *, mtime_ns: int = MTIME, ino: int = 2) -> str:
    offset = cursor.offset if cursor else 0
    (hs, hl), (ts, tl) = Cursor.windows(offset)
    return plan(cursor, 1, ino, len(data), mtime_ns, data[hs : hs + hl], data[ts : ts + tl])


class TestPlan:
    def test_unchanged(self) -> None:
        """Same size, same mtime: nothing to do, nothing hashed."""
        assert "nothing" == plan_for(cursor_of(DATA), DATA)

    def test_append(self) -> None:
        """Longer with the same windows: an append, read from the offset."""
        assert "append" == plan_for(cursor_of(DATA), DATA + b'{"more": 1}\n', mtime_ns=MTIME + 1)

    def test_same_size_new_mtime_is_verified(self) -> None:
        """Same size, new mtime: the windows cannot tell, the whole fingerprint must."""
        assert "verify" == plan_for(cursor_of(DATA), DATA, mtime_ns=MTIME + 1)

    def test_edit_in_a_window_is_a_reread(self) -> None:
        """A change inside the first 4 KB is seen from the windows alone."""
        edited = b"X" + DATA[1:]
        assert "reread" == plan_for(cursor_of(DATA), edited, mtime_ns=MTIME + 1)

    @pytest.mark.parametrize(
        ("what", "data", "ino"),
        [("shorter", DATA[:-10], 2), ("new inode", DATA, 3)],
    )
    def test_shorter_or_replaced_is_a_reread(self, what: str, data: bytes, ino: int) -> None:
        """A shrink or another inode behind the path: read from 0."""
        assert "reread" == plan_for(cursor_of(DATA), data, ino=ino), what

    def test_no_cursor(self) -> None:
        """A file never read: read it, unless it is empty."""
        assert ("reread", "nothing") == (plan_for(None, DATA), plan_for(None, b""))


class TestVerify:
    def test_same_size_edit_in_the_middle_is_a_reread(self) -> None:
        """``question number 20`` -> ``QUESTION NUMBER 20`` mid-file: the whole fingerprint differs."""
        middle = OFFSET // 2
        edited = DATA[:middle] + DATA[middle : middle + 6].upper() + DATA[middle + 6 :]
        assert len(edited) == len(DATA)
        assert "verify" == plan_for(cursor_of(DATA), edited, mtime_ns=MTIME + 1)
        assert "reread" == verify(cursor_of(DATA), fingerprint(edited))

    def test_touch_is_nothing(self) -> None:
        """A new mtime on the same bytes: nothing to read (the caller keeps the refreshed cursor)."""
        cursor = cursor_of(DATA)
        assert "nothing" == verify(cursor, fingerprint(DATA))
        refreshed = cursor.seen(MTIME + 1, fingerprint(DATA))
        assert "nothing" == plan_for(refreshed, DATA, mtime_ns=MTIME + 1)

    def test_cursor_from_before_whole_fingerprints_is_trusted(self) -> None:
        """An old cursor (no whole fingerprint) keeps the old rule: windows only, then refreshed."""
        assert "nothing" == verify(cursor_of(DATA, mtime_ns=0, whole=""), fingerprint(b"anything"))

    def test_running_hash_equals_fingerprint(self) -> None:
        """The running fingerprint fed in pieces equals the fingerprint of the whole."""
        running = hasher()
        for start in range(0, OFFSET, 4099):
            running.update(DATA[start : start + 4099])
        assert fingerprint(DATA) == running.hexdigest()


class TestWholeDigest:
    def test_blocks_resumed_go_on_like_one_digest(self, tmp_path: Path) -> None:
        """A digest brought back from its block digests ends where one that read every byte ends."""
        path = tmp_path / "f"
        path.write_bytes(DATA * 200)  # several blocks
        with path.open("rb") as handle:
            first = WholeDigest()
            middle = first.extend(handle.fileno(), len(DATA) * 120 + 7)
            again = WholeDigest(first.blocks)
            assert again.upto <= first.upto
            assert again.extend(handle.fileno(), first.upto) == middle
            assert again.extend(handle.fileno(), len(DATA) * 200) == first.extend(
                handle.fileno(), len(DATA) * 200
            )

    @pytest.mark.parametrize("edited", [False, True])
    def test_a_cursor_with_an_old_whole_fingerprint_is_verified_as_it_was_made(
        self, tmp_path: Path, edited: bool
    ) -> None:
        """A cursor saved before fingerprints were made of blocks: a touch is still nothing, an edit a re-read."""
        path = tmp_path / "f"
        path.write_bytes(DATA)
        st = path.stat()
        old = Cursor(
            st.st_dev, st.st_ino, OFFSET, *cursor_of(DATA).row()[3:5], st.st_mtime_ns, fingerprint(DATA)
        )
        if edited:
            with path.open("r+b") as out:
                out.seek(OFFSET // 2)
                out.write(b"X")
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        fd = os.open(path, os.O_RDONLY)
        try:
            decision, _ = plan_open(fd, os.fstat(fd), old)
        finally:
            os.close(fd)
        assert decision == ("reread" if edited else "nothing")
