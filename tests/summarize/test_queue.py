"""The summary queue over real records: order, caching, failures, limits and cancellation."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from pbot_watch.summarize.base import node_input
from pbot_watch.summarize.litellm_model import LitellmSummarizer
from pbot_watch.summarize.queue import RunReport
from pbot_watch.summarize.worker import SummaryWorker
from tests.support.archive import records
from tests.support.openai_server import OpenAIServer, Reply, Request
from tests.support.pi_sessions import PiSession
from tests.support.summaries import MODEL, index, settings_for, summaries

pytestmark = pytest.mark.timeout(60)


def session(tmp_path: Path, exchanges: int, name: str = "main", session_id: str = "s-main") -> PiSession:
    pi = PiSession(session_id, "/w")
    pi.exchanges(exchanges)
    pi.write(tmp_path / "sessions" / "--w--" / f"{name}.jsonl")
    return pi


def worker_for(tmp_path: Path, server: OpenAIServer | None = None, **settings: object) -> SummaryWorker:
    config = settings_for(tmp_path, server, **settings)
    summarizer = None
    if server is not None:
        summarizer = LitellmSummarizer(
            MODEL, api_base=server.base_url, request_timeout=5, retry_wait=0.01, attempts=2
        )
    return SummaryWorker(config, summarizer=summarizer)


def ready(tmp_path: Path, session_id: str = "s-main") -> dict[str, bool]:
    return {k: n["ready"] for k, n in summaries(records(tmp_path / "archive")[session_id]).items()}


class TestOffline:
    def test_fills_every_level_and_marks_the_nodes(self, tmp_path: Path) -> None:
        """Without a model every summary becomes ready, level by level, marked offline/1."""
        session(tmp_path, 16)
        worker = worker_for(tmp_path)
        index(worker.settings)
        report = worker.run_once(threading.Event())
        nodes = summaries(records(tmp_path / "archive")["s-main"])
        assert sorted(n["level"] for n in nodes.values()) == [1, 1, 1, 1, 2]
        assert all(n["ready"] and n["text"] and n["summarizer"] == "offline/1" for n in nodes.values())
        assert (report.summarized, report.calls, report.stop) == (5, 0, "done")
        assert worker.run_once(threading.Event()).summarized == 0
        status = worker.status()
        assert (status["pending"], status["model"], status["calls_today"]) == (0, "offline", 0)

    def test_a_settled_record_changed_on_disk_is_seen(self, tmp_path: Path) -> None:
        """Records with nothing to do are skipped by file identity, so a rewrite is noticed."""
        session(tmp_path, 4)
        worker = worker_for(tmp_path)
        index(worker.settings)
        worker.run_once(threading.Event())
        assert worker.run_once(threading.Event()).summarized == 0
        (path,) = (tmp_path / "archive").glob("*.json")
        record = json.loads(path.read_text(encoding="utf-8"))
        for node in record["nodes"]:
            if node["kind"] == "summary":
                node.update(text="", ready=False)
        path.write_text(json.dumps(record), encoding="utf-8")
        assert worker.run_once(threading.Event()).summarized == 1


class TestModel:
    def test_sends_pbot_input_lowest_level_first(self, server: OpenAIServer, tmp_path: Path) -> None:
        """Each request carries the node's organize() input; level 1 before level 2."""
        session(tmp_path, 16)
        worker = worker_for(tmp_path, server)
        index(worker.settings)
        server.handler = lambda r: Reply.answer(f"summary {len(server.requests)}")
        report = worker.run_once(threading.Event())
        record = records(tmp_path / "archive")["s-main"]
        nodes = {n["id"]: n for n in record["nodes"]}
        sent = [r.user_text for r in server.chat_requests]
        ordered = sorted((n for n in nodes.values() if n["kind"] == "summary"), key=lambda n: n["level"])
        assert sent == [node_input([nodes[c] for c in n["children"]]) for n in ordered]
        assert all(n["summarizer"] == f"litellm/{MODEL}" for n in ordered)
        assert (report.summarized, report.calls) == (5, 5)
        assert worker.status()["calls_today"] == 5

    def test_upgrades_offline_summaries(self, server: OpenAIServer, tmp_path: Path) -> None:
        """Offline summaries are ready for search, and replaced once a model is configured."""
        session(tmp_path, 8)
        offline = worker_for(tmp_path)
        index(offline.settings)
        offline.run_once(threading.Event())
        assert all(ready(tmp_path).values())
        model = worker_for(tmp_path, server)
        assert model.run_once(threading.Event()).summarized == 2
        nodes = summaries(records(tmp_path / "archive")["s-main"])
        assert {n["summarizer"] for n in nodes.values()} == {f"litellm/{MODEL}"}

    def test_fork_costs_no_call(self, server: OpenAIServer, tmp_path: Path) -> None:
        """A forked session repeats the original's groups: their summaries come from the cache."""
        main = session(tmp_path, 16)
        worker = worker_for(tmp_path, server)
        index(worker.settings)
        worker.run_once(threading.Event())
        calls = len(server.chat_requests)
        main.fork("s-fork").write(tmp_path / "sessions" / "--w--" / "fork.jsonl")
        index(worker.settings)
        report = worker.run_once(threading.Event())
        assert len(server.chat_requests) == calls == 5
        assert (report.summarized, report.from_cache, report.calls) == (5, 5, 0)
        fork = summaries(records(tmp_path / "archive")["s-fork"])
        original = summaries(records(tmp_path / "archive")["s-main"])
        assert sorted(n["text"] for n in fork.values()) == sorted(n["text"] for n in original.values())


