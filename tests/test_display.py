"""What a person reads: role labels in their language, snippets that show the match, lines unbroken."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pbot_watch.config import Settings
from pbot_watch.display import language, plural, record_query, relabel, snippet_window
from pbot_watch.tools.registry import call
from tests.support.cli import invoke
from tests.support.pi_sessions import PiSession, jsonl

FILLER = " ".join(f"word{i}" for i in range(60))


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    """One session: a short turn, and a long one whose match sits far into its text."""
    root = Path(os.environ["PI_CODING_AGENT_DIR"]) / "sessions"
    workspace = tmp_path / "work"
    workspace.mkdir()
    pi = PiSession(cwd=str(workspace))
    pi.turn("how do I bake the quince tart?", "Slowly, at 160 degrees.")
    pi.turn(f"{FILLER} and then the zucchini bread", "It needs an hour.")
    path = root / "--work--" / "s.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(jsonl([pi.header(), *pi.entries]))
    assert 0 == invoke("index").returncode
    return root


class TestLabels:
    def test_locale_and_setting_choose(self) -> None:
        assert "en" == language("auto", {"LANG": "en_US.UTF-8"})
        assert "zh" == language("auto", {"LC_ALL": "zh_CN.UTF-8", "LANG": "en_US.UTF-8"})
        assert "en" == language("auto", {})
        assert ("zh", "zh", "en") == (
            language("pbot", {}),
            language("zh", {}),
            language("en", {"LANG": "zh_CN"}),
        )

    def test_only_labels_change(self) -> None:
        text = "用户：\nwhat does 用户：x mean?\n\n助手：\nA label."
        assert "User:\nwhat does 用户：x mean?\n\nAssistant:\nA label." == relabel(text, "en")
        assert text == relabel(text, "zh")

    def test_cli_shows_the_readers_labels_json_keeps_the_records(self, sessions: Path) -> None:
        english = invoke("search", "quince", env={"LANG": "en_US.UTF-8"}).stdout
        assert "User: how do I bake the quince tart? Assistant: Slowly" in english
        assert "用户" not in english
        chinese = invoke("search", "quince", env={"LANG": "zh_CN.UTF-8"}).stdout
        assert "用户： how do I bake the quince tart? 助手： Slowly" in chinese
        raw = json.loads(invoke("search", "quince", "--json", env={"LANG": "en_US.UTF-8"}).stdout)
        assert raw["matches"][0]["snippet"].startswith("用户：\nhow do I bake")
        page = invoke("read", raw["matches"][0]["id"], env={"LANG": "en_US.UTF-8"}).stdout
        assert "User:\nhow do I bake the quince tart?\n\nAssistant:\nSlowly" in page

    def test_setting_wins_over_the_locale(self, sessions: Path, tmp_path: Path) -> None:
        config = tmp_path / "config.toml"
        config.write_text('[display]\nlabels = "pbot"\n', encoding="utf-8")
        shown = invoke(
            "search", "quince", env={"LANG": "en_US.UTF-8", "PBOT_WATCH_CONFIG": str(config)}
        ).stdout
        assert "用户： how do I bake" in shown

    def test_search_finds_a_label_in_either_language(self, sessions: Path) -> None:
        assert "用户：" == record_query("User:") and "助手：" == record_query("assistant:")
        ours = json.loads(invoke("search", "Assistant:", "--json").stdout)
        theirs = json.loads(invoke("search", "助手：", "--json").stdout)
        assert 2 == ours["total"] and ours["matches"] == theirs["matches"]

    def test_tool_text_for_the_model(self, sessions: Path) -> None:
        answer = call("history_search", {"query": "quince"}, Settings(display_labels="en"))
        assert "User: how do I bake" in answer.text and "用户" not in answer.text
        assert answer.structured is not None
        assert answer.structured["matches"][0]["snippet"].startswith("用户：")


class TestSnippets:
    def test_window_shows_the_match_and_starts_at_a_word(self) -> None:
        snippet = "rd31 " + FILLER + " and then the zucchini bread"
        shown = snippet_window(snippet, "zucchini", 80)
        assert len(shown) <= 80 and "zucchini" in shown
        assert shown.startswith("…word") and not shown.startswith("…ord")

    def test_cli_snippet_starts_at_a_word(self, sessions: Path) -> None:
        out = invoke("search", "zucchini").stdout.splitlines()
        body = next(line for line in out if "zucchini" in line).strip()
        assert body.startswith("…word"), body

    def test_piped_output_is_not_wrapped(self, sessions: Path) -> None:
        """Not a terminal: a hit stays on one line, whatever its length (grep finds it whole)."""
        out = invoke("search", "word5 ", env={"COLUMNS": "40"}).stdout.splitlines()
        assert any(len(line) > 200 and "word5" in line for line in out), out


def test_plural() -> None:
    assert ("1 file", "2 files", "0 files") == (plural(1, "file"), plural(2, "file"), plural(0, "file"))
    assert "1 not a session" == plural(1, "not a session", "not sessions")


def test_memory_hit_has_one_line_count(sessions: Path) -> None:
    out = invoke("memory", "search", "quince").stdout
    assert "[line 1 of 1]" in out
    assert "lines]" not in out and "1 lines" not in out
