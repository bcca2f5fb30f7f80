"""What the history tools say of the records, from the service's status file, and when they index themselves."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pbot_watch.config import Settings, load_settings
from pbot_watch.memory.query import MemoryScope
from pbot_watch.service.status import CatchUpInfo, iso
from pbot_watch.tools.catch_up import RecordCatchUp, service_view
from pbot_watch.tools.registry import call
from tests.support.pi_sessions import PiSession
from tests.support.service import age_today, fake_status, service_lock


def status(settings: Settings, *, running: bool = True, age: float = 0.5, **fields: Any) -> float:
    return fake_status(settings.state_dir, running=running, age=age, **fields)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings({"sessions": [tmp_path / "sessions"], "archive": tmp_path / "archive"})


@pytest.fixture
def held(settings: Settings) -> Iterator[None]:
    """The service's lock, held as a running service holds it."""
    with service_lock(settings.state_dir):
        yield


class TestServiceView:
    def test_never_ran(self, settings: Settings) -> None:
        """No status file: nothing vouches for other sessions."""
        view = service_view(settings)
        assert (False, None) == (view.current, view.since)
        assert view.note is not None
        assert "has not run here" in view.note

    def test_stopped_names_its_last_heartbeat(self, settings: Settings) -> None:
        """A stopped service: other sessions are as of its last heartbeat, in local time."""
        beat = status(settings, running=False, age=age_today(600))
        clock = datetime.fromtimestamp(beat).astimezone().strftime("%H:%M")
        assert (
            f"the pbot-watch service is not running: other sessions are as of {clock}"
            == service_view(settings).note
        )

    def test_an_earlier_day_has_its_date(self, settings: Settings) -> None:
        """A heartbeat of another day says which day."""
        beat = status(settings, running=False, age=3 * 86400)
        assert datetime.fromtimestamp(beat).astimezone().strftime("%Y-%m-%d %H:%M") in str(
            service_view(settings).note
        )

    @pytest.mark.usefixtures("held")
    def test_running_and_current_says_nothing(self, settings: Settings) -> None:
        """A running service with nothing waiting: no note, nothing stale."""
        status(settings)
        assert (True, None) == (service_view(settings).current, service_view(settings).note)

    @pytest.mark.usefixtures("held")
    def test_catching_up_says_how_much_is_left(self, settings: Settings) -> None:
        """A service still reading what changed while it was away: others may be behind."""
        now = time.time()
        info = CatchUpInfo(
            files_total=30, files_done=12, bytes_total=1, bytes_done=0, started=iso(now), seconds=1
        )
        status(settings, catch_up=info)
        view = service_view(settings)
        assert not view.current
        assert "catching up (18 files left to read): other sessions may be behind" in str(view.note)

    @pytest.mark.usefixtures("held")
    def test_waiting_files(self, settings: Settings) -> None:
        """Files waiting for their debounce or a retry are work not done yet."""
        status(settings, pending_files=1, retrying_files=1)
        assert "catching up (2 files waiting)" in str(service_view(settings).note)

    def test_not_responding(self, settings: Settings) -> None:
        """A live pid with an old heartbeat is not vouching for anything."""
        status(settings, age=600)
        assert "the pbot-watch service is not responding: other sessions are as of" in str(
            service_view(settings).note
        )


class TestCatchUp:
    def session(self, settings: Settings, name: str, text: str) -> Path:
        path = settings.sessions[0] / "ws" / f"{name}.jsonl"
        w = PiSession(f"session-{name}", file=path)
        w.user(text, id=f"{name}1")
        w.assistant("noted", id=f"{name}2")
        return path

    def search(self, settings: Settings, records: RecordCatchUp, query: str, caller: Path | None) -> Any:
        scope = MemoryScope(session_file=caller) if caller is not None else None
        answer = call("history_search", {"query": query}, settings, scope=scope, records=records)
        assert answer.structured is not None, answer.text
        return answer

    def test_the_caller_alone_is_indexed(self, settings: Settings) -> None:
        """With a caller, only its session is read: another session stays as the service left it."""
        mine = self.session(settings, "a", "the quokka plan")
        self.session(settings, "b", "the quokka budget")
        answer = self.search(settings, RecordCatchUp(settings), "quokka", mine)
        assert ["session-a"] == [m["sessionId"] for m in answer.structured["matches"]]
        assert "Note: the pbot-watch service is not running" in answer.text.splitlines()[1]

    def test_unknown_caller_reads_the_newest_sessions(self, settings: Settings) -> None:
        """Without a caller (MCP), the sessions changed since the service last ran are read."""
        beat = status(settings, running=False, age=120)
        old = self.session(settings, "old", "the quokka archive")
        os.utime(old, (beat - 60, beat - 60))
        self.session(settings, "new", "the quokka plan")
        answer = self.search(settings, RecordCatchUp(settings), "quokka", None)
        assert ["session-new"] == [m["sessionId"] for m in answer.structured["matches"]]

    @pytest.mark.usefixtures("held")
    def test_a_current_service_leaves_other_sessions_alone(self, settings: Settings) -> None:
        """A running service that is current: an unknown caller's call indexes nothing, and says nothing."""
        self.session(settings, "a", "the quokka plan")
        status(settings, age=0)
        records = RecordCatchUp(settings)
        answer = self.search(settings, records, "quokka", None)
        assert 0 == answer.structured["total"]
        assert "Note:" not in answer.text

    def test_memory_tools_carry_no_note(self, settings: Settings) -> None:
        """search_memory reads the session files itself: nothing of it depends on the service."""
        self.session(settings, "a", "the quokka plan")
        answer = call("search_memory", {"query": "quokka"}, settings, records=RecordCatchUp(settings))
        assert "Note:" not in answer.text
