"""The summary queue: every pending node of every record, lowest level first, one at a time.

A node is taken only when all its children are ready (pbot's ``organize()``); with a real model
configured, summaries the offline summarizer wrote are queued too, to be upgraded, and a node
waits until its children are no longer offline summaries (a model summary built on an offline
one would be stuck with its shallowness). Each result goes through the cache first, so a
fork's shared groups, a re-keyed node or a re-read file cost no call.

Results are written back read-merge-write: the record is read from disk just before writing,
and the result is dropped (it stays cached) when the node vanished, its children changed, or
someone else (pbot) filled it meanwhile. A node that fails stays pending, its error counted in
the store and retried with backoff; it never becomes ready with empty text and does not stop
the other nodes. Cancellation (the person typed again) and limits stop the run; the node
stays pending for the next idle period.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import structlog

from pbot_watch.archive.files import ArchiveStore, read_record
from pbot_watch.archive.stamp import FileStamp, file_stamp
from pbot_watch.pi.untrusted import unstorable_name
from pbot_watch.summarize.base import (
    Cancelled,
    EmptySummary,
    LimitReached,
    ModelRefused,
    Summarizer,
    SummaryFailed,
    bounded,
    check_answer,
    content_key,
    describe_error,
    node_input,
)
from pbot_watch.summarize.offline import OFFLINE_ID
from pbot_watch.summarize.store import BACKOFF_BASE_SECONDS, SummaryStore

log = structlog.get_logger("pbot_watch.summarize")

SUMMARIZER_FIELD = "summarizer"
OFFLINE_PREFIX = OFFLINE_ID.split("/", 1)[0] + "/"

Stop = Literal["done", "cancelled", "limit", "refused", "max-summaries"]


def is_offline_summary(node: dict[str, Any]) -> bool:
    value = node.get(SUMMARIZER_FIELD)
    return isinstance(value, str) and value.startswith(OFFLINE_PREFIX)


@dataclass(frozen=True, slots=True)
class Task:
    """One node to summarize, with the exact input it was chosen for."""

    path: Path
    record_id: str
    node_id: str
    level: int
    text: str
    upgrade: bool


@dataclass
class Scan:
    """What the queue found in the records at one moment."""

    tasks: list[Task] = field(default_factory=list)
    pending: int = 0
    waiting_for_children: int = 0
    backing_off: int = 0
    failed: int = 0
    upgradable: int = 0
    records: int = 0
    foreign: int = 0


@dataclass
class RunReport:
    """What one run did; ``stop`` says why it ended, ``reason`` details a limit."""

    summarized: int = 0
    from_cache: int = 0
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    failed: int = 0
    dropped: int = 0
    stop: Stop = "done"
    reason: str | None = None
    errors: list[str] = field(default_factory=list)


Progress = Callable[[int, int, str], None]


def iter_record_paths(folders: Iterable[Path]) -> list[Path]:
    """Record files in the folders (sorted; temp files of atomic writes are not ``*.json``)."""
    paths: list[Path] = []
    for folder in folders:
        try:
            paths.extend(
                p for p in folder.glob("*.json") if not p.name.startswith(".") and not unstorable_name(p)
            )
        except OSError:
            continue
    return sorted(set(paths))


@dataclass
class SummaryQueue:
    """Summarizes pending nodes of the records in ``folders()`` with ``summarizer``."""

    store: SummaryStore
    summarizer: Summarizer
    folders: Callable[[], Iterable[Path]]
    archive: ArchiveStore = field(default_factory=ArchiveStore)
    clock: Callable[[], float] = time.time
    backoff_base: float = BACKOFF_BASE_SECONDS
    records_lock: threading.Lock | None = None
    # Records with nothing to do, by file identity: an idle period then costs a stat per record,
    # not a parse of the whole archive. Shared across runs by the worker.
    settled: dict[Path, FileStamp] = field(default_factory=dict)
    # Whether a session's records may be summarized (it has a session file on this machine);
    # ``None``: every record. A foreign record is left as it is, searchable.
    local: Callable[[str], bool] | None = None
    last_scan: Scan | None = None

    # ---- finding work ---------------------------------------------------------------------
    def scan(self) -> Scan:
        scan = Scan()
        now = self.clock()
        model = not self.summarizer.offline
        for path in iter_record_paths(self.folders()):
            stamp = file_stamp(path)
            if stamp is not None and self.settled.get(path) == stamp:
                scan.records += 1  # unchanged since a scan found nothing to do in it
                continue
            record = self.archive.load(path)
            if record is None:
                continue
            scan.records += 1
            if self.local is not None and not self.local(str(record.get("sessionId"))):
                # Not settled: its session file may still arrive (a copy, a sync).
                scan.foreign += 1
                continue
            work_before = scan.pending + scan.upgradable
            lookup = {
                n["id"]: n for n in record["nodes"] if isinstance(n, dict) and isinstance(n.get("id"), str)
            }
            for node in sorted(lookup.values(), key=lambda n: n.get("level", 0)):
                if node.get("kind") != "summary":
                    continue
                ready = bool(node.get("ready")) and bool(str(node.get("text", "")).strip())
                upgrade = ready and model and is_offline_summary(node)
                if ready and not upgrade:
                    continue
                if upgrade:
                    scan.upgradable += 1
                else:
                    scan.pending += 1
                children = [lookup.get(child) for child in node.get("children", [])]
                if not children or any(
                    c is None or not c.get("ready") or (model and is_offline_summary(c)) for c in children
                ):
                    scan.waiting_for_children += 1
                    continue
                text = node_input([c for c in children if c is not None])
                key = content_key(text, self.summarizer.id, self.summarizer.prompt_version)
                failure = self.store.failure(node["id"])
                if failure is not None and failure.key == key:
                    scan.failed += 1
                    if failure.retry_at > now:
                        scan.backing_off += 1
                        continue
                scan.tasks.append(
                    Task(path, record["id"], node["id"], int(node.get("level", 0)), text, upgrade)
                )
            if scan.pending + scan.upgradable == work_before and stamp is not None:
                self.settled[path] = stamp
            else:
                self.settled.pop(path, None)
        # Lowest level first across all records; new summaries before upgrades of offline ones.
        scan.tasks.sort(key=lambda t: (t.upgrade, t.level))
        self.last_scan = scan
        self.store.set_meta("last_scan", json.dumps(self._scan_summary(scan)))
        return scan

    @staticmethod
    def _scan_summary(scan: Scan) -> dict[str, int]:
        return {
            "pending": scan.pending,
            "ready_to_run": len(scan.tasks),
            "waiting_for_children": scan.waiting_for_children,
            "failed": scan.failed,
            "backing_off": scan.backing_off,
            "upgradable": scan.upgradable,
            "records": scan.records,
            "foreign": scan.foreign,
        }

    # ---- doing work -----------------------------------------------------------------------
    def run(
        self,
        cancel: threading.Event,
        max_summaries: int | None = None,
        progress: Progress | None = None,
    ) -> RunReport:
        """Work until nothing is left, ``cancel`` is set, a limit is reached or ``max_summaries`` are written.

        ``max_summaries`` counts what the run's line leads with, summaries written (from the
        cache or the model): a failed node or a result the record no longer wanted is not one.
        What the model may be asked is bounded by the call limits, not by this.

        A run that stopped after changing records scans them once more, so the pending count
        it leaves for status (and the CLI's line) is what is left, not what there was; not
        after a cancel, which means the person is back and the disk is theirs.
        """
        report = RunReport()
        fresh = self._work(report, cancel, max_summaries, progress)
        if not fresh and report.stop != "cancelled":
            self.scan()
        return report

    def _work(
        self,
        report: RunReport,
        cancel: threading.Event,
        max_summaries: int | None,
        progress: Progress | None,
    ) -> bool:
        """The run's loop; whether the last scan still holds (nothing was tried after it)."""
        done = 0
        failed: set[str] = set()  # tried and failed in this run: the backoff is for later runs
        while True:
            scan = self.scan()
            tasks = [t for t in scan.tasks if t.node_id not in failed]
            if not tasks:
                return True
            before = report.summarized
            for index, task in enumerate(tasks):
                if cancel.is_set():
                    report.stop = "cancelled"
                    return index == 0
                if max_summaries is not None and report.summarized >= max_summaries:
                    report.stop = "max-summaries"
                    return index == 0
                if progress is not None:
                    progress(done, done + len(tasks) + scan.waiting_for_children, task.node_id)
                outcome = self._one(task, cancel, report)
                if outcome == "stop":
                    return False
                if outcome == "done":
                    done += 1
                elif outcome == "failed":
                    failed.add(task.node_id)
            if report.summarized == before:
                # Nothing new became ready, so no parent can have become runnable: stop here
                # rather than loop on failures or on results the records no longer want.
                return False

    def _one(
        self, task: Task, cancel: threading.Event, report: RunReport
    ) -> Literal["done", "failed", "stop"]:
        summarizer = self.summarizer
        key = content_key(task.text, summarizer.id, summarizer.prompt_version)
        try:
            cached = self.store.cached(key)
            if cached is not None:
                text, author = cached.text, cached.summarizer
                report.from_cache += 1
            else:
                text, author = self._ask(task, key, cancel, report), summarizer.id
            self.store.clear_failure(task.node_id)
            written = self.write(task, text, author)
        except Cancelled:
            report.stop = "cancelled"
            log.info("summary_cancelled", node=task.node_id)
            return "stop"
        except LimitReached as limit:
            report.stop, report.reason = "limit", str(limit)
            log.info("summary_limit_reached", reason=str(limit))
            return "stop"
        except Exception as error:  # noqa: BLE001 - any failure keeps the node pending, counted
            # The answer, its storing or the record's writing: whatever failed, this node waits
            # (with back-off) and the others go on.
            return self._failed(task, key, error, report)
        if written:
            report.summarized += 1
            log.debug("summary_written", node=task.node_id, level=task.level, summarizer=author)
        else:
            report.dropped += 1
            log.debug("summary_dropped", node=task.node_id, reason="record changed")
        return "done"

    def _ask(self, task: Task, key: str, cancel: threading.Event, report: RunReport) -> str:
        """The summarizer's answer for ``task``, checked (and cached when a model paid for it)."""
        summarizer = self.summarizer
        summary = summarizer.summarize(task.text, cancel)
        report.calls += summary.calls
        report.input_tokens += summary.input_tokens
        report.output_tokens += summary.output_tokens
        if summarizer.offline:
            text = summary.text.strip()
            if not text:  # a summarizer must not return this; never let it make a node ready
                raise EmptySummary("empty summary")
            return text
        # Checked before it is stored: a bad answer is paid for, but never cached nor written.
        text = check_answer(summary.text, task.text)
        self.store.remember(
            key, summarizer.id, summary.model, text, summary.input_tokens, summary.output_tokens
        )
        return text

    def _failed(self, task: Task, key: str, error: Exception, report: RunReport) -> Literal["failed", "stop"]:
        message = bounded(
            str(error) if isinstance(error, SummaryFailed) and error.__cause__ else describe_error(error)
        )
        failure = self.store.record_failure(task.node_id, key, message, self.clock(), self.backoff_base)
        report.failed += 1
        report.errors.append(f"{task.node_id}: {message}")
        log.warning("summary_failed", node=task.node_id, errors=failure.errors, error=message)
        if isinstance(error, ModelRefused):
            report.stop, report.reason = "refused", message
            return "stop"
        return "failed"

    def write(self, task: Task, text: str, author: str) -> bool:
        """Put ``text`` on the node if the record still holds it with the same input; else ``False``.

        Under ``records_lock`` (the service holds it while the indexer writes records), so the
        indexer never writes a copy of the record read before this summary landed.
        """
        if self.records_lock is None:
            return self._write(task, text, author)
        with self.records_lock:
            return self._write(task, text, author)

    def _write(self, task: Task, text: str, author: str) -> bool:
        record = read_record(task.path)
        if record is None or record.get("id") != task.record_id:
            return False
        lookup = {n.get("id"): n for n in record["nodes"] if isinstance(n, dict)}
        node = lookup.get(task.node_id)
        if node is None or node.get("kind") != "summary":
            return False
        children = [lookup.get(child) for child in node.get("children", [])]
        if any(c is None or not c.get("ready") for c in children):
            return False
        if node_input([c for c in children if c is not None]) != task.text:
            return False
        if (
            node.get("ready")
            and str(node.get("text", "")).strip()
            and not (task.upgrade and is_offline_summary(node))
        ):
            return False  # written meanwhile (by pbot, or by another run): theirs stays
        node["text"] = text
        node["ready"] = True
        node[SUMMARIZER_FIELD] = author
        self.archive.write(task.path, record)
        return True
