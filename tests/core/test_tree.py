"""The entry tree: tips, ``getBranch``, several roots, orphans, duplicate ids, cycles, names."""

from __future__ import annotations

import pytest

from pbot_watch.history.jstext import collapse_whitespace, utf16_slice
from pbot_watch.history.project import SessionFile, fallback_name
from tests.support.pi_sessions import MISSING, PiSession, exchanges_of, history_of, record_of


def ids(data: bytes) -> list[list[list[str]]]:
    return [[ex[0] for ex in branch] for branch in exchanges_of(data)]


class TestBranches:
    def test_each_tip_is_a_branch_sharing_the_prefix(self) -> None:
        """Two tips under one answer give two branches that both start with the shared exchange."""
        b = PiSession()
        u1, a1 = b.turn("root q")
        u2, a2 = b.turn("left q")
        b.leaf = a1
        u3, a3 = b.turn("right q")
        assert [[[u1, a1], [u2, a2]], [[u1, a1], [u3, a3]]] == ids(b.data())

    def test_several_roots(self) -> None:
        """A second ``parentId: null`` entry starts a separate tree (Pi's resetLeaf)."""
        b = PiSession()
        u1, a1 = b.turn("first tree")
        b.leaf = None
        u2, a2 = b.turn("second tree")
        assert [[[u1, a1]], [[u2, a2]]] == ids(b.data())

    def test_orphan_starts_its_own_branch(self) -> None:
        """A missing parent ends ``getBranch`` silently: the orphan's chain is a branch of its own."""
        b = PiSession()
        u1, a1 = b.turn("main")
        b.leaf = "gone0000"
        u2, a2 = b.turn("orphaned")
        assert [[[u1, a1]], [[u2, a2]]] == ids(b.data())

    def test_non_message_tip_repeats_its_branch(self) -> None:
        """A label, custom entry or session_info as the last entry is a tip; its branch adds no nodes."""
        b = PiSession()
        u1, a1 = b.turn("q")
        b.label(a1, "checkpoint")
        b.custom()
        b.info("named at the end")
        record = record_of(b.data())
        assert [[[u1, a1]]] == ids(b.data())
        assert ["rec:0:" + a1, "rec"] == [n["id"] for n in record["nodes"]]
        assert "named at the end" == record["name"]

    def test_side_tip_without_exchanges_is_dropped(self) -> None:
        """A branch of only non-message entries gives no exchanges and is left out."""
        b = PiSession()
        b.custom()
        side = b.leaf
        u, a = b.turn("q")
        b.leaf = side
        b.label(side)
        assert [[[u, a]]] == ids(b.data())

    def test_duplicate_id_last_entry_wins(self) -> None:
        """Two entries with one id: the id map keeps the later one, as Pi's does."""
        b = PiSession()
        u1 = b.user("original question")
        a1 = b.assistant("first answer")
        b.leaf = u1
        b.assistant("second answer", id=a1)
        texts = [[ex[2] for ex in branch] for branch in exchanges_of(b.data())]
        assert [["用户：\noriginal question\n\n助手：\nsecond answer"]] == texts

    def test_fork_copies_share_node_suffixes(self) -> None:
        """A /fork copies entry ids into a new session: the two records' node ids differ only by record id."""
        source = PiSession(session_id="s-source")
        _u1, a1 = source.turn("shared")
        fork = PiSession(session_id="s-fork", entries=[dict(e) for e in source.entries], leaf=a1, counter=100)
        source.turn("only in source")
        _u2, a2 = fork.turn("only in fork")
        left = record_of(source.data(), record_id="r1")
        right = record_of(fork.data(), record_id="r2")
        assert "r1:0:" + a1 in {n["id"] for n in left["nodes"]}
        assert {"r2:0:" + a1, "r2:0:" + a2, "r2"} == {n["id"] for n in right["nodes"]}

    def test_parent_arriving_after_child_joins_branches(self) -> None:
        """An entry whose parent appears later in the file (hand-made, concatenated) is linked once it does."""
        b = PiSession()
        u2 = b.user("second", parent="p0000001")
        a2 = b.assistant("second answer")
        u1 = b.user("first", parent=None, id="p0000000")
        b.add("custom", parent=u1, id="p0000001", customType="x")
        assert [[[u1, u2, a2]]] == ids(b.data())


class TestCycles:
    def test_cycle_is_cut_and_reported(self) -> None:
        """A parentId cycle made by duplicate ids is cut at the first repeat and the tip is named."""
        b = PiSession()
        b.user("q", id="aaaa0001", parent=None)
        b.assistant("a", id="aaaa0002", parent="aaaa0001")
        b.user("loop", id="aaaa0001", parent="aaaa0002")  # now aaaa0001 -> aaaa0002 -> aaaa0001
        b.assistant("tail", id="aaaa0003", parent="aaaa0002")
        state = SessionFile()
        state.feed(b.data())
        history = state.history()
        assert history is not None
        assert [[(["aaaa0001", "aaaa0002"], True, "用户：\nloop\n\n助手：\na")]] == [
            [(e["entryIds"], e["completed"], e["text"]) for e in branch] for branch in history.branches
        ]
        assert {"aaaa0003"} == state.tree.cycles

    def test_child_of_self_parented_entry_is_cut(self) -> None:
        """An entry that is its own parent ends the walk of the branches below it."""
        b = PiSession()
        b.add("custom", id="selfself", parent="selfself", customType="x")
        u, a = b.turn("below the loop")
        state = SessionFile()
        state.feed(b.data())
        history = state.history()
        assert history is not None
        assert [[[u, a]]] == [[e["entryIds"] for e in branch] for branch in history.branches]
        assert {a} == state.tree.cycles


