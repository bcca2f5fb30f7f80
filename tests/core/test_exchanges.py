"""Branches into exchanges: pbot 0.2.3's ``exchanges()`` rules on generated sessions."""

from __future__ import annotations

from tests.support.pi_sessions import PiSession, exchanges_of

U, A = "用户：\n", "\n\n助手：\n"


class TestExchangeText:
    def test_plain_turn(self) -> None:
        """A user message and a final answer make one completed exchange with pbot's labels."""
        b = PiSession()
        u, a = b.turn("hello", "hi there")
        assert [[([u, a], True, U + "hello" + A + "hi there")]] == exchanges_of(b.data())

    def test_thinking_and_tools_stay_out(self) -> None:
        """Tool calls, tool results and thinking never enter the text; only the final answer does."""
        b = PiSession()
        u = b.user("list files")
        b.assistant("running", "toolUse", tool=True)
        b.tool_result("a.txt\nb.txt")
        a = b.assistant("two files", thinking="count them")
        assert [[([u, a], True, U + "list files" + A + "two files")]] == exchanges_of(b.data())

    def test_images_become_a_mark(self) -> None:
        """An image block is written as [图片], joined to text blocks by newlines."""
        b = PiSession()
        u = b.user(
            [{"type": "text", "text": "look"}, {"type": "image", "data": "AA==", "mimeType": "image/png"}]
        )
        a = b.assistant("a cat")
        assert [[([u, a], True, U + "look\n[图片]" + A + "a cat")]] == exchanges_of(b.data())

    def test_text_block_without_text_is_undefined(self) -> None:
        """``String(block.text)`` of a missing text is the word undefined, as in pbot."""
        b = PiSession()
        u = b.user("q")
        a = b.message({"role": "assistant", "content": [{"type": "text"}], "stopReason": "stop"})
        assert [[([u, a], True, U + "q" + A + "undefined")]] == exchanges_of(b.data())

    def test_non_string_text_is_printed_as_javascript(self) -> None:
        """Numbers, null and arrays in ``text`` print as JavaScript's String() does."""
        b = PiSession()
        u = b.message(
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": 1e-7},
                    {"type": "text", "text": None},
                    {"type": "text", "text": [1, None, "x"]},
                ],
            }
        )
        a = b.assistant("ok")
        assert [[([u, a], True, U + "1e-7\nnull\n1,,x" + A + "ok")]] == exchanges_of(b.data())

    def test_string_content(self) -> None:
        """Old files hold user content as a plain string; it is used as is."""
        b = PiSession()
        u = b.message({"role": "user", "content": "plain string"})
        a = b.assistant("ok")
        assert [[([u, a], True, U + "plain string" + A + "ok")]] == exchanges_of(b.data())

    def test_answer_without_content_key_has_no_assistant_part(self) -> None:
        """An answer message with no ``content`` key adds no 助手 section (pbot checks ``"content" in``)."""
        b = PiSession()
        u = b.user("q")
        a = b.message({"role": "assistant", "stopReason": "aborted"})
        assert [[([u, a], False, U + "q")]] == exchanges_of(b.data())


