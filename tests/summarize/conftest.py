"""Fixtures for summary tests: a real OpenAI-compatible server on 127.0.0.1, a small history."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pbot_watch.summarize.litellm_model import litellm
from tests.support.openai_server import OpenAIServer
from tests.support.pi_sessions import PiSession


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIServer]:
    """A scripted chat-completions server on 127.0.0.1, with a fake key in the environment."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    with OpenAIServer() as running:
        yield running


@pytest.fixture
def history(tmp_path: Path) -> Path:
    """A folder with ``sessions/`` holding one session of 8 exchanges (the archive goes beside it)."""
    pi = PiSession("s-main", "/w")
    pi.exchanges(8)
    pi.write(tmp_path / "sessions" / "--w--" / "main.jsonl")
    return tmp_path


@pytest.fixture
def litellm_imported() -> None:
    """litellm imported in this process before a test's clock starts: the import is CPU-bound
    (15 s at a load of 6, more above) and would otherwise be timed as the model's lateness."""
    litellm()
