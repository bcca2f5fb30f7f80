"""A workspace that cannot take records for a while loses nothing: the real service, per-workspace records.

While a workspace's ``.pi/pbot/history`` is read-only for the service's user, or the workspace
is deleted, its session is skipped (a warning). Once the folder takes records again the file is
read again and its record gets everything appended meanwhile: live, with no further append, and
at the next start.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.service.test_odd_files import drop_dac_override
from tests.support.archive import records
from tests.support.pi_sessions import PiSession, append
from tests.support.service import ServiceProcess, wait_for

pytestmark = pytest.mark.timeout(120)


class Workspace:
    """One session of ``cwd`` grown exchange by exchange, and the record in the workspace."""

    def __init__(self, tmp_path: Path) -> None:
        self.cwd = tmp_path / "proj"
        self.cwd.mkdir()
        self.sessions = tmp_path / "sessions"
        self.path = self.sessions / "--proj--" / "s.jsonl"
        self.pi = PiSession("s-ws", str(self.cwd))
        self.count = 0
        self.grow(2)

    @property
    def history(self) -> Path:
        return self.cwd / ".pi" / "pbot" / "history"

    def grow(self, count: int) -> None:
        """Append ``count`` exchanges in one write, as Pi does."""
        before = self.path.read_bytes() if self.path.exists() else b""
        self.pi.exchanges(count, start=self.count)
        self.count += count
        self.path.parent.mkdir(parents=True, exist_ok=True)
        append(self.path, self.pi.data()[len(before) :])

    def exchanges(self) -> int:
        record = records(self.history).get("s-ws") if self.history.is_dir() else None
        return sum(n["kind"] == "exchange" for n in record["nodes"]) if record else 0

    def wait_complete(self, service: ServiceProcess, what: str, timeout: float = 15.0) -> None:
        wait_for(lambda: self.exchanges() == self.count, timeout, what, service.log_tail)

    def service(self) -> ServiceProcess:
        service = ServiceProcess([self.sessions], None, log=self.sessions.parent / "service.log")
        service.args = [*drop_dac_override(), *service.args]  # root must meet the read-only folder
        return service


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path)


def not_writable(service: ServiceProcess, ws: Workspace) -> None:
    service.wait_status(
        lambda s: any(str(ws.cwd) in w and "not writable" in w for w in s.warnings),
        "the workspace to be reported not writable",
    )


class TestSkippedWorkspace:
    def test_read_only_history_heals_live(self, ws: Workspace) -> None:
        """Appended while read-only: once writable again the record gets it, with no other append."""
        with ws.service().start() as service:
            ws.wait_complete(service, "the first record")
            ws.history.chmod(0o555)
            ws.grow(1)
            not_writable(service, ws)
            assert ws.exchanges() == 2
            ws.history.chmod(0o755)
            ws.wait_complete(service, "the exchange appended while read-only to reach the record")

    def test_read_only_history_heals_at_the_next_start(self, ws: Workspace) -> None:
        """Skipped in one run, writable before the next: the next start reads it again."""
        with ws.service().start() as service:
            ws.wait_complete(service, "the first record")
            ws.history.chmod(0o555)
            ws.grow(1)
            not_writable(service, ws)
            assert service.stop() == 0
        ws.history.chmod(0o755)
        with ws.service().start() as service:
            ws.wait_complete(service, "the exchange appended while read-only to reach the record")

    def test_workspace_deleted_and_recreated(self, ws: Workspace) -> None:
        """Appended while the workspace is gone: once it exists again its record holds everything."""
        with ws.service().start() as service:
            ws.wait_complete(service, "the first record")
            shutil.rmtree(ws.cwd)
            ws.grow(1)
            service.wait_status(
                lambda s: any(f"workspace {ws.cwd} no longer exists" in w for w in s.warnings),
                "the workspace to be reported gone",
            )
            ws.cwd.mkdir()
            ws.wait_complete(service, "the recreated workspace's record to hold every exchange")
