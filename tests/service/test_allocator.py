"""The service runs with the allocator it was started with: CPython's own, unless the person chose."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.support.paths import FIXTURES
from tests.support.service import ServiceProcess

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(90),
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads the environment from /proc"),
]


def _started(tmp_path: Path, **env: str) -> tuple[str, list[bytes]]:
    """The ``allocator`` ``service_started`` logs, and the service process's environment."""
    sessions = tmp_path / "sessions" / "--proj--"
    sessions.mkdir(parents=True)
    shutil.copy(FIXTURES / "real-v3" / "01-plain-multiturn.jsonl", sessions)
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONMALLOC"}
    service = ServiceProcess([sessions.parent], tmp_path / "archive", env={**environ, **env})
    with service.start():
        line = service.wait_log("service_started", "the service to start")
        environment = Path(f"/proc/{service.pid}/environ").read_bytes().split(b"\0")
        assert service.stop() == 0
    return str(line["allocator"]), environment


def test_the_service_keeps_cpythons_allocator(tmp_path: Path) -> None:
    """No re-execution with ``PYTHONMALLOC=malloc``: the C allocator made the first run over 634 MB
    about a tenth slower and peaked higher (``service/allocator.py``)."""
    allocator, environment = _started(tmp_path)
    assert allocator == "pymalloc"
    assert not any(item.startswith(b"PYTHONMALLOC=") for item in environment)


def test_an_allocator_the_person_chose_is_used(tmp_path: Path) -> None:
    allocator, environment = _started(tmp_path, PYTHONMALLOC="malloc")
    assert allocator == "malloc"
    assert b"PYTHONMALLOC=malloc" in environment
