"""The idle-time worker the service calls, and the status it reports.

``SummaryWorker.run(cancel)`` is the service's ``IdleWorker``: called when no session was
appended for ``idle_seconds``, with ``cancel`` set the moment a new append arrives. Each call
is one idle period (its own ``max_calls_per_idle``). Without a model it runs the offline
summarizer, which needs no network and no limits.

``summary_status()`` answers from ``summaries.db`` alone (the last scan, today's usage and the
failures), so ``pbot-watch status`` shows it without reading records or importing litellm.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from pbot_watch.archive.files import ArchiveStore, WorkspaceSkipped
from pbot_watch.archive.stamp import FileStamp
from pbot_watch.catalog import Catalog
from pbot_watch.config import Settings
from pbot_watch.summarize.base import Summarizer
from pbot_watch.summarize.offline import OFFLINE_ID, OfflineSummarizer
from pbot_watch.summarize.queue import Progress, RunReport, SummaryQueue
from pbot_watch.summarize.store import DB_NAME, Limits, Meter, SummaryStore

log = structlog.get_logger("pbot_watch.summarize")

FolderSource = Callable[[], Iterable[Path]]


def limits_of(settings: Settings) -> Limits:
    return Limits(settings.max_calls_per_day, settings.max_tokens_per_day, settings.max_calls_per_idle)


def make_summarizer(settings: Settings, meter: Meter | None) -> Summarizer:
    """The configured model through litellm, or the offline summarizer when there is none."""
    if not settings.model or settings.max_calls_per_day == 0:
        return OfflineSummarizer()  # no model, or the model turned off: summaries still get written
    from pbot_watch.config import apply_env_file  # noqa: PLC0415
    from pbot_watch.summarize.litellm_model import LitellmSummarizer  # noqa: PLC0415

    apply_env_file(settings)  # API keys; variables already set win
    return LitellmSummarizer(
        settings.model,
        api_base=settings.api_base,
        request_timeout=settings.request_timeout,
        context_tokens=settings.context_tokens,
        meter=meter,
    )


def discover_folders(settings: Settings, catalog: Catalog | None = None) -> list[Path]:
    """The record folders of the included sessions under the session roots (``Catalog.record_folders``)
    that exist and can take summaries (the archive's checks: not read-only, no symlink out).
    """
    catalog = catalog or Catalog.of(settings)
    if settings.archive is not None:
        return [settings.archive]
    store = ArchiveStore(include=tuple(settings.include), exclude=tuple(settings.exclude))
    return [
        folder
        for folder, workspace in catalog.record_folders().items()
        if workspace is not None and folder.is_dir() and _allowed(store, workspace)
    ]


def _allowed(store: ArchiveStore, workspace: str) -> bool:
    try:
        store.folder_for(workspace)
    except WorkspaceSkipped:
        return False
    return True


@dataclass
class SummaryWorker:
    """Runs the summary queue in idle periods; safe to call ``run`` again after a cancel.

    Which record folders to work on: ``folders`` when given (the CLI passes what it indexed);
    otherwise the central archive (if configured) plus every folder the service reported a
    record in through ``on_record``, remembered in ``summaries.db`` so that a restart, which
    rewrites nothing, still knows them.
    """

    name = "summaries"

    settings: Settings
    folders: FolderSource | None = None
    archive: ArchiveStore | None = None
    summarizer: Summarizer | None = None
    records_lock: threading.Lock | None = None
    clock: Callable[[], float] = time.time
    last_report: RunReport | None = None
    last_error: str | None = None
    _store: SummaryStore | None = field(default=None, repr=False)
    _meter: Meter | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _folders_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _store_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _folders_seen: set[str] = field(default_factory=set, repr=False)
    _discovered: bool = field(default=False, repr=False)
    _settled: dict[Path, FileStamp] = field(default_factory=dict, repr=False)
    _local: set[str] | None = field(default=None, repr=False)
    _local_fresh: bool = field(default=False, repr=False)
    _sessions: Catalog | None = field(default=None, repr=False)

    @property
    def store(self) -> SummaryStore:
        with self._store_lock:  # the status provider and the idle thread may both be first
            if self._store is None:
                self._store = SummaryStore(self.settings.state_dir)
            return self._store

    def _summarizer(self) -> tuple[Summarizer, Meter]:
        meter = Meter(self.store, limits_of(self.settings), self.clock)
        if self.summarizer is None:
            self.summarizer = make_summarizer(self.settings, meter)
        if hasattr(self.summarizer, "meter"):
            # A new idle period: a fresh meter (per-idle call count), same summarizer and connections.
            self.summarizer.meter = meter
        self._meter = meter
        return self.summarizer, meter

    # ---- which records ---------------------------------------------------------------------
    def _catalog(self) -> Catalog:
        """The session files, with headers remembered for the worker's life: a look again stats them."""
        if self._sessions is None:
            self._sessions = Catalog.of(self.settings)
        return self._sessions

    def known_folders(self) -> list[Path]:
        if self.folders is not None:
            return list(self.folders())
        if not self._discovered:
            # Records written before this worker existed (by `pbot-watch index`, an earlier
            # run, or pbot itself) are never reported through on_record: find them once.
            self._discovered = True
            self.remember_folders(discover_folders(self.settings, self._catalog()))
        stored = json.loads(self.store.meta("folders") or "[]")
        folders = [Path(p) for p in stored]
        if self.settings.archive is not None:
            folders.insert(0, self.settings.archive)
        return [f for f in dict.fromkeys(folders) if f.is_dir()]

    def on_record(self, path: Path, session_id: str) -> None:
        """The service wrote a record: remember its folder (cheap when already known)."""
        self.remember_folders([path.parent])
        if self._local is not None:
            self._local.add(session_id)  # its session file is here: the service just read it

    def is_local(self, session_id: str) -> bool:
        """Whether ``session_id`` has a session file on this machine (its record may be summarized).

        A record with none (copied into a workspace, shipped by a cloned repository, written on
        another machine) is searchable like any other, but its text is not sent to the user's
        model on the user's budget unless ``summarize_foreign`` asks for it. The session files
        are looked at again at most once per run, when a record names a session not seen yet;
        the service adds every session it writes a record of.
        """
        if self._local is None or (session_id not in self._local and not self._local_fresh):
            self._local = self._catalog().session_ids()
            self._local_fresh = True
        return session_id in self._local

    def remember_folders(self, folders: Iterable[Path]) -> None:
        new = [str(f) for f in folders if str(f) not in self._folders_seen]
        if not new:
            return
        with self._folders_lock:
            stored = json.loads(self.store.meta("folders") or "[]")
            missing = [f for f in new if f not in stored]
            if missing:
                stored.extend(missing)
                self.store.set_meta("folders", json.dumps(sorted(stored)))
            self._folders_seen.update(stored)

    # ---- idle periods ----------------------------------------------------------------------
    def run(self, cancel: threading.Event) -> None:
        """The service's ``IdleWorker.run``: one idle period."""
        self.run_once(cancel)

    def run_once(
        self, cancel: threading.Event, max_summaries: int | None = None, progress: Progress | None = None
    ) -> RunReport:
        """One idle period: summarize until done, cancelled or limited. Never raises for a node's failure."""
        with self._lock:
            self._local_fresh = False  # a session file may have appeared since the last run
            summarizer, meter = self._summarizer()
            queue = SummaryQueue(
                self.store,
                summarizer,
                self.known_folders,
                archive=self.archive or ArchiveStore(),
                clock=self.clock,
                backoff_base=self.settings.summary_retry_seconds,
                records_lock=self.records_lock,
                settled=self._settled,
                local=None if self.settings.summarize_foreign else self.is_local,
            )
            if not summarizer.offline:
                reason = meter.reason()
                if reason is not None:
                    queue.scan()
                    report = RunReport(stop="limit", reason=reason)
                    self._finish(report)
                    return report
            report = queue.run(cancel, max_summaries, progress)
            if not summarizer.offline:
                # Every request the model got, failed ones included: what the caps counted.
                report.calls = max(report.calls, meter.calls_this_period)
            self._finish(report)
            return report

    def _finish(self, report: RunReport) -> None:
        self.last_report = report
        if report.errors:
            self.last_error = report.errors[-1]
        self.store.set_meta(
            "last_run",
            json.dumps(
                {
                    "at": self.clock(),
                    "stop": report.stop,
                    "reason": report.reason,
                    "summarized": report.summarized,
                    "from_cache": report.from_cache,
                    "calls": report.calls,
                    "failed": report.failed,
                    "last_error": self.last_error,
                }
            ),
        )
        log.info(
            "summary_run_finished",
            stop=report.stop,
            reason=report.reason,
            summarized=report.summarized,
            from_cache=report.from_cache,
            calls=report.calls,
            failed=report.failed,
        )

    def status(self) -> dict[str, Any]:
        return summary_status(self.settings, self.store)

    def close(self) -> None:
        close = getattr(self.summarizer, "close", None)
        if callable(close):
            close()
        if self._store is not None:
            self._store.close()
            self._store = None


def summary_status(settings: Settings, store: SummaryStore | None = None) -> dict[str, Any]:
    """The summary part of the service's status file: flat, plain JSON values, cheap to compute.

    ``pending`` and friends come from the last queue scan (``None`` before the first one);
    usage is today's (local day); ``limit`` says why the queue waits, if it does.
    """
    limits = limits_of(settings)
    out: dict[str, Any] = {
        "model": settings.model or "offline",
        "summarizer": f"litellm/{settings.model}" if settings.model and limits.calls_per_day else OFFLINE_ID,
        "pending": None,
        "waiting_for_children": None,
        "failed": 0,
        "upgradable": 0,
        "foreign": 0,
        "calls_today": 0,
        "tokens_today": 0,
        "cost_today_usd": 0.0,
        "max_calls_per_day": limits.calls_per_day,
        "max_tokens_per_day": limits.tokens_per_day,
        "limit": None,
        "last_run": None,
        "last_error": None,
    }
    own = store is None
    if store is None:
        if not (settings.state_dir / DB_NAME).exists():
            return out
        store = SummaryStore(settings.state_dir)
    try:
        scan = json.loads(store.meta("last_scan") or "{}")
        last_run = json.loads(store.meta("last_run") or "{}")
        used = store.usage()
        failures = store.failures()
        limit = None
        if settings.model and limits.calls_per_day:
            meter = Meter(store, limits)
            limit = meter.reason() or (last_run.get("reason") if last_run.get("stop") == "limit" else None)
        out.update(
            pending=scan.get("pending"),
            waiting_for_children=scan.get("waiting_for_children"),
            failed=scan.get("failed", len(failures)),
            upgradable=scan.get("upgradable", 0) if settings.model else 0,
            foreign=scan.get("foreign", 0),
            calls_today=used.calls,
            tokens_today=used.tokens,
            cost_today_usd=round(used.cost_usd, 6),
            limit=limit,
            last_run=_describe_run(last_run) if last_run else None,
            last_error=last_run.get("last_error") or (failures[0].last_error if failures else None),
        )
        return out
    finally:
        if own:
            store.close()


def _describe_run(run: dict[str, Any]) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.get("at", 0)))
    return (
        f"{when}: {run.get('stop')}, {run.get('summarized', 0)} written, {run.get('from_cache', 0)} from cache, "
        f"{run.get('calls', 0)} calls, {run.get('failed', 0)} failed"
    )
