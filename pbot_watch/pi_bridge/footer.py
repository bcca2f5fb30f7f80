"""The footer status Pi shows for pbot-watch: one short phrase, or nothing when all is well.

personal-bot shows "历史整理中" while it summarizes; pbot-watch runs outside Pi, so the phrase
comes from the service's status file: summarizing, catching up (files waiting to be read or
retried), or not running at all (then nothing is indexed or summarized until it runs again).
Pure: the caller reads the file and judges it with ``service.status.assess``.
"""

from __future__ import annotations

from pbot_watch.service.status import Status
from pbot_watch.service.status_file import State

PREFIX = "pbot-watch"


def footer_text(
    state: State, status: Status | None, *, installed: str | None = None, running: str | None = None
) -> str | None:
    """The phrase for the footer, or ``None`` to clear it.

    ``installed`` is the version that wrote the extension's config, ``running`` this
    pbot-watch's: when they differ, pbot-watch was upgraded and ``pbot-watch pi install`` has
    not been run since, so the tools Pi declares may be out of date. The footer says so.
    """
    phrase = _service_phrase(state, status)
    if installed is not None and running is not None and installed != running:
        outdated = f"package {installed}, pbot-watch {running}: run pbot-watch pi install"
        return f"{phrase} · {outdated}" if phrase else f"{PREFIX}: {outdated}"
    return phrase


def _service_phrase(state: State, status: Status | None) -> str | None:
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
