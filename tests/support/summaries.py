"""Settings and archives for the summary tests: a real store indexed from real session files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pbot_watch.archive.files import ArchiveStore
from pbot_watch.config import Settings
from pbot_watch.indexer import index_all
from tests.support.openai_server import OpenAIServer

MODEL = "openai/fake-summarizer"


def settings_for(tmp_path: Path, server: OpenAIServer | None = None, **overrides: Any) -> Settings:
    """Settings whose folders are all under ``tmp_path``; with a server, its model and address."""
    values: dict[str, Any] = {
        "sessions": [tmp_path / "sessions"],
        "archive": tmp_path / "archive",
        "state_dir": tmp_path / "state",
        "summary_retry_seconds": 0.05,
        "request_timeout": 5,
    }
    if server is not None:
        values.update(model=MODEL, api_base=server.base_url)
    values.update(overrides)
    return Settings.model_validate(values)


def index(settings: Settings) -> ArchiveStore:
    """One indexing pass over the settings' sessions into their central archive."""
    store = ArchiveStore(central=settings.archive)
    index_all(settings.sessions, store)
    return store


def summaries(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A record's summary nodes by id."""
    return {n["id"]: n for n in record["nodes"] if n["kind"] == "summary"}