class TestFailures:
    def test_failed_node_stays_pending_and_others_go_on(self, server: OpenAIServer, tmp_path: Path) -> None:
        """A node the model refuses stays pending with its error counted; its siblings are done."""
        session(tmp_path, 8)
        worker = worker_for(tmp_path, server)
        index(worker.settings)
        refused = "(#0)"
        server.handler = lambda r: (
            Reply.bad_request("unsafe content") if refused in r.user_text else Reply.answer("fine")
        )
        report = worker.run_once(threading.Event())
        states = ready(tmp_path)
        assert sorted(states.values()) == [False, True]
        failed = next(k for k, v in states.items() if not v)
        assert summaries(records(tmp_path / "archive")["s-main"])[failed]["text"] == ""
        assert report.failed == 1
        failure = worker.store.failure(failed)
        assert failure is not None
        assert failure.errors == 1
        assert "BadRequestError" in failure.last_error
        assert worker.status()["failed"] == 1
        # After the backoff the next idle period retries it, and now it succeeds.
        server.handler = None
        server.wait_for(lambda s: True)
        worker.clock = lambda: failure.retry_at + 1
        assert worker.run_once(threading.Event()).summarized == 1
        assert all(ready(tmp_path).values())
        assert worker.store.failure(failed) is None

    def test_empty_answer_never_makes_a_node_ready(self, server: OpenAIServer, tmp_path: Path) -> None:
        """An empty answer is a failure: the node stays pending with empty text."""
        session(tmp_path, 4)
        worker = worker_for(tmp_path, server)
        index(worker.settings)
        server.default = Reply.empty()
        report = worker.run_once(threading.Event())
        assert (report.failed, report.summarized) == (1, 0)
        assert ready(tmp_path) == {next(iter(ready(tmp_path))): False}
        assert "EmptySummary" in (worker.status()["last_error"] or "")

    def test_backing_off_node_is_skipped(self, server: OpenAIServer, tmp_path: Path) -> None:
        """Within its backoff a failed node is not asked again."""
        session(tmp_path, 4)
        worker = worker_for(tmp_path, server, summary_retry_seconds=3600)
        index(worker.settings)
        server.default = Reply.server_error()
        worker.run_once(threading.Event())
        asked = len(server.chat_requests)
        assert asked == 2  # two attempts: 5xx is transient
        worker.run_once(threading.Event())
        assert len(server.chat_requests) == asked

    def test_refused_model_stops_the_run(self, server: OpenAIServer, tmp_path: Path) -> None:
        """A bad key fails every node alike: the run stops after the first one and says why."""
        session(tmp_path, 8)
        worker = worker_for(tmp_path, server)
        index(worker.settings)
        server.default = Reply.unauthorized()
        report = worker.run_once(threading.Event())
        assert (report.stop, report.failed, len(server.chat_requests)) == ("refused", 1, 1)
        assert (report.reason or "").startswith("AuthenticationError")


