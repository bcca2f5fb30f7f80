"""The warm query server beside the service: started with it, restarted when it ends, stopped with it.

The server (``prefork/server.py``) is a process of its own, not a thread of the service: it
forks a child per query, and forking a process with threads (the service has several) can
leave a lock held in the child forever. Its socket is in the state folder, which the service's
lock makes the service's alone; the server also stops by itself once the service is gone.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import structlog

from pbot_watch.prefork import wire

log = structlog.get_logger("pbot_watch.service.warm")

RESTART_SECONDS = (1.0, 5.0, 30.0, 300.0)
"""Waits before each restart of a server that ended on its own (then the last one, each time)."""
STOP_SECONDS = 6.0
"""The server lets queries still running finish for 5 s when asked to stop."""


class WarmServer:
    """The ``Companion`` that keeps the warm query server running (``pbot_watch.service.hooks``)."""

    def __init__(self, state_dir: Path, log_level: str = "info") -> None:
        self.pending = b""
        self.path = wire.socket_path(state_dir)
        self.log_level = log_level
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self.next_start: float | None = None
        self.why_off: str | None = None
        if self.path is None:
            self.why_off = f"the socket's path under {state_dir} is longer than a socket can have"
        elif not hasattr(socket, "AF_UNIX") or not hasattr(socket, "send_fds") or not hasattr(os, "fork"):
            self.why_off = "this system has no Unix sockets with descriptor passing, or no fork"

    def start(self) -> None:
        if self.why_off is not None:
            log.info("warm_queries_off", reason=self.why_off)
            return
        self._spawn()

    def check(self) -> None:
        if self.why_off is not None:
            return
        self._relay()
        if self.process is not None and self.process.poll() is not None:
            self._relay()
            wait = RESTART_SECONDS[min(self.restarts, len(RESTART_SECONDS) - 1)]
            log.warning("warm_server_ended", code=self.process.returncode, restart_in_seconds=wait)
            self.process = None
            self.next_start = time.monotonic() + wait
        if self.process is None and self.next_start is not None and time.monotonic() >= self.next_start:
            self.restarts += 1
            self._spawn()

    def close(self) -> None:
        process, self.process = self.process, None
        self.next_start = None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        self._relay(process)

    def status(self) -> dict[str, Any]:
        running = self.process is not None and self.process.poll() is None
        return {
            "running": running,
            "pid": self.process.pid if running and self.process is not None else None,
            "socket": str(self.path) if self.path is not None else None,
            "restarts": self.restarts,
            "off": self.why_off,
        }

    def _spawn(self) -> None:
        assert self.path is not None
        argv = [sys.executable, "-P", "-m", "pbot_watch.prefork.server", str(self.path)]
        argv += ["--parent", str(os.getpid()), "--log-level", self.log_level]
        self.next_start = None
        self.pending = b""
        try:
            self.process = subprocess.Popen(  # noqa: S603 - this interpreter, our own module
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
            )
        except OSError as error:
            log.warning("warm_server_not_started", error=str(error))
            self.next_start = time.monotonic() + RESTART_SECONDS[-1]
            return
        log.info("warm_server_started", pid=self.process.pid, socket=str(self.path))
        assert self.process.stdout is not None
        os.set_blocking(self.process.stdout.fileno(), False)

    def _relay(self, process: subprocess.Popen[bytes] | None = None) -> None:
        """Log the server's lines as the service's own (its JSON events; anything else as text)."""
        process = process or self.process
        if process is None or process.stdout is None:
            return
        try:
            while chunk := process.stdout.read(1 << 16):
                self.pending += chunk
        except (OSError, ValueError):
            pass
        *lines, self.pending = self.pending.split(b"\n")
        for line in lines:
            try:
                fields = json.loads(line)
                event = str(fields.pop("event"))
                level = str(fields.pop("level", "info"))
            except (ValueError, KeyError, AttributeError):
                log.warning("warm_server_said", text=line.decode("utf-8", "replace"))
                continue
            getattr(log, level if level in ("debug", "info", "warning", "error") else "info")(event, **fields)
