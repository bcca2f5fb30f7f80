"""The footer status Pi shows for pbot-watch: one short phrase, or nothing when all is well.

personal-bot shows "历史整理中" while it summarizes; pbot-watch runs outside Pi, so the phrase
comes from the service's status file: summarizing, catching up (files waiting to be read or
retried), or not running at all (then nothing is indexed or summarized until it runs again).
Pure: the caller reads the file and judges it with ``service.status.assess``.
"""

from __future__ import annotations

from pbot_watch.service.status import State, Status

PREFIX = "pbot-watch"


def footer_text(state: State, status: Status | None) -> str | None:
    """The phrase for the footer, or ``None`` to clear it."""
    if state == "not running" or status is None:
        return f"{PREFIX}: not running"
    if state == "stale":
        return f"{PREFIX}: not responding"
    if status.activity == "starting":
        return f"{PREFIX}: starting"
    if status.idle_worker.get("running"):
        pending = status.summaries.get("pending")
        return f"{PREFIX}: summarizing" + (
            f" ({pending} left)" if isinstance(pending, int) and pending else ""
        )
    waiting = status.pending_files + status.retrying_files
    if waiting:
        return f"{PREFIX}: catching up ({waiting} file{'s' if waiting != 1 else ''})"
    if status.activity == "busy":
        return f"{PREFIX}: catching up"
    return None
