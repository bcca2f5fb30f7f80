"""A real PostgreSQL 15 for the team index tests, started in a temporary folder.

``initdb`` and ``postgres`` refuse to run as root, so when the tests run as root the server runs
as the unprivileged ``postgres`` user (``runuser -u postgres``) in a folder it owns. It listens
on 127.0.0.1 on a free port and on a Unix socket in that folder, trusts local connections (the
folder is private to the test run) and is stopped at the end of the session. ``stop`` and
``start`` let a test take the server away during a push, and ``cut``/``restore`` close the port
(a network cut) while the data stays.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

SERVER_USER = "postgres"


class Unavailable(Exception):
    """PostgreSQL cannot be started here (not installed, no unprivileged user to run it)."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class PostgresServer:
    """One cluster; ``dsn`` reaches its ``postgres`` database over TCP on 127.0.0.1."""

    root: Path
    port: int
    _as_user: list[str] = field(default_factory=list)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def dsn(self) -> str:
        return f"postgresql://{SERVER_USER}@127.0.0.1:{self.port}/postgres"

    def dsn_for(self, database: str) -> str:
        return f"postgresql://{SERVER_USER}@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self._as_user, *args], capture_output=True, text=True, check=check, timeout=120
        )

    @classmethod
    def create(cls) -> PostgresServer:
        for tool in ("initdb", "pg_ctl", "postgres"):
            if shutil.which(tool) is None:
                raise Unavailable(f"{tool} is not on PATH")
        as_user: list[str] = []
        root = Path(tempfile.mkdtemp(prefix="pbot-pg-"))
        if os.geteuid() == 0:
            if shutil.which("runuser") is None:
                raise Unavailable("running as root and runuser is missing")
            try:
                import pwd

                entry = pwd.getpwnam(SERVER_USER)
            except KeyError as error:
                raise Unavailable(f"running as root and there is no {SERVER_USER} user") from error
            os.chown(root, entry.pw_uid, entry.pw_gid)
            as_user = ["runuser", "-u", SERVER_USER, "--"]
        server = cls(root, free_port(), as_user)
        locale = ["--locale=C.UTF-8"] if _has_c_utf8() else ["--locale=C"]
        done = server._run(
            "initdb",
            "-D",
            str(server.data),
            "-U",
            SERVER_USER,
            "-A",
            "trust",
            "-E",
            "UTF8",
            *locale,
            check=False,
        )
        if done.returncode != 0:
            raise Unavailable(f"initdb failed: {done.stderr.strip()[-400:]}")
        server.start()
        return server

    def start(self) -> None:
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.root} "
            "-c fsync=off -c max_connections=200 -c shared_buffers=128MB"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-o", options, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def restart(self) -> None:
        self.stop()
        self.start()

    def running(self) -> bool:
        return self._run("pg_ctl", "-D", str(self.data), "status", check=False).returncode == 0

    def create_database(self, name: str) -> str:
        """A fresh database on this server; its DSN."""
        self._psql("postgres", f'CREATE DATABASE "{name}"')
        return self.dsn_for(name)

    def _psql(self, database: str, sql: str) -> str:
        done = self._run(
            "psql",
            "-X",
            "-q",
            "-A",
            "-t",
            "-h",
            str(self.root),
            "-p",
            str(self.port),
            "-U",
            SERVER_USER,
            "-d",
            database,
            "-c",
            sql,
        )
        return done.stdout

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def _has_c_utf8() -> bool:
    """C.UTF-8 classifies CJK characters as letters, so pg_trgm makes trigrams of them."""
    try:
        listed = subprocess.run(["locale", "-a"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return False
    return any(name.lower().replace("-", "") == "c.utf8" for name in listed.split())


def wait_until(predicate: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(predicate) and predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


class PortProxy:
    """A TCP forwarder on 127.0.0.1 in front of the server: ``cut`` closes its port and drops every
    connection through it (a network cut; the server itself runs on), ``restore`` opens it again.
    """

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._links: list[socket.socket] = []
        self._lock = threading.Lock()
        self.restore()

    @property
    def dsn(self) -> str:
        return f"postgresql://{SERVER_USER}@127.0.0.1:{self.port}"

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            links, self._links = self._links, []
        if listener is not None:
            listener.close()
        for link in links:
            with contextlib.suppress(OSError):
                link.shutdown(socket.SHUT_RDWR)
            link.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    upstream.close()
                    return
                self._links += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)