class TestExchangeBoundaries:
    def test_steering_message_joins_open_exchange(self) -> None:
        """A user message after a toolUse cut joins the exchange: users first, final answer last."""
        b = PiSession()
        u1 = b.user("do it")
        b.assistant("working", "toolUse", tool=True)
        b.tool_result()
        u2 = b.user("also check the tests")
        b.assistant("checking", "toolUse", tool=True)
        b.tool_result()
        a = b.assistant("done both")
        text = U + "do it\n\n" + U + "also check the tests" + A + "done both"
        assert [[([u1, u2, a], True, text)]] == exchanges_of(b.data())

    def test_follow_up_before_any_answer(self) -> None:
        """Two user messages in a row belong to the same exchange."""
        b = PiSession()
        u1 = b.user("first")
        u2 = b.user("and then")
        a = b.assistant("answer")
        assert [[([u1, u2, a], True, U + "first\n\n" + U + "and then" + A + "answer")]] == exchanges_of(
            b.data()
        )

    def test_length_cut_keeps_exchange_open(self) -> None:
        """An answer cut by ``length`` does not close; the next user message joins (fixture 03's case)."""
        b = PiSession()
        u1 = b.user("long please")
        b.assistant("partial...", "length")
        u2 = b.user("next question")
        a = b.assistant("answer")
        assert [
            [([u1, u2, a], True, U + "long please\n\n" + U + "next question" + A + "answer")]
        ] == exchanges_of(b.data())

    def test_aborted_answer_closes_incomplete_on_next_user(self) -> None:
        """An aborted answer ends its exchange as not completed when the next user message comes."""
        b = PiSession()
        u1 = b.user("slow task")
        a1 = b.assistant("half", "aborted")
        u2, a2 = b.turn("other", "fine")
        assert [
            [([u1, a1], False, U + "slow task" + A + "half"), ([u2, a2], True, U + "other" + A + "fine")]
        ] == (exchanges_of(b.data()))

    def test_error_answer_closes_incomplete_on_next_user(self) -> None:
        """An error answer is kept as the answer of a not-completed exchange."""
        b = PiSession()
        u1 = b.user("flaky")
        a1 = b.assistant(None, "error")
        u2, a2 = b.turn("again", "ok")
        assert [
            [([u1, a1], False, U + "flaky" + A), ([u2, a2], True, U + "again" + A + "ok")]
        ] == exchanges_of(b.data())

    def test_retry_after_error_drops_failed_attempt(self) -> None:
        """Pi's automatic retry answers the same user message: the failed attempt is not listed."""
        b = PiSession()
        u = b.user("[[fail-once]] hi")
        failed = b.assistant(None, "error")
        b.add("context_edit", targetId=failed, replacement=None)
        a = b.assistant("hello")
        assert [[([u, a], True, U + "[[fail-once]] hi" + A + "hello")]] == exchanges_of(b.data())

    def test_unanswered_tail_is_incomplete(self) -> None:
        """A branch ending with a user message (or a tool cut) gives a not-completed exchange."""
        b = PiSession()
        u1, a1 = b.turn("q1", "a1")
        u2 = b.user("q2")
        t = b.assistant("calling", "toolUse", tool=True)
        b.tool_result()
        assert [[([u1, a1], True, U + "q1" + A + "a1"), ([u2, t], False, U + "q2" + A + "calling")]] == (
            exchanges_of(b.data())
        )

    def test_stop_with_tool_call_stays_open(self) -> None:
        """An answer that stopped but still calls a tool is not final."""
        b = PiSession()
        u = b.user("q")
        b.assistant("calling", "stop", tool=True)
        b.tool_result()
        a = b.assistant("final")
        assert [[([u, a], True, U + "q" + A + "final")]] == exchanges_of(b.data())

    def test_assistant_before_any_user_is_ignored(self) -> None:
        """Answers with no open question (after a compaction, say) start nothing."""
        b = PiSession()
        b.assistant("orphan answer")
        u, a = b.turn("q", "a")
        assert [[([u, a], True, U + "q" + A + "a")]] == exchanges_of(b.data())

    def test_other_roles_and_entries_are_skipped(self) -> None:
        """System, bashExecution, custom messages and custom_message entries are not exchanges."""
        b = PiSession()
        b.message({"role": "system", "content": "you are pi"})
        u = b.user("q")
        b.message({"role": "bashExecution", "command": "ls", "output": "x", "exitCode": 0})
        b.add("custom_message", customType="note", content="injected", display=True)
        b.message({"role": "custom", "customType": "x", "content": "c", "display": True})
        a = b.assistant("a")
        assert [[([u, a], True, U + "q" + A + "a")]] == exchanges_of(b.data())

    def test_session_without_user_message_has_no_history(self) -> None:
        """A session holding only settings and a system message yields no record."""
        b = PiSession()
        b.add("model_change", provider="p", modelId="m")
        b.message({"role": "system", "content": "sys"})
        assert [] == exchanges_of(b.data())
