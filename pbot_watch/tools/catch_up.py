"""History tools that are honest without the service: the records they search, brought up to date here.

``history_search`` and ``history_read`` search the records, and the service writes those within
a second of an append. When it is not running (or not responding, or still catching up), the
record of the very session that asks lags behind what its person typed seconds ago, and "No
matches" would be a lie. So a long-lived transport (the Pi child, the MCP server) holds a
``RecordCatchUp``: before a history tool answers, it runs the indexer ``pbot-watch index``
runs (``Indexer.sync``, one file at a time, incrementally: its parsed state is kept between
calls) over the calling session's file, and says in the result what may still be stale.

The caller's session file is known to the Pi child. An MCP client does not say which session
asks; there the files changed since the service last ran are read instead, newest first and
at most ``UNKNOWN_CALLER_FILES`` of them (the caller's is almost always the newest), and the
note names how far the rest are. Writing a record while the service runs too is safe: a save
reads the record on disk back first and keeps its summaries (``ArchiveStore.save``).
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pbot_watch.archive.files import ArchiveStore
from pbot_watch.config import Settings
from pbot_watch.indexer import Indexer
from pbot_watch.log import get_logger
from pbot_watch.service.status import Status, read_status
from pbot_watch.service.status_file import assess
from pbot_watch.sources import iter_session_files

log = get_logger(__name__)

HISTORY_TOOLS = frozenset({"history_search", "history_read"})
"""The tools that read records (the memory tools read the session files themselves)."""
UNKNOWN_CALLER_FILES = 8
"""Session files read before a history call whose caller is unknown (MCP), newest first."""
TRACKED_FILES = 8
"""Session files whose parsed state is kept between calls; the least recently read go first."""
HEARTBEAT_MARGIN_SECONDS = 2.0
"""A running service has read a file changed this long before its heartbeat (its debounce is
well under it; a file still waiting counts in the heartbeat's ``pending_files``)."""


@dataclass(frozen=True)
class ServiceView:
    """What the status file says about how current the records are."""

    current: bool
    """The service runs and has nothing waiting: its records are up to date but for the last second."""
    note: str | None
    """For the model: which records may be stale, and since when; ``None`` when none are."""
    since: float | None
    """When the service last vouched for the records (its last heartbeat), if it ever ran."""


def service_view(settings: Settings, now: float | None = None) -> ServiceView:
    status = read_status(settings.state_dir)
    state, _detail = assess(settings.state_dir, status, now)
    if status is None:
        return ServiceView(
            current=False,
            note="the pbot-watch service is not running (it has not run here): other sessions are "
            "only as recent as the last `pbot-watch index`",
            since=None,
        )
    since = status.heartbeat_epoch
    if state == "not running":
        return ServiceView(
            False, f"the pbot-watch service is not running: other sessions are as of {_clock(since)}", since
        )
    if state == "stale":
        return ServiceView(
            False,
            f"the pbot-watch service is not responding: other sessions are as of {_clock(since)}",
            since,
        )
    waiting = _waiting(status)
    if waiting:
        return ServiceView(
            False, f"the pbot-watch service is catching up ({waiting}): other sessions may be behind", since
        )
    return ServiceView(True, None, since)


def _waiting(status: Status) -> str | None:
    files = status.pending_files + status.retrying_files
    if status.catch_up is not None and status.catch_up.finished is None:
        left = status.catch_up.files_total - status.catch_up.files_done
        return f"{left} file{'s' if left != 1 else ''} left to read"
    if files:
        return f"{files} file{'s' if files != 1 else ''} waiting"
    return None


def _clock(epoch: float) -> str:
    """``HH:MM`` in the local zone (the caller's: Pi's child inherits its TZ), with the date if not today."""
    moment = datetime.fromtimestamp(epoch).astimezone()
    if moment.date() == datetime.now().astimezone().date():
        return moment.strftime("%H:%M")
    return moment.strftime("%Y-%m-%d %H:%M")


class RecordCatchUp:
    """The records of the calling session (or the newest sessions) brought up to date before a history call."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._indexer: Indexer | None = None
        self._order: OrderedDict[Path, None] = OrderedDict()

    def before_history(self, session_file: Path | None) -> str | None:
        """Index what the service has not; the note the result should carry (``None``: nothing stale).

        Never raises: a file that cannot be read or a record that cannot be written is logged,
        and the tool answers from the records there are.
        """
        try:
            return self._before_history(session_file)
        except Exception:  # the tool still answers, from the records there are, and says so
            log.exception("history_catch_up_failed")
            return "whether the pbot-watch service keeps the records current could not be told: some may be stale"

    def _before_history(self, session_file: Path | None) -> str | None:
        view = service_view(self.settings)
        if session_file is not None:
            if not view.current or _changed_since(session_file, view.since):
                self._sync([session_file])
            return view.note
        if view.current:
            return None
        changed = self._changed_files(view.since)
        self._sync(changed[:UNKNOWN_CALLER_FILES])
        if len(changed) <= UNKNOWN_CALLER_FILES:
            return view.note
        return f"{view.note} (the {UNKNOWN_CALLER_FILES} sessions changed last were read just now)"

    def _changed_files(self, since: float | None) -> list[Path]:
        """Session files under the roots changed since ``since`` (all, if never), newest first."""
        found: list[tuple[int, Path]] = []
        for root in self.settings.sessions:
            for path in iter_session_files(root):
                try:
                    mtime = os.stat(path).st_mtime_ns
                except OSError:
                    continue
                if since is None or mtime >= (since - HEARTBEAT_MARGIN_SECONDS) * 1e9:
                    found.append((mtime, path))
        return [path for _mtime, path in sorted(found, reverse=True)]

    def _sync(self, paths: list[Path]) -> None:
        if not paths:
            return
        if self._indexer is None:
            settings = self.settings
            store = ArchiveStore(
                central=settings.archive, include=tuple(settings.include), exclude=tuple(settings.exclude)
            )
            self._indexer = Indexer(store)
        started = time.monotonic()
        for path in paths:
            try:
                result = self._indexer.sync(path)
            except Exception:  # a bug must not cost the tool its answer: it answers from what there is
                log.exception("history_catch_up_failed", path=str(path))
                continue
            for warning in result.warnings:
                log.warning("history_catch_up_warning", path=str(path), warning=warning)
            self._order.pop(path, None)
            self._order[path] = None
        while len(self._order) > TRACKED_FILES:
            oldest, _ = self._order.popitem(last=False)
            self._indexer.forget(oldest)
        log.debug("history_catch_up", files=len(paths), ms=round((time.monotonic() - started) * 1000, 1))


def _changed_since(path: Path, since: float | None) -> bool:
    """Whether ``path`` changed so lately that the service's last heartbeat may not cover it."""
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        return False
    return since is None or mtime >= since - HEARTBEAT_MARGIN_SECONDS
