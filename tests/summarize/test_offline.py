"""The offline summarizer: deterministic extraction in the input's language."""

from __future__ import annotations

import threading

import pytest

from pbot_watch.summarize.base import Cancelled, node_input
from pbot_watch.summarize.offline import OfflineSummarizer, offline_summary

ENGLISH = [
    {
        "from": "2026-01-01T10:00:00.000Z",
        "to": "2026-01-01T10:01:00.000Z",
        "completed": True,
        "text": "用户：\nFix the failing test in tests/test_api.py please. It says KeyError.\n\n助手：\n"
        "I ran `pytest -q tests/test_api.py`.\nError: KeyError 'user' in src/api/views.py.\nFixed by using get.",
    },
    {
        "from": "2026-01-01T10:02:00.000Z",
        "to": "2026-01-01T10:03:00.000Z",
        "completed": True,
        "text": "用户：\nNow run the whole suite.\n\n助手：\nAll 212 tests pass after the fix.",
    },
]
CHINESE = [
    {
        "from": "2026-01-02T10:00:00.000Z",
        "to": "2026-01-02T10:01:00.000Z",
        "completed": True,
        "text": "用户：\n请帮我修复 src/app.py 里的登录错误，用户无法登录。\n\n助手：\n"
        "我检查了 src/app.py，发现密码校验失败是因为编码问题。\n已修改为使用 utf-8，运行 `pytest -q` 全部通过。",
    },
    {
        "from": "2026-01-02T10:05:00.000Z",
        "to": "2026-01-02T10:06:00.000Z",
        "completed": False,
        "text": "用户：\n再把日志格式改成 JSON",
    },
]


class TestExchanges:
    def test_english_group(self) -> None:
        """What was asked, the files and commands, the error and the outcome, in English."""
        summary = offline_summary(node_input(ENGLISH))
        assert (
            summary.splitlines()[0]
            == "Asked: Fix the failing test in tests/test_api.py please; Now run the whole suite"
        )
        assert "Files: tests/test_api.py; src/api/views.py" in summary
        assert "Commands: pytest -q tests/test_api.py" in summary
        assert "Errors: Error: KeyError 'user' in src/api/views.py" in summary
        assert summary.splitlines()[-1] == "Outcome: All 212 tests pass after the fix."

    def test_chinese_group(self) -> None:
        """Chinese input gets Chinese labels, and an unfinished last exchange has no outcome."""
        summary = offline_summary(node_input(CHINESE))
        assert summary.startswith(
            "提问：请帮我修复 src/app.py 里的登录错误，用户无法登录。；再把日志格式改成 JSON\n"
        )
        assert "文件：src/app.py" in summary
        assert "命令：pytest -q" in summary
        assert "结果：没有最终答复" in summary
        assert "未完成：2 段中有 1 段没有最终答复" in summary

    def test_outcome_keeps_the_result(self) -> None:
        """The final answer is kept whole, not cut after its first sentence; a long one keeps its end."""
        short = [{**ENGLISH[1], "text": "用户：\nRun it.\n\n助手：\nI ran the suite.\n3 tests fail in x.py."}]
        assert (
            offline_summary(node_input(short)).splitlines()[-1]
            == "Outcome: I ran the suite. 3 tests fail in x.py."
        )
        long = (
            "I ran the suite. " + "Then I looked at the logs again. " * 20 + "Result: 3 tests fail in x.py."
        )
        text = f"用户：\nRun it.\n\n助手：\n{long}"
        outcome = offline_summary(node_input([{**ENGLISH[1], "text": text}])).splitlines()[-1]
        assert outcome == "Outcome: I ran the suite. … Result: 3 tests fail in x.py."

    def test_labels_do_not_decide_the_language(self) -> None:
        """pbot's Chinese speaker labels and unfinished mark do not make English input Chinese."""
        assert offline_summary(node_input(ENGLISH)).startswith("Asked:")


class TestUpperLevels:
    def test_merges_topics_names_and_keywords(self) -> None:
        """A level-2 input lists the span, each part's topic, names and repeated keywords."""
        first = offline_summary(node_input(ENGLISH))
        second = offline_summary(node_input(ENGLISH[1:]))
        upper = offline_summary(
            node_input(
                [
                    {
                        "from": "2026-01-01T10:00:00.000Z",
                        "to": "2026-01-01T10:03:00.000Z",
                        "completed": True,
                        "text": first,
                    },
                    {
                        "from": "2026-01-01T11:00:00.000Z",
                        "to": "2026-01-01T11:03:00.000Z",
                        "completed": True,
                        "text": second,
                    },
                ]
            )
        )
        lines = upper.splitlines()
        assert lines[0] == "Period: 2026-01-01T10:00:00.000Z — 2026-01-01T11:03:00.000Z"
        assert lines[1] == "Topics: Fix the failing test in tests/test_api.py please; Now run the whole suite"
        assert "Names and paths: tests/test_api.py; src/api/views.py" in upper

    def test_chinese_upper_level(self) -> None:
        """Chinese summaries merge into a Chinese summary."""
        first = offline_summary(node_input(CHINESE))
        upper = offline_summary(node_input([{"from": "a", "to": "b", "completed": True, "text": first}] * 2))
        assert upper.startswith("时间：a — b\n话题：请帮我修复 src/app.py 里的登录错误")


class TestSummarizer:
    def test_deterministic_and_never_empty(self) -> None:
        """The same input gives the same summary; even odd input gives some text."""
        summarizer = OfflineSummarizer()
        cancel = threading.Event()
        assert summarizer.summarize(node_input(ENGLISH), cancel) == summarizer.summarize(
            node_input(ENGLISH), cancel
        )
        assert summarizer.summarize("[x — y]\n", cancel).text.strip()
        assert summarizer.summarize("", cancel).text.strip()

    def test_honours_cancel(self) -> None:
        """Even the instant summarizer does not start once cancelled."""
        cancel = threading.Event()
        cancel.set()
        with pytest.raises(Cancelled):
            OfflineSummarizer().summarize("text", cancel)
