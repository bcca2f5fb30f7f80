"""The real ``pbot-watch pi serve`` in a subprocess, spoken to as the Pi extension does."""

from __future__ import annotations

import json
import queue
from collections.abc import Mapping
from typing import Any

from tests.support.cli import pbot_watch_executable
from tests.support.processes import LineChild

REPLY_TIMEOUT_S = 60


class ServeChild(LineChild):
    """``pbot-watch pi serve ARGS``: write request lines, read reply lines (raw bytes kept)."""

    def __init__(self, *args: str, env: Mapping[str, str] | None = None) -> None:
        super().__init__([pbot_watch_executable(), "pi", "serve", *args], env=env)
        self._next = 0

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
