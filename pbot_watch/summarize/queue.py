"""The summary queue: every pending node of every record, lowest level first, one at a time.

A node is taken only when all its children are ready (pbot's ``organize()``); with a real model
configured, summaries the offline summarizer wrote are queued too, to be upgraded, and a node
waits until its children are no longer offline summaries (a model summary built on an offline
one would be stuck with its shallowness). Each result goes through the cache first, so a
fork's shared groups, a re-keyed node or a re-read file cost no call.

Results are written back read-merge-write: the record is read from disk just before writing,
and the result is dropped (it stays cached) when the node vanished, its children changed, or
someone else (pbot) filled it meanwhile. A record's nodes of one pass are summarized from one
read of it and written back together (``_Batch``): one node at a time, a first run's offline
pass read and rewrote a long session's record (8 MB) once per node, and the service indexed
each rewrite again. A node that fails stays pending, its error counted in
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
    """One node to summarize, named by the key of the exact input it was chosen for (``content_key``).

    Not the input itself: a scan finds every pending node of the archive, and after a first run
    their inputs are nearly all of its exchanges' text (467 MB of records held 1.5 GB of RSS).
    The input is made again from the record when the node's turn comes (``_Batch.input``).
    """

    path: Path
    record_id: str
    node_id: str
    level: int
    key: str
    upgrade: bool


class _Nodes:
    """A record as read, its nodes by id: where a task's node and input are looked up."""

    def __init__(self, record: dict[str, Any] | None) -> None:
        self.record = record
        nodes = record.get("nodes") if record is not None else None
        self.by_id = {n.get("id"): n for n in nodes if isinstance(n, dict)} if isinstance(nodes, list) else {}

    def node(self, task: Task) -> dict[str, Any] | None:
        """``task``'s summary node, when this is still its record."""
        if self.record is None or self.record.get("id") != task.record_id:
            return None
        node = self.by_id.get(task.node_id)
        return node if node is not None and node.get("kind") == "summary" else None

    def input(self, task: Task, key: Callable[[str], str]) -> str | None:
        """``node_input`` of ``task``'s node; ``None`` unless it is the input scanned (``task.key``)."""
        node = self.node(task)
        if node is None:
            return None
        children = [self.by_id.get(child) for child in node.get("children", [])]
        if any(c is None or not c.get("ready") for c in children):
            return None
        text = node_input([c for c in children if c is not None])
        return text if key(text) == task.key else None


