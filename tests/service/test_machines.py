"""One person, two machines, one workspace history: archives merged by rsync (without --delete).

Each machine indexes its own Pi sessions into its own checkout of the workspace; the record
folders are then copied both ways as ``rsync -a -u`` does (new files, and newer ones over older),
round after round, while both services run and summarize. What must hold: each side sees the
records of both, with their provenance; summaries survive; and the copies settle (a round that
copies nothing new changes nothing: no record is rewritten back and forth).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path

import pytest

from tests.support.machines import ScratchMachine
from tests.support.pi_sessions import PiSession
from tests.support.service import wait_for

pytestmark = pytest.mark.slow


class Machine(ScratchMachine):
    def __init__(self, root: Path, name: str) -> None:
        super().__init__(root, name, root / name / "src" / "proj")
        self.config_file.parent.mkdir(parents=True)
        self.config_file.write_text(
            f'machine = "{name}"\nuser = "dev"\nidle_seconds = 0.3\n', encoding="utf-8"
        )

    @property
    def history(self) -> Path:
        return self.workspace / ".pi" / "pbot" / "history"

    def session(self, session_id: str, topic: str, exchanges: int) -> PiSession:
        pi = PiSession(session_id, str(self.workspace))
        for i in range(exchanges):
            pi.user(f"{topic} question {i}")
            pi.assistant(f"{topic} answer {i}")
        pi.write(self.sessions / f"{session_id}.jsonl")
        return pi

    def digests(self) -> dict[str, str]:
        return {
            p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(self.history.glob("*.json"))
        }


def rsync_update(source: Path, target: Path) -> int:
    """``rsync -a -u source/ target/``: copy what is missing or newer there; never delete. Files copied."""
    copied = 0
    target.mkdir(parents=True, exist_ok=True)
    for path in source.glob("*.json"):
        there = target / path.name
        if there.exists() and there.stat().st_mtime_ns >= path.stat().st_mtime_ns:
            continue
        if there.exists() and there.read_bytes() == path.read_bytes():
            continue
        tmp = target / f".{path.name}.rsync"
        shutil.copy2(path, tmp)
        tmp.replace(there)
        copied += 1
    return copied


def test_two_machines_archives_merge_and_settle(tmp_path: Path) -> None:
    laptop, desktop = Machine(tmp_path, "laptop"), Machine(tmp_path, "desktop")
    laptop.session("11111111-0000-7000-8000-000000000001", "parser", 9)
    laptop.session("11111111-0000-7000-8000-000000000002", "deploy", 5)
    desktop.session("22222222-0000-7000-8000-000000000001", "cache", 8)
    laptop.cli("index")
    desktop.cli("index")
    mine = {
        json.loads(p.read_text())["sessionId"]: json.loads(p.read_text())
        for p in laptop.history.glob("*.json")
    }
    assert {r["machine"] for r in mine.values()} == {"laptop"}  # provenance on every record

    with laptop.service, desktop.service:
        laptop.service.start()
        desktop.service.start()
        # Both summarize their own records (the offline summarizer), then the archives meet.
        for machine in (laptop, desktop):
            wait_for(
                lambda m=machine: all(
                    n["ready"] for p in m.history.glob("*.json") for n in json.loads(p.read_text())["nodes"]
                ),
                30,
                f"{machine.name}'s summaries",
                machine.service.log_tail,
            )
        rounds = []
        for _ in range(4):
            copied = rsync_update(laptop.history, desktop.history) + rsync_update(
                desktop.history, laptop.history
            )
            time.sleep(1.5)  # both services see the new files, and summarize if they must
            rounds.append((copied, laptop.digests(), desktop.digests()))
        # The copies settle: after the first exchange of files nothing is copied or rewritten.
        assert rounds[0][0] == 3
        assert [r[0] for r in rounds[1:]] == [0, 0, 0]
        assert rounds[1][1] == rounds[-1][1] == rounds[-1][2]

        # A record arriving while the service runs is searchable at once, with its provenance.
        found = json.loads(desktop.cli("search", "--json", "parser question 3"))
        exchange = [m for m in found["matches"] if m["kind"] == "exchange"]
        assert len(exchange) == 1
        assert (exchange[0]["machine"], exchange[0]["user"]) == ("laptop", "dev")
        listing = json.loads(desktop.cli("search", "--json"))
        assert listing["total"] == 3
        assert {m["machine"] for m in listing["matches"]} == {"laptop", "desktop"}

        # Summaries written on one machine are kept on the other (never replaced by pending ones).
        theirs = {
            json.loads(p.read_text())["sessionId"]: json.loads(p.read_text())
            for p in desktop.history.glob("*.json")
        }
        for session_id, record in mine.items():
            ready = [n for n in theirs[session_id]["nodes"] if n["kind"] == "summary"]
            assert ready and all(n["ready"] and n["text"] for n in ready)
            assert theirs[session_id]["machine"] == record["machine"]

        # The laptop's session grows: its record is rewritten there, once, and travels again.
        grown = laptop.session("11111111-0000-7000-8000-000000000002", "deploy", 7)
        assert grown is not None
        wait_for(
            lambda: "deploy question 6" in "".join(p.read_text() for p in laptop.history.glob("*.json")),
            20,
            "the grown record",
        )
        copies = []
        for _ in range(4):
            copies.append(
                rsync_update(laptop.history, desktop.history) + rsync_update(desktop.history, laptop.history)
            )
            time.sleep(1.5)
        assert copies[0] >= 1
        assert copies[-2:] == [0, 0]
        assert laptop.digests() == desktop.digests()
        assert json.loads(desktop.cli("search", "--json", "deploy question 6"))["total"] >= 1
