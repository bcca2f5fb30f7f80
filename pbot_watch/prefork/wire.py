"""What the ``pbot-watch`` script and the warm query server share: where the socket is, the messages.

Standard library only, and little of it: the script imports this before it knows whether it
will run the command itself, so every millisecond here is paid by every query.

A conversation over the socket (``SOCK_STREAM``), each message 4 bytes of length then JSON:

    script -> server  the request (``Request``), with the script's stdin, stdout and stderr
                      as ancillary data (``SCM_RIGHTS``)
    server -> script  {"refused": why} (the script then runs the command itself: nothing was
                      written yet) or {"pid": child}
    script -> server  {"signal": n} for each SIGINT, SIGTERM or SIGHUP the script receives
    server -> script  {"exit": code} or {"killed": signal} once the child has ended
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
from pathlib import Path
from typing import Any

QUERY_COMMANDS = frozenset({"search", "read", "memory", "recall"})
"""The commands a script or an agent runs per query: their process starts as ``cli/query_process``
says, and the warm server runs them (each reads the index and writes nothing a query must not)."""

SOCKET_NAME = "query.sock"
DISABLE_ENV = "PBOT_WATCH_WARM"
"""``PBOT_WATCH_WARM=0``: the script runs every command in itself, even with a server there."""

FORWARDED_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")
MAX_MESSAGE = 16 << 20
"""A request carries the caller's environment; 16 MB is far beyond any real one."""
MAX_SOCKET_PATH = 100
"""``sun_path`` holds 104 bytes on macOS and 108 on Linux, with its terminating NUL."""
_LENGTH = struct.Struct("!I")


def socket_path(state_dir: Path) -> Path | None:
    """The server's socket in the service's state folder, or None where its path is too long."""
    path = state_dir / SOCKET_NAME
    return path if len(os.fsencode(path)) <= MAX_SOCKET_PATH else None


def identity() -> dict[str, str]:
    """What must be equal on both sides for a forked query to be the one this script would run.

    The same package (its folder: another checkout or venv is another installation), version
    and interpreter. The server also refuses once any of its modules changed on disk.
    """
    import pbot_watch  # noqa: PLC0415 - the package's __init__ holds only its version

    return {
        "package": os.path.dirname(os.path.abspath(pbot_watch.__file__)),
        "version": pbot_watch.__version__,
        "prefix": sys.prefix,
        "python": sys.version,
    }


def encode(message: dict[str, Any]) -> bytes:
    # ASCII JSON: a lone surrogate (an undecodable byte of a path or variable, as Python holds
    # it) travels as its escape and comes back as the same character.
    data = json.dumps(message, separators=(",", ":")).encode("ascii")
    return _LENGTH.pack(len(data)) + data


def send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(encode(message))


def receive(sock: socket.socket) -> dict[str, Any] | None:
    """The next message, or None at the end of the stream (the other side is gone)."""
    head = _read_exactly(sock, _LENGTH.size)
    if head is None:
        return None
    (length,) = _LENGTH.unpack(head)
    if length > MAX_MESSAGE:
        raise ValueError(f"a message of {length} bytes")
    body = _read_exactly(sock, length)
    if body is None:
        return None
    return _decoded(body)


def receive_with_fds(sock: socket.socket, most: int) -> tuple[dict[str, Any] | None, list[int]]:
    """The request and the descriptors sent with it (the first bytes carry them)."""
    data, fds, _flags, _address = socket.recv_fds(sock, 1 << 16, most)
    if len(data) < _LENGTH.size:
        return None, fds
    (length,) = _LENGTH.unpack(data[: _LENGTH.size])
    if length > MAX_MESSAGE:
        raise ValueError(f"a message of {length} bytes")
    rest = _read_exactly(sock, length - (len(data) - _LENGTH.size))
    if rest is None:
        return None, fds
    return _decoded(data[_LENGTH.size :] + rest), fds


def _decoded(body: bytes) -> dict[str, Any]:
    message = json.loads(body.decode("ascii"))
    if not isinstance(message, dict):
        raise ValueError("a message that is not an object")  # noqa: TRY004 - a bad message, as bad JSON is
    return message


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)
