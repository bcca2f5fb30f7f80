"""The ``pbot-watch`` script: a query goes to the service's warm server when one answers.

Everything else, and a query no server takes, runs in this process as it always did
(``pbot_watch.cli.run``). Before that decision this module imports only the standard library's
socket and the state folder's resolution (``config_paths``), so a command that runs here pays
a millisecond or two for having asked.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
from types import FrameType

from pbot_watch.prefork import wire

STOPPED = "pbot-watch: the query server stopped before the query ended; run it again"


def main() -> None:
    """The console script and ``python -m pbot_watch``."""
    argv = sys.argv[1:]
    if argv and argv[0] in wire.QUERY_COMMANDS and os.environ.get(wire.DISABLE_ENV) != "0":
        code = forward(argv)
        if code is not None:
            raise SystemExit(code)
    from pbot_watch.cli import run  # noqa: PLC0415 - only a command this process runs imports click

    run()


def forward(argv: list[str]) -> int | None:
    """Run ``pbot-watch ARGV`` in the warm server; its exit code, or None to run it here instead.

    None is returned only before the child exists, so nothing was written to the streams yet.
    """
    sock = _connect()
    if sock is None:
        return None
    with sock:
        try:
            request = _request(argv)
        except OSError:  # a closed standard stream, or a working folder that is gone
            return None
        try:
            socket.send_fds(sock, [wire.encode(request)], [0, 1, 2])
            answer = wire.receive(sock)
        except (OSError, ValueError):
            return None
        if answer is None or "pid" not in answer:
            return None  # refused (another installation, changed code) or gone: run it here
        return _wait(sock)


def _connect() -> socket.socket | None:
    from pbot_watch.config_paths import state_dir_unvalidated  # noqa: PLC0415 - after the command check

    path = wire.socket_path(state_dir_unvalidated())
    if path is None:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(os.fsencode(path))
    except OSError:  # no service, or one that has stopped: the socket is missing or refuses
        sock.close()
        return None
    return sock


def _request(argv: list[str]) -> dict[str, object]:
    umask = os.umask(0o077)
    os.umask(umask)
    for fd in (0, 1, 2):
        os.fstat(fd)  # each must be open: the child is given all three
    return {
        "identity": wire.identity(),
        "argv": argv,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "umask": umask,
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "streams": [
            [getattr(stream, "encoding", None), getattr(stream, "errors", None)]
            for stream in (sys.stdin, sys.stdout, sys.stderr)
        ],
    }


def _wait(sock: socket.socket) -> int:
    """Pass on the signals meant for the query until the server says how its child ended."""

    def pass_on(number: int, _frame: FrameType | None) -> None:
        with contextlib.suppress(OSError):  # the server is gone: the end of the stream says so
            wire.send(sock, {"signal": number})

    for name in wire.FORWARDED_SIGNALS:
        signal.signal(getattr(signal, name), pass_on)
    try:
        end = wire.receive(sock)
    except (OSError, ValueError):
        end = None
    if end is not None and isinstance(end.get("exit"), int):
        return int(end["exit"])
    if end is not None and isinstance(end.get("killed"), int):
        _die_of(int(end["killed"]))
    sys.stderr.write(STOPPED + "\n")
    return 1


def _die_of(number: int) -> None:
    """End as the child did: by the same signal (a shell sees 128 + its number), else with that code."""
    try:
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    except (OSError, ValueError):
        pass
    raise SystemExit(128 + number)