@dataclass
class _Batch:
    """One record's tasks of a pass: summarized from one read of it, written back together."""

    path: Path
    nodes: _Nodes
    results: list[tuple[Task, str, str]] = field(default_factory=list)
    """``(task, summary, summarizer id)`` waiting to be written."""


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
            # Read, not ``archive.load``: that keeps the last 64 records parsed, and after a first
            # run those are hundreds of MB of Python objects; a record is parsed again when its
            # nodes' turn comes (``_Batch``).
            record = read_record(path)
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
                key = self._key(node_input([c for c in children if c is not None]))
                failure = self.store.failure(node["id"])
                if failure is not None and failure.key == key:
                    scan.failed += 1
                    if failure.retry_at > now:
                        scan.backing_off += 1
                        continue
                scan.tasks.append(
                    Task(path, record["id"], node["id"], int(node.get("level", 0)), key, upgrade)
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

    def _key(self, text: str) -> str:
        return content_key(text, self.summarizer.id, self.summarizer.prompt_version)

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
            batch: _Batch | None = None
            tried = False
            for task in tasks:
                if batch is not None and batch.path != task.path:
                    self._flush(batch, report)
                    batch = None
                waiting = len(batch.results) if batch is not None else 0
                stop: Stop | None = None
                if cancel.is_set():
                    stop = "cancelled"
                elif max_summaries is not None and report.summarized + waiting >= max_summaries:
                    stop = "max-summaries"
                if stop is not None:
                    if batch is not None:
                        self._flush(batch, report)
                    report.stop = stop
                    return not tried
                if progress is not None:
                    progress(done, done + len(tasks) + scan.waiting_for_children, task.node_id)
                if batch is None:
                    batch = _Batch(task.path, _Nodes(read_record(task.path)))
                tried = True
                outcome = self._one(task, batch, cancel, report)
                if outcome == "stop":
                    self._flush(batch, report)
                    return False
                if outcome == "done":
                    done += 1
                elif outcome == "failed":
                    failed.add(task.node_id)
            if batch is not None:
                self._flush(batch, report)
            if report.summarized == before:
                # Nothing new became ready, so no parent can have become runnable: stop here
                # rather than loop on failures or on results the records no longer want.
                return False

    def _one(
        self, task: Task, batch: _Batch, cancel: threading.Event, report: RunReport
    ) -> Literal["done", "failed", "stop"]:
        """Summarize ``task`` from the batch's record; the result waits in the batch to be written."""
        summarizer = self.summarizer
        text = batch.nodes.input(task, self._key)
        if text is None:  # the record changed since the scan: the next scan sees it as it is now
            report.dropped += 1
            log.debug("summary_dropped", node=task.node_id, reason="record changed")
            return "done"
        try:
            cached = self.store.cached(task.key)
            if cached is not None:
                summary, author = cached.text, cached.summarizer
                report.from_cache += 1
            else:
                summary, author = self._ask(task, text, cancel, report), summarizer.id
            self.store.clear_failure(task.node_id)
        except Cancelled:
            report.stop = "cancelled"
            log.info("summary_cancelled", node=task.node_id)
            return "stop"
        except LimitReached as limit:
            report.stop, report.reason = "limit", str(limit)
            log.info("summary_limit_reached", reason=str(limit))
            return "stop"
        except Exception as error:  # noqa: BLE001 - any failure keeps the node pending, counted
            # The answer or its storing: whatever failed, this node waits (with back-off) and
            # the others go on.
            return self._failed(task, error, report)
        batch.results.append((task, summary, author))
        return "done"

    def _flush(self, batch: _Batch, report: RunReport) -> None:
        """Write the batch's summaries to its record (``write``); a failed write leaves each node pending."""
        results, batch.results = batch.results, []
        if not results:
            return
        try:
            written = self.write(batch.path, results)
        except Exception as error:  # noqa: BLE001 - a full disk, a record made unreadable: retried later
            for task, _summary, _author in results:
                self._failed(task, error, report)
            return
        finally:
            self.archive.forget_record(batch.path)  # read anew when its next nodes' turn comes
        for (task, _summary, author), landed in zip(results, written, strict=True):
            if landed:
                report.summarized += 1
                log.debug("summary_written", node=task.node_id, level=task.level, summarizer=author)
            else:
                report.dropped += 1
                log.debug("summary_dropped", node=task.node_id, reason="record changed")

    def _ask(self, task: Task, text: str, cancel: threading.Event, report: RunReport) -> str:
        """The summarizer's answer for ``task`` (whose input is ``text``), checked (and cached when a model paid for it)."""
        summarizer = self.summarizer
        summary = summarizer.summarize(text, cancel)
        report.calls += summary.calls
        report.input_tokens += summary.input_tokens
        report.output_tokens += summary.output_tokens
        if summarizer.offline:
            text = summary.text.strip()
            if not text:  # a summarizer must not return this; never let it make a node ready
                raise EmptySummary("empty summary")
            return text
        # Checked before it is stored: a bad answer is paid for, but never cached nor written.
        answer = check_answer(summary.text, text)
        self.store.remember(
            task.key, summarizer.id, summary.model, answer, summary.input_tokens, summary.output_tokens
        )
        return answer

    def _failed(self, task: Task, error: Exception, report: RunReport) -> Literal["failed", "stop"]:
        message = bounded(
            str(error) if isinstance(error, SummaryFailed) and error.__cause__ else describe_error(error)
        )
        failure = self.store.record_failure(task.node_id, task.key, message, self.clock(), self.backoff_base)
        report.failed += 1
        report.errors.append(f"{task.node_id}: {message}")
        log.warning("summary_failed", node=task.node_id, errors=failure.errors, error=message)
        if isinstance(error, ModelRefused):
            report.stop, report.reason = "refused", message
            return "stop"
        return "failed"

    def write(self, path: Path, results: list[tuple[Task, str, str]]) -> list[bool]:
        """Put each ``(task, summary, author)`` on its node in record ``path`` if the record still
        holds it with the same input; which ones landed. The record is written once.

        Under ``records_lock`` (the service holds it while the indexer writes records), so the
        indexer never writes a copy of the record read before these summaries landed.
        """
        if self.records_lock is None:
            return self._write(path, results)
        with self.records_lock:
            return self._write(path, results)

    def _write(self, path: Path, results: list[tuple[Task, str, str]]) -> list[bool]:
        nodes = _Nodes(read_record(path))
        landed = [self._put(nodes, task, summary, author) for task, summary, author in results]
        if nodes.record is not None and any(landed):
            self.archive.write(path, nodes.record)
        return landed

    def _put(self, nodes: _Nodes, task: Task, summary: str, author: str) -> bool:
        """Put one summary on its node in ``nodes``; ``False`` when the node is not as it was scanned."""
        node = nodes.node(task)
        if node is None or nodes.input(task, self._key) is None:
            return False
        if (
            node.get("ready")
            and str(node.get("text", "")).strip()
            and not (task.upgrade and is_offline_summary(node))
        ):
            return False  # written meanwhile (by pbot, or by another run): theirs stays
        node["text"] = summary
        node["ready"] = True
        node[SUMMARIZER_FIELD] = author
        return True
