"""Child processes spoken to over stdin/stdout, for tests: how to end one cleanly."""

from __future__ import annotations

import contextlib
import subprocess
import threading
from collections.abc import Iterable


def close_child(
    proc: subprocess.Popen[bytes], readers: Iterable[threading.Thread], timeout: float = 30
) -> int:
    """Close stdin (the orderly end for a line-protocol child), kill only if it does not exit in
    time, then join the threads reading its output and close the pipes; returns the exit code."""
    if proc.stdin is not None and not proc.stdin.closed:
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.close()
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait(timeout=10)
    for reader in readers:
        reader.join(timeout=10)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    return code