class TestLimits:
    def test_daily_limit_stops_the_queue(self, server: OpenAIServer, tmp_path: Path) -> None:
        """After the day's calls the queue waits, nodes stay pending, and status says why."""
        session(tmp_path, 16)
        worker = worker_for(tmp_path, server, max_calls_per_day=2)
        index(worker.settings)
        report = worker.run_once(threading.Event())
        assert (report.summarized, report.stop) == (2, "limit")
        assert "daily call limit reached (2/2" in (report.reason or "")
        assert sorted(ready(tmp_path).values()) == [False, False, False, True, True]
        again = worker.run_once(threading.Event())
        assert (again.stop, len(server.chat_requests)) == ("limit", 2)
        status = worker.status()
        assert (status["calls_today"], status["pending"]) == (2, 3)
        assert "daily call limit" in status["limit"]

    def test_zero_calls_per_day_means_offline(self, server: OpenAIServer, tmp_path: Path) -> None:
        """A model turned off with max_calls_per_day = 0 leaves the offline summarizer at work."""
        session(tmp_path, 4)
        config = settings_for(tmp_path, server, max_calls_per_day=0)
        worker = SummaryWorker(config)
        index(config)
        assert worker.run_once(threading.Event()).summarized == 1
        assert server.requests == []
        (node,) = summaries(records(tmp_path / "archive")["s-main"]).values()
        assert node["summarizer"] == "offline/1"
        assert worker.status()["summarizer"] == "offline/1"

    def test_idle_period_limit_resets_next_period(self, server: OpenAIServer, tmp_path: Path) -> None:
        """max_calls_per_idle caps one period; the next period goes on."""
        session(tmp_path, 8)
        worker = worker_for(tmp_path, server, max_calls_per_idle=1)
        index(worker.settings)
        first = worker.run_once(threading.Event())
        assert (first.summarized, first.stop) == (1, "limit")
        assert worker.run_once(threading.Event()).summarized == 1

    def test_max_summaries_counts_summaries_written(self, server: OpenAIServer, tmp_path: Path) -> None:
        """A failed node does not use up ``max_summaries``; a summary from the cache does."""
        main = session(tmp_path, 12)
        worker = worker_for(tmp_path, server)
        index(worker.settings)
        server.handler = lambda r: (
            Reply.bad_request("unsafe content") if r.index == 0 else Reply.answer("fine")
        )
        first = worker.run_once(threading.Event(), max_summaries=1)
        assert (first.summarized, first.failed, first.stop) == (1, 1, "max-summaries")
        assert len(server.chat_requests) == 2
        assert worker.status()["pending"] == 2  # what is left, not what the run found
        worker.clock = lambda: time.time() + 60  # past the failed node's backoff
        assert worker.run_once(threading.Event()).summarized == 2
        main.fork("s-fork").write(tmp_path / "sessions" / "--w--" / "fork.jsonl")
        index(worker.settings)
        asked = len(server.chat_requests)
        fork = worker.run_once(threading.Event(), max_summaries=1)
        assert (fork.summarized, fork.from_cache, fork.stop) == (1, 1, "max-summaries")
        assert len(server.chat_requests) == asked


class TestCancel:
    @pytest.mark.usefixtures("litellm_imported")
    def test_cancel_mid_flight_keeps_the_node_pending(self, server: OpenAIServer, tmp_path: Path) -> None:
        """The call in flight is abandoned (the server sees it), the node stays pending, the next period does it."""
        session(tmp_path, 4)
        worker = worker_for(tmp_path, server)
        index(worker.settings)
        server.script(Reply.hanging())
        cancel = threading.Event()
        reports = []
        thread = threading.Thread(target=lambda: reports.append(worker.run_once(cancel)))
        thread.start()
        server.wait_for_requests(1)
        cancel.set()
        thread.join(5)
        assert not thread.is_alive()
        assert reports[0].stop == "cancelled"
        server.wait_for_disconnects(1)
        assert list(ready(tmp_path).values()) == [False]
        assert worker.store.failures() == []
        assert worker.run_once(threading.Event()).summarized == 1
        assert list(ready(tmp_path).values()) == [True]


