"""Cue ledgers: fed in any pieces they give the cues of the whole file; followed, they read only what was appended."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pbot_watch.memory.cue_follow import FollowedCues, NotASession, clean_ledgers
from pbot_watch.memory.cues import CueLedger, ledger_cues
from pbot_watch.pi.entries import SessionReader
from tests.memory.test_cues import random_session
from tests.memory.work import Work, cues_of


def entries_of(path: Path) -> tuple[str, list[dict[str, object]]]:
    reader = SessionReader()
    entries = reader.feed(path.read_bytes())
    assert reader.header is not None
    return reader.header.id, entries


def session_with_work(path: Path) -> Work:
    work = Work(path, cwd="/w")
    work.run("npm test", "FAIL one\n", error=True)
    first = work.read("src/a.ts")
    work.compact()
    work.recall(first)
    work.edit("src/a.ts")
    work.run("npm test", "Tests 3 passed (3)\n")
    work.compact()
    return work


class TestLedger:
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(seed=st.integers(0, 10_000), data=st.data())
    def test_fed_in_pieces_it_gives_the_cues_of_the_whole_file(
        self, tmp_path_factory: pytest.TempPathFactory, seed: int, data: st.DataObject
    ) -> None:
        """Cuts anywhere, between a call and its result too: the block of compute_cues on all entries."""
        path = tmp_path_factory.mktemp("ledger") / "s.jsonl"
        random_session(path, seed)
        session_id, entries = entries_of(path)
        cuts = sorted(data.draw(st.lists(st.integers(0, len(entries)), max_size=10)))
        ledger = CueLedger(session_id, "/w")
        start = 0
        for cut in [*cuts, len(entries)]:
            ledger.feed(entries[start:cut])
            start = cut
        for leaf in [None, *(str(e["id"]) for e in entries if e.get("type") == "compaction")]:
            assert ledger_cues(ledger, leaf=leaf, context_window=4000) == cues_of(
                path, leaf=leaf, context_window=4000, cwd="/w"
            )

    def test_a_call_answered_in_a_later_piece_is_one_line(self, tmp_path: Path) -> None:
        """Fed before its result, a call is "no result"; its result, fed later, takes its place."""
        path = tmp_path / "s.jsonl"
        work = Work(path)
        work.w.assistant(None, calls=[("c1", "bash", {"command": "make"})], id="a1")
        work.w.tool_result("built\n", call_id="c1", name="bash", id="t1")
        work.compact()
        session_id, entries = entries_of(path)
        ledger = CueLedger(session_id)
        ledger.feed(entries[:1])
        assert [w.full for w in ledger.work.values()] == ["bash(make) (no result)"]
        ledger.feed(entries[1:])
        assert [w.full for w in ledger.work.values()] == ["bash(make) → built"]
        state = ledger_cues(ledger)
        assert [line.text.split(" ", 1)[1] for line in state.lines] == [
            f"00:02 bash(make) → built {state.lines[0].handle}"
        ]
        assert state == cues_of(path)


def appended(path: Path, write: object) -> int:
    """Bytes ``write()`` appended to ``path``."""
    before = path.stat().st_size
    assert callable(write)
    write()
    return path.stat().st_size - before


class TestFollowing:
    def test_a_followed_file_is_read_only_where_it_grew(self, tmp_path: Path) -> None:
        """Asked again after Pi appended, the ledger reads the appended bytes, and the cues are the file's."""
        path = tmp_path / "s.jsonl"
        work = session_with_work(path)
        followed = FollowedCues()
        assert ledger_cues(followed.ledger(path)) == cues_of(path)
        assert followed.bytes_read == path.stat().st_size
        assert ledger_cues(followed.ledger(path)) == cues_of(path)
        assert followed.bytes_read == path.stat().st_size  # unchanged: nothing read

        def more() -> None:
            work.run("npm run build", "error TS2304: Cannot find name 'x'.\n", error=True)
            work.compact()

        grown = appended(path, more)
        before = followed.bytes_read
        assert ledger_cues(followed.ledger(path), context_window=4000) == cues_of(path, context_window=4000)
        assert followed.bytes_read - before == grown

    def test_idle_steps_read_a_watched_file_before_it_is_asked_for(self, tmp_path: Path) -> None:
        path = tmp_path / "s.jsonl"
        session_with_work(path)
        followed = FollowedCues()
        followed.watch(path)
        while followed.follow(budget=100):
            pass
        assert followed.bytes_read == path.stat().st_size
        followed.ledger(path)
        assert followed.bytes_read == path.stat().st_size  # the request read nothing more

    def test_a_rewritten_file_is_read_again_from_its_start(self, tmp_path: Path) -> None:
        path = tmp_path / "s.jsonl"
        session_with_work(path)
        followed = FollowedCues()
        followed.ledger(path)
        other = tmp_path / "other.jsonl"
        work = Work(other, session="sess-other")
        work.run("cargo test", "test result: FAILED\n", error=True)
        work.compact()
        os.replace(other, path)
        assert ledger_cues(followed.ledger(path)) == cues_of(path)
        assert ledger_cues(followed.ledger(path)).session_id == "sess-other"

    def test_a_fifo_or_a_file_without_header_is_no_session(self, tmp_path: Path) -> None:
        fifo = tmp_path / "fifo.jsonl"
        os.mkfifo(fifo)
        with pytest.raises(NotASession, match="not a Pi session"):
            FollowedCues().ledger(fifo)
        text = tmp_path / "notes.jsonl"
        text.write_text('{"type": "message"}\n')
        with pytest.raises(NotASession, match="not a Pi session"):
            FollowedCues().ledger(text)


