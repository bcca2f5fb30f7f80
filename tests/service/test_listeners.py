"""The listener thread: records reach the listeners off the reading thread, rewrites coalesced."""

from __future__ import annotations

import threading
from pathlib import Path

from pbot_watch.service.listeners import ListenerThread, listener_name


class Gate:
    """A listener that records what it got and, while closed, holds the listener thread."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.open = threading.Event()
        self.entered = threading.Event()

    def __call__(self, record: Path, session_id: str) -> None:
        self.entered.set()
        self.open.wait(10)
        self.seen.append((record.name, session_id))


class TestListenerThread:
    def test_written_returns_while_a_listener_is_busy(self) -> None:
        """The reading thread only queues: a listener stuck on one record delays nothing else."""
        gate = Gate()
        thread = ListenerThread([gate])
        thread.start()
        thread.written(Path("a.json"), "a")
        assert gate.entered.wait(5)
        thread.written(Path("b.json"), "b")  # returns although the listener is still on a.json
        assert 2 == thread.backlog
        gate.open.set()
        assert thread.wait_idle(5)
        assert [("a.json", "a"), ("b.json", "b")] == gate.seen
        assert thread.stop(5)

    def test_rewrites_before_their_turn_are_passed_once(self) -> None:
        """A record written again while queued keeps its place and is passed once."""
        gate = Gate()
        thread = ListenerThread([gate])
        thread.start()
        thread.written(Path("first.json"), "f")
        assert gate.entered.wait(5)
        for name in ("a", "b", "a", "c", "a", "b"):
            thread.written(Path(f"{name}.json"), name)
        gate.open.set()
        assert thread.wait_idle(5)
        assert ["first.json", "a.json", "b.json", "c.json"] == [name for name, _ in gate.seen]
        assert (4, 3) == (thread.passed, thread.coalesced)
        assert thread.stop(5)

    def test_a_failing_listener_is_reported_and_the_next_one_still_runs(self) -> None:
        """An exception is shown as an error naming the listener; the other listeners get the record."""
        errors: list[str] = []
        seen: list[str] = []

        def broken(record: Path, session_id: str) -> None:
            raise ValueError(f"bad {record.name} {session_id}")

        thread = ListenerThread([broken, lambda record, _: seen.append(record.name)], errors.append)
        thread.start()
        thread.written(Path("r.json"), "s")
        assert thread.wait_idle(5)
        assert ["r.json"] == seen
        assert 1 == len(errors)
        assert "record listener TestListenerThread" in errors[0]
        assert "ValueError('bad r.json s')" in errors[0]
        assert thread.stop(5)

    def test_stop_does_not_wait_for_queued_records(self) -> None:
        """A stop ends after the call in progress; what is still queued is left to the next refresh."""
        gate = Gate()
        thread = ListenerThread([gate])
        thread.start()
        thread.written(Path("a.json"), "a")
        assert gate.entered.wait(5)
        thread.written(Path("b.json"), "b")
        assert not thread.stop(0.1)  # still inside a.json
        gate.open.set()
        assert thread.stop(5)
        assert [("a.json", "a")] == gate.seen

    def test_stop_closes_each_listener_on_its_thread(self) -> None:
        """What a listener opened is closed on the thread that used it (SQLite connections must be);
        one that cannot close does not keep the others open."""
        closed: list[tuple[str, str]] = []

        class Holding:
            def __init__(self, name: str, fails: bool = False) -> None:
                self.name, self.fails = name, fails

            def __call__(self, record: Path, session_id: str) -> None: ...

            def close(self) -> None:
                closed.append((self.name, threading.current_thread().name))
                if self.fails:
                    raise OSError("disk gone")

        thread = ListenerThread([Holding("a", fails=True), lambda record, _: None, Holding("b")])
        thread.start()
        thread.written(Path("r.json"), "s")
        assert thread.wait_idle(5)
        assert thread.stop(5)
        assert [("a", "pbot-listeners"), ("b", "pbot-listeners")] == closed

    def test_names(self) -> None:
        """Listeners are named by what they are, not by a repr of their state."""

        class Search:
            def __call__(self, record: Path, session_id: str) -> None: ...

            def on_record(self, record: Path, session_id: str) -> None: ...

        assert [
            "TestListenerThread.test_names.<locals>.Search",
            "TestListenerThread.test_names.<locals>.Search.on_record",
        ] == [
            listener_name(Search()),
            listener_name(Search().on_record),
        ]
