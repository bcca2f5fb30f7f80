"""``kill -9`` at random moments while sessions grow: nothing lost, nothing duplicated, nothing torn."""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path

import pytest

from tests.support.archive import records
from tests.support.paths import FIXTURES
from tests.support.pi_sessions import append, append_split, lines_of
from tests.support.service import Expect, ServiceProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

SOURCES = [
    "03-tour-kitchen-sink.jsonl",
    "06-branching.jsonl",
    "07-auto-compaction.jsonl",
    "02-tool-calls.jsonl",
]


class Writer(threading.Thread):
    """Appends the fixture sessions line by line, round robin, some lines in pieces, like several Pis."""

    def __init__(self, folder: Path, rng: random.Random) -> None:
        super().__init__(name="pi-writer", daemon=True)
        self.rng = rng
        self.todo = [(folder / name, lines_of(FIXTURES / "real-v3" / name)) for name in SOURCES]
        self.stop = threading.Event()
        # The last line of each session waits for this, so the sessions are still growing when
        # the test kills the service the first few times, however slowly a loaded machine starts it.
        self.finish = threading.Event()

    def _end(self, lines: list[bytes]) -> int:
        return len(lines) if self.finish.is_set() else len(lines) - 1

    def run(self) -> None:
        position = [0] * len(self.todo)
        while not self.stop.is_set() and (
            not self.finish.is_set()
            or any(p < len(lines) for p, (_, lines) in zip(position, self.todo, strict=True))
        ):
            for i, (path, lines) in enumerate(self.todo):
                if position[i] >= self._end(lines):
                    continue
                line = lines[position[i]]
                if self.rng.random() < 0.3:
                    append_split(path, line, self.rng, pieces=2, pause=0.01)
                else:
                    append(path, line)
                position[i] += 1
            time.sleep(0.05)  # the writers' pace (the scenario), not a wait for a result


class Reader(threading.Thread):
    """Reads every record file in a loop; any file that is not complete JSON is a torn write."""

    def __init__(self, archive: Path) -> None:
        super().__init__(name="archive-reader", daemon=True)
        self.archive = archive
        self.stop = threading.Event()
        self.reads = 0
        self.torn: list[str] = []

    def run(self) -> None:
        while not self.stop.is_set():
            for path in self.archive.glob("*.json") if self.archive.is_dir() else []:
                try:
                    data = path.read_bytes()
                except FileNotFoundError:
                    continue
                try:
                    json.loads(data)
                except ValueError:
                    self.torn.append(f"{path.name}: {data[-80:]!r}")
                self.reads += 1


def test_kill_9_while_sessions_grow(tmp_path: Path) -> None:
    """Killed up to five times at random moments, the restarted service ends equal to a one-shot index."""
    rng = random.Random()
    sessions = tmp_path / "sessions"
    folder = sessions / "--proj--"
    folder.mkdir(parents=True)
    archive = tmp_path / "archive"
    expect = Expect([sessions], archive, tmp_path)
    writer, reader = Writer(folder, rng), Reader(archive)
    reader.start()
    writer.start()
    kills = 0
    try:
        while writer.is_alive() and kills < 5:
            service = ServiceProcess([sessions], archive).start(wait=False)
            service.wait_status(lambda s: s.running, "the service to start")
            time.sleep(rng.uniform(0.1, 1.0))  # a random moment to kill at: the point of the test
            service.kill()
            kills += 1
            if kills >= 2:
                writer.finish.set()
        writer.finish.set()
        writer.stop.set()
        writer.join(30)
        with ServiceProcess([sessions], archive).start() as service:
            expected = expect.same(service=service)
            assert service.stop() == 0
    finally:
        writer.stop.set()
        reader.stop.set()
        reader.join(10)
    assert kills >= 2
    assert len(expected) == len(SOURCES)
    assert reader.reads > 0
    assert reader.torn == []
    # One record per session: no duplicate written after a restart.
    assert len(list(archive.glob("*.json"))) == len(records(archive)) == len(SOURCES)
