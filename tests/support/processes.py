"""Child processes spoken to in lines over stdin and stdout, for tests: Pi in RPC mode, pbot-watch pi serve.

``LineChild`` starts one with two threads that drain its stdout and stderr as they come (so it
never blocks on a full pipe); ``close_child`` ends one cleanly, by closing its stdin.
"""

from __future__ import annotations

import contextlib
import queue
import subprocess
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Self


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


class LineChild:
    """Lines written to the child's stdin; its stdout lines on ``lines`` (``None`` once it closes)."""

    def __init__(
        self, argv: list[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None
    ) -> None:
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stderr = bytearray()
        self._readers = [
            threading.Thread(target=self._read_out, name=f"{argv[0]}-stdout", daemon=True),
            threading.Thread(target=self._read_err, name=f"{argv[0]}-stderr", daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def received(self, line: bytes) -> None:
        """One stdout line, with its newline; a subclass may parse it instead of keeping the bytes."""
        self.lines.put(line)

    def ended(self) -> None:
        """Stdout closed: the child exited or closed it."""
        self.lines.put(None)

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for line in iter(self.proc.stdout.readline, b""):
            self.received(line)
        self.ended()

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        while chunk := self.proc.stderr.read1(1 << 16):
            self.stderr += chunk

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def close(self, timeout: float = 30) -> int:
        """Close stdin (the orderly way to stop); kill only if it does not exit in time."""
        return close_child(self.proc, self._readers, timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
