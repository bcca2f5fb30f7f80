"""personal-bot 0.2.3 and the pbot-watch service on one workspace at the same time.

pbot's own ``HistoryService`` (its load and its summary pass, through the parity oracle) and
``pbot-watch run`` (a real subprocess, summarizing offline when idle) write the same
``<workspace>/.pi/pbot/history/<id>.json``. Through appends, summaries made by each side and
restarts of both, the record converges: nobody rewrites it back and forth, no ready summary
goes pending again, and the node ids are the ones pbot's code computes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pbot_watch.summarize.queue import SUMMARIZER_FIELD
from tests.core.pbot_oracle import Oracle
from tests.e2e.pi_install import PiInstall
from tests.support.pi_sessions import PiSession, record_of
from tests.support.service import ServiceProcess, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

SESSION_ID = "01a228f5-0000-7000-8000-00000000a11e"
PBOT_SUMMARY = "pbot summary of "


@pytest.fixture
def oracle(pi_install: PiInstall) -> Iterator[Oracle]:
    """Started in the test's own home: pbot's Pi looks for sessions in this agent dir."""
    pbot = Oracle(pi_install)
    yield pbot
    pbot.close()


def the_record(folder: Path) -> tuple[Path, dict[str, Any]]:
    paths = sorted(folder.glob("*.json"))
    assert 1 == len(paths), f"one record for the session, found {[p.name for p in paths]}"
    return paths[0], json.loads(paths[0].read_bytes())


def summaries(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["id"]: n for n in record["nodes"] if n["kind"] == "summary"}


def without_marks(record: dict[str, Any]) -> dict[str, Any]:
    """The record as pbot rewrites it: summary nodes carry only pbot's fields, and the record no
    provenance (pbot keeps only id, sessionId, name and nodes; pbot-watch does not put it back)."""
    nodes = [{k: v for k, v in n.items() if k != SUMMARIZER_FIELD} for n in record["nodes"]]
    return {**{k: v for k, v in record.items() if k not in ("machine", "user")}, "nodes": nodes}


class Workspace:
    """One Pi session in a workspace, its record, and both writers' view of it."""

    def __init__(self, tmp_path: Path, oracle: Oracle) -> None:
        self.agent = Path(os.environ["PI_CODING_AGENT_DIR"])
        self.sessions = self.agent / "sessions"
        self.root = tmp_path / "work"
        self.root.mkdir()
        self.folder = self.root / ".pi" / "pbot" / "history"
        self.session_dir = self.sessions / "--work--"
        self.file = self.session_dir / "2026-12-01T10-00-00-000Z_side.jsonl"
        self.pi = PiSession(session_id=SESSION_ID, cwd=str(self.root), file=self.file)
        self.turns = 0
        self.oracle = oracle
        self.ready: dict[str, str] = {}  # every summary text seen ready, by node id

    def talk(self, count: int) -> None:
        for _ in range(count):
            self.turns += 1
            self.pi.turn(f"question {self.turns}: how is the quince jam going?", f"answer {self.turns}: fine")

    def pbot(self, *, organize: bool = False) -> list[str]:
        """pbot started afresh (a new Pi), loading the workspace; the record files it wrote."""
        out = self.oracle.service(self.root, self.session_dir, [self.file], organize=organize)
        assert "error" not in out, out
        assert [] == out["warnings"]
        writes: list[str] = out["writes"]
        return writes

    def check(self) -> dict[str, Any]:
        """No ready summary lost, none pending, node ids as pbot computes them; the record."""
        _, record = self.the()
        found = summaries(record)
        for node_id, text in self.ready.items():
            assert found[node_id]["ready"], f"summary {node_id} lost"
            if text.startswith(PBOT_SUMMARY):
                assert found[node_id]["text"] == text, f"pbot's summary {node_id} replaced"
        self.ready.update({i: n["text"] for i, n in found.items() if n["ready"]})
        theirs = self.oracle.record(self.file.read_bytes(), record["id"])["record"]
        ours = record_of(self.file.read_bytes(), record_id=record["id"])
        ids = [n["id"] for n in record["nodes"]]
        assert ids == [n["id"] for n in theirs["nodes"]] == [n["id"] for n in ours["nodes"]]
        return record

    def the(self) -> tuple[Path, dict[str, Any]]:
        return the_record(self.folder)

    def quiet(self, service: ServiceProcess | None) -> None:
        """Both sides leave the record alone: a fresh pbot writes nothing, the file stays the same inode."""
        path, before = self.the()
        inode = path.stat().st_ino
        written = service.status().records_written if service and service.status() else None
        assert [] == self.pbot()
        if service is not None:
            service.wait_status(lambda s: s.activity == "idle", "the service idle")
            status = service.status()
            assert status is not None and status.records_written == written
        path_after, after = self.the()
        assert (path_after, path_after.stat().st_ino, after) == (path, inode, before)