class TestWriteBack:
    def test_result_for_a_changed_node_is_dropped_but_cached(
        self, server: OpenAIServer, tmp_path: Path
    ) -> None:
        """If the group changed while the model was answering, the answer is not written (but kept)."""
        pi = PiSession("s-main", "/w")
        pi.exchanges(3)
        pi.user("a fourth question, still unanswered")
        path = pi.write(tmp_path / "sessions" / "--w--" / "main.jsonl")
        worker = worker_for(tmp_path, server)
        index(worker.settings)
        appended = threading.Event()

        def answer_after_append(request: Request) -> Reply:  # the handler's signature
            pi.assistant("the answer arrives while the summary is made")
            pi.append_to(path, len(pi.entries) - 1)
            index(worker.settings)
            appended.set()
            return Reply.answer("stale summary")

        server.handler = answer_after_append
        report = worker.run_once(threading.Event())
        assert appended.is_set()
        assert report.dropped == 1
        node = next(iter(summaries(records(tmp_path / "archive")["s-main"]).values()))
        assert node["text"] != "stale summary"
        assert worker.store.cache_size() >= 1


def _long_sessions(tmp_path: Path, count: int) -> SummaryWorker:
    """``count`` sessions of 64 long exchanges each, indexed: 21 summaries each to make."""
    for n in range(count):
        pi = PiSession(f"s-{n}", "/w")
        for i in range(64):
            pi.user(f"question {i} of session {n}: " + "how does the reader resume " * 40)
            pi.assistant(f"answer {i}: " + "it keeps the cursor and reads on from there " * 50)
        pi.write(tmp_path / "sessions" / "--w--" / f"s{n}.jsonl")
    worker = worker_for(tmp_path)
    index(worker.settings)
    return worker


def _peak_of_run(worker: SummaryWorker) -> tuple[RunReport, int]:
    import tracemalloc

    tracemalloc.start()
    try:
        report = worker.run_once(threading.Event())
        return report, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


class TestAtScale:
    def test_a_record_is_written_once_per_pass(self, tmp_path: Path) -> None:
        """Every node of a record at one level is summarized from one read and written in one go:
        three levels, three writes (one a node before: 21)."""
        from watchdog.events import FileSystemEvent, FileSystemEventHandler
        from watchdog.observers import Observer

        worker = _long_sessions(tmp_path, 4)
        folder = next((tmp_path / "archive").rglob("*.json")).parent
        writes: dict[str, int] = {}

        class Count(FileSystemEventHandler):
            def on_moved(self, event: FileSystemEvent) -> None:
                name = Path(str(event.dest_path)).name
                writes[name] = writes.get(name, 0) + 1

        observer = Observer()
        observer.schedule(Count(), str(folder))
        observer.start()
        try:
            report = worker.run_once(threading.Event())
            time.sleep(0.5)  # the last rename's event
        finally:
            observer.stop()
            observer.join()
        assert (report.summarized, report.failed, report.dropped) == (4 * 21, 0, 0)  # 16 + 4 + 1 a record
        assert all(n["ready"] for r in records(tmp_path / "archive").values() for n in summaries(r).values())
        assert len(writes) == 4 and set(writes.values()) == {3}, writes

    def test_what_a_run_holds_does_not_grow_with_the_archive(self, tmp_path: Path) -> None:
        """The queue keeps no node's input from its scan and no record it wrote: a run over three
        times the records peaks at about the same traced memory (the inputs and the 64 records
        kept parsed made it grow with the archive: 7.1 MB for 4 records of 0.24 MB, 18.2 MB for 12)."""
        small, small_peak = _peak_of_run(_long_sessions(tmp_path / "small", 4))
        large, large_peak = _peak_of_run(_long_sessions(tmp_path / "large", 12))
        assert (small.summarized, large.summarized) == (4 * 21, 12 * 21)
        assert large_peak < 1.5 * small_peak, (small_peak, large_peak)  # it was 2.6 times before