def saved_ledger(folder: Path) -> tuple[Path, Path]:
    """A session of tool work in ``folder`` and the store its ledger was saved in."""
    path = folder / "s.jsonl"
    session_with_work(path)
    store = folder / "ledgers"
    first = FollowedCues(store, saved_from=0)
    first.ledger(path)
    first.follow()  # caught up: saved
    return path, store


class TestSavedLedgers:
    def test_a_new_process_starts_from_the_saved_ledger(self, tmp_path: Path) -> None:
        """Saved when caught up, a ledger lets the next child read only what was appended since."""
        path = tmp_path / "s.jsonl"
        work = session_with_work(path)
        store = tmp_path / "ledgers"
        first = FollowedCues(store, saved_from=0)
        first.ledger(path)
        assert first.follow() is True  # the idle step saves it
        assert first.follow() is False
        (saved,) = store.iterdir()

        grown = appended(path, lambda: (work.run("ls", "a\nb\n"), work.compact()))
        second = FollowedCues(store, saved_from=0)
        assert ledger_cues(second.ledger(path), context_window=4000) == cues_of(path, context_window=4000)
        assert second.bytes_read == grown
        assert saved.exists()

    @pytest.mark.parametrize(
        "damage",
        [
            "garbage",
            "cut short",
            "a body byte changed",
            "other version",
            "other format",
            "other path",
            "other redaction",
            "empty",
        ],
    )
    def test_a_damaged_stale_or_foreign_ledger_is_not_used(self, tmp_path: Path, damage: str) -> None:
        """Whatever is wrong with the saved ledger, the file is read again and the cues are its own."""
        path, store = saved_ledger(tmp_path)
        (saved,) = store.iterdir()
        data = saved.read_bytes()
        line, _, body = data.partition(b"\n")
        head = json.loads(line)
        if damage == "garbage":
            data = b"{not json"
        elif damage == "cut short":
            data = data[: len(data) - 10]
        elif damage == "a body byte changed":
            at = len(line) + 1 + len(body) // 2
            data = data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]
        elif damage == "empty":
            data = b""
        else:
            field, value = {
                "other version": ("version", "0.0.1"),
                "other format": ("format", 1),
                "other path": ("path", str(tmp_path / "elsewhere.jsonl")),
                "other redaction": ("redacted", not head["redacted"]),
            }[damage]
            head[field] = value
            data = json.dumps(head).encode() + b"\n" + body
        saved.write_bytes(data)
        second = FollowedCues(store, saved_from=0)
        assert ledger_cues(second.ledger(path)) == cues_of(path)
        assert second.bytes_read == path.stat().st_size  # read again, whole

    def test_a_ledger_of_a_file_rewritten_since_is_not_used(self, tmp_path: Path) -> None:
        path, store = saved_ledger(tmp_path)
        work = Work(tmp_path / "other.jsonl", session="sess-other")
        work.run("cargo test", "test result: FAILED\n", error=True)
        work.compact()
        path.write_bytes((tmp_path / "other.jsonl").read_bytes() + b"\n" * 4000)  # same inode, longer
        second = FollowedCues(store, saved_from=0)
        assert ledger_cues(second.ledger(path)).session_id == "sess-other"
        assert second.bytes_read == path.stat().st_size

    def test_ledgers_of_gone_files_and_old_formats_are_cleaned(self, tmp_path: Path) -> None:
        path = tmp_path / "s.jsonl"
        session_with_work(path)
        gone = tmp_path / "gone.jsonl"
        session_with_work(gone)
        store = tmp_path / "ledgers"
        first = FollowedCues(store, saved_from=0)
        first.ledger(path)
        first.ledger(gone)
        while first.follow():
            pass
        assert len(list(store.iterdir())) == 2
        (store / "0123.json").write_text('{"format": 1}')  # a ledger of format 1 (JSON)
        gone.unlink()
        assert clean_ledgers(store) == 2
        (kept,) = store.iterdir()
        assert kept == first.saved_file(path)

    def test_a_ledger_holding_a_lone_surrogate_is_not_saved(self, tmp_path: Path) -> None:
        """msgpack holds UTF-8 only: such a session is read by each process, its cues are right."""
        path = tmp_path / "s.jsonl"
        work = session_with_work(path)
        work.w.assistant(None, calls=[("c-odd", "bash", {"command": "cat odd.bin"})], id="a-odd")
        work.w.raw(
            b'{"type":"message","id":"t-odd","parentId":"a-odd","timestamp":"2026-11-01T01:00:00.000Z",'
            b'"message":{"role":"toolResult","toolCallId":"c-odd","toolName":"bash",'
            b'"content":[{"type":"text","text":"half \\ud800 a character"}],"isError":true}}\n'
        )
        work.w.branch_at("t-odd")
        work.compact(kept=work.ask())
        store = tmp_path / "ledgers"
        first = FollowedCues(store, saved_from=0)
        state = ledger_cues(first.ledger(path))
        assert "\ud800" in state.text
        assert state == cues_of(path)
        while first.follow():
            pass
        assert not any(store.glob("*.cues"))
        second = FollowedCues(store, saved_from=0)
        assert ledger_cues(second.ledger(path)) == state
        assert second.bytes_read == path.stat().st_size

    def test_small_files_leave_no_saved_ledger(self, tmp_path: Path) -> None:
        path = tmp_path / "s.jsonl"
        session_with_work(path)
        store = tmp_path / "ledgers"
        followed = FollowedCues(store)
        followed.ledger(path)
        followed.follow()
        assert not store.exists()
