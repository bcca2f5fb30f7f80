"""The footer phrase Pi shows: summarizing, catching up, not running, or nothing."""

from __future__ import annotations

from typing import Any

from pbot_watch.pi_bridge.footer import footer_text
from pbot_watch.service.status import Status


def status(**fields: Any) -> Status:
    base: dict[str, Any] = {
        "running": True,
        "pid": 1,
        "version": "0",
        "started": "2026-11-30T09:00:00Z",
        "uptime_seconds": 1.0,
        "heartbeat": "2026-11-30T09:00:01Z",
        "heartbeat_epoch": 0.0,
        "activity": "idle",
    }
    return Status.model_validate({**base, **fields})


class TestFooterText:
    def test_idle_service_says_nothing(self) -> None:
        """A running, idle service with nothing waiting clears the footer."""
        assert footer_text("running", status()) is None

    def test_not_running(self) -> None:
        """No running service: the footer says so."""
        assert "pbot-watch: not running" == footer_text("not running", None)
        assert "pbot-watch: not running" == footer_text("not running", status(running=False))

    def test_stale(self) -> None:
        """A service that stopped beating is not responding."""
        assert "pbot-watch: not responding" == footer_text("stale", status())

    def test_summarizing_with_pending_count(self) -> None:
        """While the idle worker runs, the footer says summarizing and how many nodes are left."""
        assert "pbot-watch: summarizing (12 left)" == footer_text(
            "running", status(idle_worker={"running": True}, summaries={"pending": 12})
        )

    def test_summarizing_without_count(self) -> None:
        """Before the first queue scan there is no count."""
        assert "pbot-watch: summarizing" == footer_text(
            "running", status(idle_worker={"running": True}, summaries={"pending": None})
        )

    def test_catching_up_counts_pending_and_retrying_files(self) -> None:
        """Files waiting to be read or retried mean the service is behind."""
        assert "pbot-watch: catching up (3 files)" == footer_text(
            "running", status(activity="busy", pending_files=2, retrying_files=1)
        )
        assert "pbot-watch: catching up (1 file)" == footer_text("running", status(pending_files=1))

    def test_busy_without_pending_files(self) -> None:
        """Busy reading with nothing queued is still catching up."""
        assert "pbot-watch: catching up" == footer_text("running", status(activity="busy"))

    def test_starting(self) -> None:
        """A service that is starting says so."""
        assert "pbot-watch: starting" == footer_text("running", status(activity="starting"))

    def test_outdated_package_says_what_to_run(self) -> None:
        """When the extension's config is from another version, the footer says to reinstall."""
        assert "pbot-watch: package 0.0.9, pbot-watch 0.1.0: run pbot-watch pi install" == footer_text(
            "running", status(), installed="0.0.9", running="0.1.0"
        )

    def test_outdated_package_beside_the_service_phrase(self) -> None:
        """The reinstall hint follows whatever the service phrase is."""
        assert "pbot-watch: not running · package 0.0.9, pbot-watch 0.1.0: run pbot-watch pi install" == (
            footer_text("not running", None, installed="0.0.9", running="0.1.0")
        )

    def test_same_version_adds_nothing(self) -> None:
        """An up-to-date package adds nothing to the footer."""
        assert footer_text("running", status(), installed="0.1.0", running="0.1.0") is None
