"""The allocator ``run`` chooses is the service's alone: its children start with Python's own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pbot_watch.service.allocator import ALLOCATOR_VAR, CHOSEN_VAR

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not Path("/proc/self/environ").exists(),
    reason="the switch is made on glibc Linux only, and read back from /proc",
)

# A process that starts as ``run`` does, then spawns a child the way raw memory's build workers
# are started (multiprocessing's spawn), and prints what each runs with.
SCRIPT = """
import multiprocessing, os, sys
from pbot_watch.service.allocator import current, use_system_allocator

def child(queue):
    queue.put(os.environ.get("PYTHONMALLOC"))

if __name__ == "__main__":
    use_system_allocator()
    start = open(f"/proc/{os.getpid()}/environ", "rb").read().split(b"\\0")
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    worker = context.Process(target=child, args=(queue,))
    worker.start()
    print(current(), b"PYTHONMALLOC=malloc" in start, queue.get(), os.environ.get("PBOT_WATCH_CHOSE_ALLOCATOR"))
    worker.join()
"""


def _run(tmp_path: Path, **env: str) -> list[str]:
    script = tmp_path / "service_like.py"
    script.write_text(SCRIPT)
    environ = {k: v for k, v in os.environ.items() if k not in (ALLOCATOR_VAR, CHOSEN_VAR)}
    done = subprocess.run(
        [sys.executable, str(script)],
        check=False,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_service_runs_with_malloc_and_its_children_do_not(tmp_path: Path) -> None:
    """Re-executed with ``PYTHONMALLOC=malloc`` (its starting environment says so), the process
    takes the variable out again: a spawned child inherits neither it nor the mark."""
    assert _run(tmp_path) == ["malloc", "True", "None", "None"]


def test_an_allocator_a_person_chose_is_kept_and_passed_on(tmp_path: Path) -> None:
    """``PYTHONMALLOC`` set by the person: no re-execution, and the children get it too."""
    assert _run(tmp_path, PYTHONMALLOC="pymalloc") == ["pymalloc", "False", "pymalloc", "None"]
