"""The real ``pbot-watch pi serve`` in a subprocess, spoken to as the Pi extension does."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from tests.support.processes import close_child

SCRIPT = Path(sys.executable).parent / "pbot-watch"
REPLY_TIMEOUT_S = 60


class ServeChild:
    """``pbot-watch pi serve ARGS``: write request lines, read reply lines (raw bytes kept)."""

    def __init__(self, *args: str, env: Mapping[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [str(SCRIPT), "pi", "serve", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env if env is not None else os.environ),
        )
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stderr = bytearray()
        self._next = 0
        self._readers = [
            threading.Thread(target=self._read_out, daemon=True),
            threading.Thread(target=self._read_err, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for line in iter(self.proc.stdout.readline, b""):
            self.lines.put(line)
        self.lines.put(None)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        while chunk := self.proc.stderr.read1(1 << 16):
            self.stderr += chunk

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, method: str, params: dict[str, Any] | None = None) -> int:
        self._next += 1
        self.send_raw(
            json.dumps({"id": self._next, "method": method, "params": params or {}}).encode() + b"\n"
        )
        return self._next

    def reply_line(self, timeout: float = REPLY_TIMEOUT_S) -> bytes:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"no reply within {timeout} s; stderr:\n{self.stderr.decode()[-3000:]}"
            ) from None
        if line is None:
            self.lines.put(None)
            raise AssertionError(
                f"the child exited ({self.proc.poll()}); stderr:\n{self.stderr.decode()[-3000:]}"
            )
        return line

    def reply(self, timeout: float = REPLY_TIMEOUT_S) -> dict[str, Any]:
        return dict(json.loads(self.reply_line(timeout)))

    def ask(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one request and return its reply (the next line must be it)."""
        request_id = self.send(method, params)
        reply = self.reply()
        assert request_id == reply["id"], reply
        return reply

    def close(self, timeout: float = 30) -> int:
        return close_child(self.proc, self._readers, timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
