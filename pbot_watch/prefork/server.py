"""The warm query server: the query commands imported once, a child forked per query.

``python -m pbot_watch.prefork.server SOCKET --parent PID``, started by the service
(``service/warm.py``) and ended with it: it stops when asked (SIGTERM), and when the process
that started it is gone. What it has to say goes to stdout as JSON lines (an event and its
fields), which the service logs in its own format. One thread, so that forking is safe; the children do the work, so a
slow query holds up no other.

Each child becomes the command exactly as the script would have run it: the script's three
standard streams in place of its own, its working folder, environment, umask and text
encodings, then ``pbot_watch.cli.main`` with its arguments, and ``os._exit`` with the code the
command ended with. The server reports how the child ended (its code, or the signal that
killed it) to the script, which exits the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import locale
import os
import selectors
import signal
import socket
import sys
import threading
import time
import traceback
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

from pbot_watch.prefork import wire

PRELOAD = (
    # What the query commands import as they run (their modules are imported by name first):
    # a test runs each of them after ``preload`` and finds nothing more of pbot-watch imported.
    "pbot_watch.catalog",
    "pbot_watch.cli.console",
    "pbot_watch.cli.progress",
    "pbot_watch.config",
    "pbot_watch.display",
    "pbot_watch.memory.handles",
    "pbot_watch.memory.query",
    "pbot_watch.query",
    "pbot_watch.redact.audit",
    "pbot_watch.redact.core",
    "pbot_watch.search.database",
    "pbot_watch.search.discover",
    "pbot_watch.search.index",
    "pbot_watch.search.render",
    "pbot_watch.service.lock",
    "pbot_watch.service.status_file",
    "pbot_watch.sources",
    "pbot_watch.tools.history_read",
    "pbot_watch.tools.history_search",
    "pbot_watch.tools.recall_memory",
    "pbot_watch.tools.search_memory",
    # What they show a person with (rich, imported on first use by each).
    "rich.console",
    "rich.markup",
    "rich.progress",
    "rich.text",
)
SHAPING_ENV = (
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSAFEPATH",
    "PYTHONUTF8",
    "PYTHONOPTIMIZE",
    "PYTHONDEVMODE",
    "PYTHONWARNINGS",
    "PYDANTIC",
)
"""Variables that shape what was imported and how (by their names' starts): a script whose values
differ runs the command itself. Not the allocator (``PYTHONMALLOC``) nor the hash seed: neither
changes what a command prints."""
STOP_WAIT_SECONDS = 5.0
"""How long queries still running may finish once the server is asked to stop."""
ACCEPT_TIMEOUT_SECONDS = 2.0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("socket", type=Path)
    parser.add_argument("--parent", type=int, help="stop when this process is gone (the service)")
    parser.add_argument("--log-level", default="info", help="debug: also a line for each query forked")
    args = parser.parse_args(argv)
    Server(args.socket, args.parent, debug=args.log_level == "debug").serve()


class Server:
    def __init__(self, path: Path, parent: int | None, *, debug: bool = False) -> None:
        self.path = path
        self.parent = parent
        self.debug = debug
        self.stopping = False
        self.children: dict[int, socket.socket | None] = {}
        self.selector = selectors.DefaultSelector()
        self.identity: dict[str, str] = {}
        self.stamps: dict[str, int] = {}

    def serve(self) -> None:
        _keep_standard_streams_open()
        with contextlib.suppress(OSError):  # a full pipe drops a line rather than stall every query
            os.set_blocking(1, False)
        self.identity = wire.identity()
        preload()
        self.stamps = code_stamps()
        listener = _bind(self.path)
        wake_read, wake_write = os.pipe()
        for fd in (wake_read, wake_write):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, _wake_only)
        for name in wire.FORWARDED_SIGNALS:
            signal.signal(getattr(signal, name), self._stop)
        self.selector.register(listener, selectors.EVENT_READ, "accept")
        self.selector.register(wake_read, selectors.EVENT_READ, "wake")
        self._say("warm_server_serving", socket=str(self.path), threads=threading.active_count())
        self._freeze()
        deadline: float | None = None
        try:
            while self.children or not self.stopping:
                for key, _events in self.selector.select(timeout=1.0):
                    if key.data == "accept" and not self.stopping:
                        self._accept(listener, [listener.fileno(), wake_read, wake_write])
                    elif key.data == "wake":
                        _drain(wake_read)
                    elif isinstance(key.data, int):
                        self._from_script(key.fileobj, key.data)  # type: ignore[arg-type]
                self._reap()
                if self.parent is not None and os.getppid() != self.parent:
                    self.stopping = True
                if self.stopping and deadline is None:
                    deadline = time.monotonic() + STOP_WAIT_SECONDS
                    self.selector.unregister(listener)
                    self._stop_listening(listener)
                if deadline is not None and time.monotonic() > deadline:
                    for pid in self.children:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
        finally:
            if deadline is None:
                self._stop_listening(listener)
        self._say("warm_server_stopped")

    def _stop_listening(self, listener: socket.socket) -> None:
        """No new query reaches this server: a script now finds no socket and runs its query itself."""
        listener.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def _accept(self, listener: socket.socket, own: list[int]) -> None:
        try:
            conn, _address = listener.accept()
        except OSError:
            return
        fds: list[int] = []
        try:
            conn.settimeout(ACCEPT_TIMEOUT_SECONDS)
            request, fds = wire.receive_with_fds(conn, 3)
            why = self._refusal(request, fds)
            if why is not None:
                self._say("warm_query_refused", reason=why)
                wire.send(conn, {"refused": why})
                conn.close()
                return
            assert request is not None
            pid = os.fork()
            if pid == 0:
                inherited = [*own, *(c.fileno() for c in self.children.values() if c is not None)]
                become(request, fds, [conn.fileno(), *inherited])
            self.children[pid] = conn
            self.selector.register(conn, selectors.EVENT_READ, pid)
            self._say("warm_query_forked", level="debug", pid=pid, command=" ".join(request["argv"][:2]))
            wire.send(conn, {"pid": pid})
        except (OSError, ValueError) as error:
            self._say("warm_query_dropped", level="warning", error=str(error))
            if conn not in self.children.values():
                conn.close()
        finally:
            for fd in fds:
                os.close(fd)

    def _refusal(self, request: dict[str, Any] | None, fds: list[int]) -> str | None:
        """Why this server must not run the request (the script then runs it itself), or None."""
        if request is None or len(fds) != 3:
            return "an incomplete request"
        if request.get("identity") != self.identity:
            return "another installation of pbot-watch"
        env = request.get("env")
        if not isinstance(env, dict) or _shaping(env) != _shaping(dict(os.environ)):
            return "other Python or pydantic variables (PYTHONPATH, ...)"
        if not isinstance(request.get("argv"), list) or not isinstance(request.get("cwd"), str):
            return "an incomplete request"
        if code_stamps() != self.stamps:
            self.stopping = True  # the service starts a server with the new code
            return "its code changed on disk"
        return None

    def _from_script(self, conn: socket.socket, pid: int) -> None:
        """A signal to pass on, or the script gone (then the query is stopped)."""
        try:
            message = wire.receive(conn)
        except (OSError, ValueError):
            message = None
        if message is None:
            self.selector.unregister(conn)
            conn.close()
            self.children[pid] = None
            _signal(pid, signal.SIGTERM)
            return
        number = message.get("signal")
        allowed = {int(getattr(signal, name)) for name in wire.FORWARDED_SIGNALS}
        if isinstance(number, int) and number in allowed:
            _signal(pid, number)

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            self.selector.unregister(conn)
            if os.WIFSIGNALED(status):
                end = {"killed": os.WTERMSIG(status)}
            else:
                end = {"exit": os.waitstatus_to_exitcode(status)}
            with contextlib.suppress(OSError):
                wire.send(conn, end)
            conn.close()

    def _stop(self, _number: int, _frame: FrameType | None) -> None:
        self.stopping = True

    def _freeze(self) -> None:
        from pbot_watch.cli import query_process  # noqa: PLC0415 - imported by preload already

        query_process.imported()

    def _say(self, event: str, level: str = "info", **fields: object) -> None:
        """One JSON line on stdout, which the service logs as its own (``service/warm.py``)."""
        if level == "debug" and not self.debug:
            return
        with contextlib.suppress(OSError, ValueError):  # the service is gone: nobody to tell
            sys.stdout.write(json.dumps({"event": event, "level": level, **fields}) + "\n")
            sys.stdout.flush()


def preload() -> None:
    """Import what a query command imports, as a query process does (``cli/query_process``)."""
    from pbot_watch.cli import query_process  # noqa: PLC0415

    query_process.start()
    import click  # noqa: PLC0415

    from pbot_watch.cli import main as group  # noqa: PLC0415

    context = click.Context(group)
    for name in sorted(wire.QUERY_COMMANDS):
        group.get_command(context, name)
    for name in PRELOAD:
        importlib.import_module(name)


def code_stamps() -> dict[str, int]:
    """Each imported module of pbot-watch's file and when it changed: a change means stale code."""
    stamps: dict[str, int] = {}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if name.startswith("pbot_watch") and file:
            try:
                stamps[file] = os.stat(file).st_mtime_ns
            except OSError:
                stamps[file] = -1
    return stamps


def become(request: dict[str, Any], fds: list[int], inherited: list[int]) -> NoReturn:
    """In the forked child: turn into the script's command, run it, exit as it ends."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for name in ("SIGCHLD", "SIGTERM", "SIGHUP"):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd in inherited:
            with contextlib.suppress(OSError):
                os.close(fd)
        for target, fd in zip((0, 1, 2), fds, strict=True):
            os.dup2(fd, target)
            os.close(fd)
        fds.clear()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.umask(int(request.get("umask", 0o022)))
        _callers_priority(request.get("nice"))
        time.tzset()
        with contextlib.suppress(locale.Error):
            locale.setlocale(locale.LC_CTYPE, "")
        _streams(request.get("streams") or [])
        sys.argv = ["pbot-watch", *request["argv"]]
        from pbot_watch.cli import main as group  # noqa: PLC0415

        group.main(args=list(request["argv"]), prog_name="pbot-watch")
        code = 0
    except SystemExit as end:
        code = _exit_code(end.code)
    except KeyboardInterrupt:
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:  # noqa: BLE001 - a command's bug: its traceback, as a process of its own shows
        traceback.print_exc()
        code = 1
    if not _flush() and code == 0:
        code = 120  # as Python exits when it cannot flush stdout at the end
    os._exit(code)


def _callers_priority(nice: object) -> None:
    """Run at the caller's priority, as far as this system lets a process raise its own.

    The installed service runs at background priority (``Nice=10``, ``SCHED_BATCH``), and its
    server with it; a query is someone waiting. Leaving the batch policy is always allowed, a
    lower nice value only where ``RLIMIT_NICE`` permits (else the query keeps the server's).
    """
    policy = getattr(os, "sched_getscheduler", None)
    if policy is not None:
        with contextlib.suppress(OSError):
            if policy(0) in (getattr(os, "SCHED_BATCH", -1), getattr(os, "SCHED_IDLE", -1)):
                os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    if isinstance(nice, int):
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, 0, nice)


def _streams(streams: list[Any]) -> None:
    """Text streams over descriptors 0-2 with the script's encodings, buffered as Python's are."""

    def stream(fd: int, index: int) -> io.TextIOWrapper:
        encoding, errors = (streams[index] if index < len(streams) else None) or (None, None)
        raw = io.FileIO(fd, "r" if fd == 0 else "w", closefd=False)
        buffered = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
        return io.TextIOWrapper(
            buffered, encoding, errors, line_buffering=fd == 2 or (fd == 1 and os.isatty(1))
        )

    for index, name in enumerate(("stdin", "stdout", "stderr")):
        opened = stream(index, index)
        setattr(sys, name, opened)
        setattr(sys, f"__{name}__", opened)  # what a library falls back to when sys.stdout is replaced


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    sys.stderr.write(f"{code}\n")  # as Python prints a SystemExit that holds no number
    return 1


def _flush() -> bool:
    ok = True
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            ok = False
    return ok


def _shaping(env: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in env.items() if k.startswith(SHAPING_ENV)}


def _signal(pid: int, number: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, number)


def _bind(path: Path) -> socket.socket:
    """Listen at ``path``, taking it over from a server that is gone (the service holds its lock)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o077)  # the socket is the user's alone, as the state folder is
    try:
        listener.bind(os.fsencode(path))
    finally:
        os.umask(previous)
    listener.listen(64)
    listener.setblocking(False)
    return listener


def _keep_standard_streams_open() -> None:
    """Descriptors 0-2 open (on /dev/null if need be), so a received descriptor never lands there."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def _wake_only(_number: int, _frame: FrameType | None) -> None:
    """SIGCHLD: the wake-up descriptor already woke the loop, which reaps."""


def _drain(fd: int) -> None:
    with contextlib.suppress(BlockingIOError):
        while os.read(fd, 4096):
            pass


if __name__ == "__main__":
    main()
