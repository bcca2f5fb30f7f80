"""A session folder that is a symlink (``sessions/--home-me-proj--`` -> elsewhere), in the real service.

Its appends reach the record as fast as a plain folder's: the service watches it where it
points. Before, they waited for the periodic rescan (``reconcile_seconds``, 300 s by default).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.archive import records
from tests.support.pi_sessions import PiSession, append
from tests.support.service import ServiceProcess, wait_for

pytestmark = pytest.mark.timeout(90)

# Far below the rescan period (the default, 300 s, is kept): only a watch can be this quick.
LAG_SECONDS = 5.0


def exchanges(archive: Path, session_id: str) -> int:
    record = records(archive).get(session_id) if archive.is_dir() else None
    return sum(n["kind"] == "exchange" for n in record["nodes"]) if record else 0


def grow(pi: PiSession, path: Path, start: int, count: int) -> None:
    """Append ``count`` exchanges in one write, as Pi does."""
    before = path.read_bytes()
    pi.exchanges(count, start=start)
    append(path, pi.data()[len(before) :])


def appended_within(service: ServiceProcess, archive: Path, session_id: str, wanted: int) -> float:
    started = time.monotonic()
    wait_for(
        lambda: exchanges(archive, session_id) == wanted,
        LAG_SECONDS,
        f"{session_id}'s append to reach its record",
        service.log_tail,
    )
    return time.monotonic() - started


class TestSymlinkedSessionFolder:
    def test_appends_arrive_without_the_rescan(self, tmp_path: Path) -> None:
        sessions = tmp_path / "sessions"
        sessions.mkdir()
        target = tmp_path / "elsewhere" / "proj-sessions"
        pi = PiSession("s-linked", "/home/me/proj")
        pi.exchanges(2)
        pi.write(target / "s.jsonl")
        (sessions / "--home-me-proj--").symlink_to(target, target_is_directory=True)
        archive = tmp_path / "archive"
        with ServiceProcess([sessions], archive).start() as service:
            assert exchanges(archive, "s-linked") == 2
            grow(pi, sessions / "--home-me-proj--" / "s.jsonl", 2, 1)
            appended_within(service, archive, "s-linked", 3)
            grow(pi, target / "s.jsonl", 3, 1)  # written through its real path: the same file
            appended_within(service, archive, "s-linked", 4)
            assert service.stop() == 0

    def test_a_link_made_while_running(self, tmp_path: Path) -> None:
        """A symlinked folder that appears later is read at once and then watched where it points."""
        sessions = tmp_path / "sessions"
        sessions.mkdir()
        archive = tmp_path / "archive"
        target = tmp_path / "elsewhere" / "other-sessions"
        pi = PiSession("s-later", "/home/me/other")
        pi.exchanges(2)
        path = pi.write(target / "s.jsonl")
        with ServiceProcess([sessions], archive).start() as service:
            (sessions / "--home-me-other--").symlink_to(target, target_is_directory=True)
            appended_within(service, archive, "s-later", 2)
            grow(pi, path, 2, 1)
            appended_within(service, archive, "s-later", 3)
            assert service.stop() == 0
