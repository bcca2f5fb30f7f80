"""A Pi child asked about a marathon session the service read loads the service's cue ledger (real processes)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import msgspec
import pytest

from pbot_watch.config import load_settings
from pbot_watch.memory.cue_follow import SAVED_FROM, decode_ledger, encode_ledger, ledger_head, ledger_store
from tests.memory.work import Work, cues_of
from tests.pi_bridge.child import ServeChild
from tests.support.service import ServiceProcess, wait_for

pytestmark = pytest.mark.slow

BUILD_LOG = "".join(f"[{n:04d}] compiling module {n % 97} of the long build\n" for n in range(1200))
"""About 50 KB: a tool output of a marathon session (its bytes are mostly such outputs)."""


def marathon(path: Path) -> Work:
    """A session just past ``SAVED_FROM``: long build logs, failures, compactions."""
    work = Work(path, cwd="/w")
    while path.stat().st_size < SAVED_FROM + (1 << 20):
        for _ in range(40):
            work.run("make", BUILD_LOG)
        work.run("npm test", "FAIL src/a.test.ts\nexpected 2 to be 3\n", error=True)
        work.compact()
    return work


def saved_offset(store: Path) -> int | None:
    """Where the one saved ledger of ``store`` was read to (``None``: none yet)."""
    saved = list(store.glob("*.cues"))
    return ledger_head(saved[0].read_bytes()).cursor[2] if len(saved) == 1 else None


def test_the_child_gives_the_cues_of_a_session_the_service_read(isolated_home: Path, tmp_path: Path) -> None:
    """The service saves the ledger as it reads; a new child's cues are the file's, appends after it included."""
    sessions = tmp_path / "sessions"
    path = sessions / "ws" / "s.jsonl"
    work = marathon(path)
    with ServiceProcess([sessions], tmp_path / "archive").start() as service:
        store = ledger_store(service.state_dir)
        wait_for(
            lambda: saved_offset(store) == path.stat().st_size or None,
            timeout=120,
            what="the service to save the session's cue ledger",
            details=service.log_tail,
        )
        assert 0 == service.stop()
    work.run("git status", "nothing to commit\n")  # after the saved ledger: the child reads this itself
    work.compact()
    with ServeChild() as child:
        reply = child.ask("cues", {"sessionFile": str(path), "contextWindow": 32000})["result"]
    expected = cues_of(
        path,
        context_window=32000,
        tz=datetime.now().astimezone().tzinfo,
        max_tokens=load_settings({}).cues.cap(32000),  # as the child applies [cues]
    )
    assert expected.text
    assert reply["block"] == expected.text
    assert reply["batch"] == expected.batch
    # What the child answers from is the saved ledger, not a read of the file: a line changed
    # in it shows in the next child's block.
    tamper(store, "FAIL", "FAIL (as saved)")
    with ServeChild() as child:
        reply = child.ask("cues", {"sessionFile": str(path), "contextWindow": 32000})["result"]
    assert "FAIL (as saved)" in reply["block"]


def tamper(store: Path, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` in the cue lines of the one ledger saved in ``store``, still valid."""
    (saved,) = store.glob("*.cues")
    data = saved.read_bytes()
    head = ledger_head(data)
    _header, cursor, reader, ledger = decode_ledger(data, head)
    ledger.work = {
        order: msgspec.structs.replace(work, full=work.full.replace(old, new))
        for order, work in ledger.work.items()
    }
    saved.write_bytes(encode_ledger(Path(head.path), reader, cursor, ledger))