def settled(service: ServiceProcess, space: Workspace, exchanges: int) -> dict[str, Any]:
    """Wait until the service has indexed ``exchanges`` exchanges and summarized all it can."""

    def done() -> dict[str, Any] | None:
        if not space.folder.is_dir() or not list(space.folder.glob("*.json")):
            return None
        _, record = space.the()
        nodes = record["nodes"]
        indexed = sum(n["kind"] == "exchange" for n in nodes) == exchanges
        return record if indexed and all(n["ready"] for n in nodes) else None

    record: dict[str, Any] = wait_for(done, 60, "the service to index and summarize", service.log_tail)
    service.wait_status(lambda s: s.activity == "idle" and s.summaries.get("pending") == 0, "summaries done")
    return record


def test_pbot_and_the_service_share_a_workspace(tmp_path: Path, oracle: Oracle) -> None:
    space = Workspace(tmp_path, oracle)
    space.talk(4)
    args = ("--idle-seconds", "1", "--debounce-seconds", "0.1")
    with ServiceProcess([space.sessions], None, *args, log=tmp_path / "service.log") as service:
        # 1. pbot-watch first: the record and its offline summary. pbot's next load drops the
        # summarizer mark, once (pbot keeps only its own node fields); it keeps the summary.
        service.start()
        first = settled(service, space, 4)
        assert all(n.get(SUMMARIZER_FIELD) for n in summaries(first).values())
        space.check()
        assert 1 == len(space.pbot())
        assert space.the()[1] == without_marks(first)
        space.quiet(service)

        # 2. The session grows; pbot loads and summarizes the new group itself, while the
        # service indexes the same append. Each keeps the other's summaries.
        space.talk(4)
        space.pbot(organize=True)
        settled(service, space, 8)
        record = space.check()
        assert any(n["text"].startswith(PBOT_SUMMARY) for n in summaries(record).values()) or any(
            n.get(SUMMARIZER_FIELD) for n in summaries(record).values()
        )
        space.pbot()  # drops the marks of whatever the service summarized, if anything
        space.quiet(service)
        assert 0 == service.stop()

    # 3. The service is down; the person keeps working with pbot, which summarizes. The
    # restarted service catches up on the file and takes pbot's record as it is.
    space.talk(4)
    assert space.pbot(organize=True)
    by_pbot = space.check()
    assert all(n["ready"] for n in by_pbot["nodes"])
    assert any(n["text"].startswith(PBOT_SUMMARY) for n in summaries(by_pbot).values())
    with ServiceProcess([space.sessions], None, *args, log=tmp_path / "service.log") as service:
        service.start()
        status = service.wait_status(lambda s: s.records_unchanged >= 1, "the catch-up")
        assert 0 == status.records_written
        assert space.the()[1] == by_pbot
        space.quiet(service)

        # 4. Both again: appends with the service running and pbot restarted in between.
        for _ in range(2):
            space.talk(4)
            settled(service, space, space.turns)
            space.check()
            space.pbot()
            space.check()
            space.quiet(service)
        assert 0 == service.stop()
    # Restarted once more with nothing new, neither writes.
    space.quiet(None)
    with ServiceProcess([space.sessions], None, *args, log=tmp_path / "service.log") as service:
        service.start()
        space.quiet(service)
        assert 0 == service.wait_status(lambda s: True, "status").records_written
        assert 0 == service.stop()
    final = space.check()
    levels = [n["level"] for n in summaries(final).values()]
    assert (5, 1) == (levels.count(1), levels.count(2))
    authors = {
        "pbot" if n["text"].startswith(PBOT_SUMMARY) else "pbot-watch" for n in summaries(final).values()
    }
    assert {"pbot", "pbot-watch"} == authors