class TestOddIds:
    def test_missing_parent_key_entries_are_not_tips(self) -> None:
        """v1 entries copied by --fork have neither id nor parentId; only the new chain is a branch."""
        b = PiSession()
        b.user("old", id=MISSING, parent=MISSING)
        b.assistant("old answer", id=MISSING, parent=MISSING)
        start = b.add("thinking_level_change", parent=MISSING, thinkingLevel="off")
        b.leaf = start
        u, a = b.turn("new")
        assert [[[u, a]]] == ids(b.data())

    def test_tip_without_id_stands_for_the_leaf(self) -> None:
        """pbot's getBranch(undefined) walks from the leaf: that branch takes the id-less tip's place."""
        b = PiSession()
        u1, a1 = b.turn("first tree")
        b.add("custom", id=MISSING, parent=None, customType="x")
        b.leaf = None
        u2, a2 = b.turn("second tree, the leaf")
        b.leaf = a1
        u3, a3 = b.turn("continuation of the first")
        b.leaf = a2
        b.custom()
        assert [[[u2, a2]], [[u1, a1], [u3, a3]]] == ids(b.data())

    def test_non_object_line_moves_the_leaf(self) -> None:
        """A JSON line that is not an object is an entry without id (counted as malformed)."""
        b = PiSession()
        b.turn("q")
        data = b.data() + b"42\n"
        state = SessionFile()
        state.feed(data)
        assert 1 == state.reader.malformed
        assert state.tree.leaf is None


class TestSessionName:
    def test_latest_session_info_in_file_order_wins(self) -> None:
        """The name is the last session_info in the file, even when it sits on another branch."""
        b = PiSession()
        b.info("first name")
        _, a1 = b.turn("q")
        b.turn("main line")
        b.leaf = a1
        b.info("renamed on a side branch")
        b.leaf = a1
        assert "renamed on a side branch" == history_of(b.data()).name

    def test_empty_name_clears(self) -> None:
        """An empty (or blank) name clears the title and the fallback applies."""
        b = PiSession()
        b.info("named")
        b.turn("what  is\tthis", "an answer")
        b.info("   ")
        assert "用户： what is this 助手： an answer" == history_of(b.data()).name

    def test_name_is_trimmed(self) -> None:
        """Pi trims the stored name (``name?.trim()``)."""
        b = PiSession()
        b.turn("q")
        b.info("\u3000 padded \n")
        assert "padded" == history_of(b.data()).name

    def test_fallback_collapses_whitespace_and_may_end_in_space(self) -> None:
        """80 UTF-16 units of the first exchange's text, whitespace runs as one space; a trailing space stays."""
        text = "x" * 75 + "\n\n  \t y"
        name = fallback_name("用户：\n" + text)
        assert "用户： " + "x" * 75 + " " == name
        assert 80 == len(name.encode("utf-16-le")) // 2

    def test_fallback_may_cut_a_surrogate_pair(self) -> None:
        """The 80th unit can be half an emoji; the lone surrogate is kept, as JavaScript's slice does."""
        name = fallback_name("a" * 79 + "😀 tail")
        assert "a" * 79 + "\ud83d" == name

    @pytest.mark.parametrize(
        "text",
        [
            "word " * 100_000,
            " \n\t" * 50_000 + "late start " * 20,
            "x" * 79 + "\n" * 10_000 + "y",
            "😀" * 39 + " \n " * 1000 + "😀😀",
            "short",
        ],
        ids=["long", "leading whitespace", "run at the cut", "surrogates", "short"],
    )
    def test_fallback_of_a_long_text_equals_the_whole_collapsed(self, text: str) -> None:
        """Collapsing only what the cut needs gives the name the whole text would."""
        assert utf16_slice(collapse_whitespace(text), 0, 80) == fallback_name(text)

    def test_fallback_uses_first_branch_first_exchange(self) -> None:
        """Without a session_info, the first exchange of the first branch names the session."""
        b = PiSession()
        b.turn("the very first question")
        assert history_of(b.data()).name.startswith("用户： the very first question 助手： ok")


class TestBadLines:
    def test_bad_lines_are_counted_and_skipped(self) -> None:
        """Torn JSON, NaN, deep nesting and blank lines are skipped; the entries around them stay."""
        b = PiSession()
        u, a = b.turn("before")
        data = b.data() + b'{"type":"message","id":"x"\n' + b"NaN\n" + b"[" * 100000 + b"\n" + b"   \n"
        tail = PiSession(counter=10)
        tail.leaf = a
        u2, a2 = tail.turn("after")
        state = SessionFile()
        state.feed(data + b"".join(tail.data().splitlines(keepends=True)[1:]))
        assert (3, 1) == (state.reader.malformed, state.reader.blank)
        history = state.history()
        assert [[[u, a], [u2, a2]]] == [[e["entryIds"] for e in br] for br in history.branches]
