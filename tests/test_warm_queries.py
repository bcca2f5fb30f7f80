"""Warm queries: the console script hands a query to the warm server, which forks it (``pbot_watch/prefork``).

Every test runs the real script and the real server in processes of their own, and compares a
forked query with the same command run in the script's own process (``PBOT_WATCH_WARM=0``):
the same exit code, stdout and stderr, byte for byte.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.cli import pbot_watch_executable, run, scratch_user
from tests.support.paths import FIXTURES
from tests.support.service import ServiceProcess

DEADLINE = 30.0


@pytest.fixture
def user(tmp_path: Path) -> dict[str, str]:
    """A user with Pi's real v3 sessions and their records, the folders named in a config file."""
    env = scratch_user(tmp_path / "home")
    env["PBOT_WATCH_STATE_DIR"] = str(tmp_path / "state")
    shutil.copytree(FIXTURES / "real-v3", tmp_path / "sessions" / "v3")
    config = tmp_path / "home" / "config" / "pbot-watch" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'sessions = ["{tmp_path / "sessions"}"]\narchive = "{tmp_path / "archive"}"\n')
    assert 0 == run("index", env=env).returncode
    return env


@contextmanager
def warm_server(env: dict[str, str], **extra: str) -> Iterator[Path]:
    """The server as the service starts it, on the user's state folder; yields its log."""
    state = Path(env["PBOT_WATCH_STATE_DIR"])
    state.mkdir(parents=True, exist_ok=True)
    socket = state / "query.sock"
    log = state.parent / "server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-P", "-m", "pbot_watch.prefork.server", str(socket), "--log-level", "debug"],
            env={**env, **extra},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        until(lambda: "warm_server_serving" in log.read_text(), "the server to listen")
        yield log
    finally:
        server.send_signal(signal.SIGTERM)
        assert 0 == server.wait(DEADLINE)
    assert not socket.exists()


def until(check: object, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def both(*args: str, env: dict[str, str], cwd: Path | None = None) -> tuple[object, object]:
    here = run(*args, env={**env, "PBOT_WATCH_WARM": "0"}, cwd=cwd)
    warm = run(*args, env=env, cwd=cwd)
    return (here.returncode, here.stdout, here.stderr), (warm.returncode, warm.stdout, warm.stderr)


def forks(log: Path) -> int:
    return log.read_text().count('"warm_query_forked"')


class TestTheSameAnswer:
    def test_every_query_command_answers_as_it_does_in_a_process_of_its_own(
        self, user: dict[str, str]
    ) -> None:
        """Results, pages, human output, errors and help: exit code, stdout and stderr equal."""
        found = json.loads(run("search", "notes", "--json", env=user).stdout)
        node = found["matches"][0]["id"]
        memory = json.loads(run("memory", "search", "notes", "--json", env=user).stdout)
        handle = memory["hits"][0]["handle"]
        commands = [
            ("search", "notes", "--json"),
            ("search", "notes"),
            ("search",),
            ("search", "notes", "--match", "terms", "--json"),
            ("read", node, "--json"),
            ("read", node),
            ("memory", "search", "notes", "--json", "--limit", "2"),
            ("memory", "search", "notes"),
            ("memory", "search", "notes the", "--match", "terms", "--json"),
            ("recall", handle, "--json"),
            ("recall", handle),
            ("read", "no-such-node"),  # exit 4, one line on stderr
            ("memory", "search", "notes", "--limit", "0"),  # exit 2: a bad query
            ("memory", "search", "--help"),
            ("search", "--no-such-option"),  # click's usage error
        ]
        with warm_server(user) as log:
            for args in commands:
                here, warm = both(*args, env=user)
                assert here == warm, args
            assert len(commands) == forks(log)

    def test_the_callers_folder_and_environment_are_the_querys(
        self, user: dict[str, str], tmp_path: Path
    ) -> None:
        """Relative paths are the caller's; the labels follow the caller's locale, not the server's."""
        relative = {**user, "XDG_CONFIG_HOME": str(tmp_path / "no-config")}
        args = ("search", "notes", "--sessions", "sessions", "--archive", "archive")
        with warm_server(user, LANG="C.UTF-8") as log:
            chinese = {**relative, "LANG": "zh_CN.UTF-8"}
            here, warm = both(*args, env=chinese, cwd=tmp_path)
            assert here == warm
            assert "用户：" in str(warm)
            english = {**relative, "LANG": "en_US.UTF-8"}
            here, warm = both(*args, env=english, cwd=tmp_path)
            assert here == warm
            assert "User:" in str(warm)
            assert 2 == forks(log)

    def test_a_server_that_cannot_run_it_as_here_leaves_it_to_the_script(self, user: dict[str, str]) -> None:
        """Other import-time variables than the server's: refused before anything is written, run here."""
        with warm_server(user, PYDANTIC_DISABLE_PLUGINS="__all__") as log:
            here, warm = both("memory", "search", "notes", "--json", env=user)
            assert here == warm
            assert 0 == forks(log)
            refused = [
                json.loads(line) for line in log.read_text().splitlines() if "warm_query_refused" in line
            ]
            assert ["other Python or pydantic variables (PYTHONPATH, ...)"] == [r["reason"] for r in refused]

    def test_no_server_runs_it_here(self, user: dict[str, str]) -> None:
        here, warm = both("search", "notes", "--json", env=user)
        assert here == warm
        assert 0 == here[0]  # type: ignore[index]

    def test_the_switch_is_no_unknown_setting(self, user: dict[str, str]) -> None:
        shown = run("config", env={**user, "PBOT_WATCH_WARM": "0"})
        assert 0 == shown.returncode, shown.stderr
        assert "PBOT_WATCH_WARM" not in shown.stderr


class TestSignals:
    def test_sigterm_reaches_the_query_and_the_script_ends_as_it_did(self, user: dict[str, str]) -> None:
        """A query waiting on a locked index is stopped by the script's SIGTERM, and the script dies of it."""
        with held_index(user), warm_server(user) as log:
            script, _child = waiting_query(user, log, stderr=subprocess.PIPE)
            time.sleep(0.3)  # it is waiting on the lock (10 s) now
            script.send_signal(signal.SIGTERM)
            _out, err = script.communicate(timeout=DEADLINE)
            assert -signal.SIGTERM == script.returncode, err

    def test_a_killed_script_stops_its_query(self, user: dict[str, str]) -> None:
        """The script killed outright: the server sees its socket close and ends the query."""
        with held_index(user), warm_server(user) as log:
            script, child = waiting_query(user, log)
            script.kill()
            script.wait(DEADLINE)
            until(lambda: not _alive(child), "the orphaned query to end")

    @pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads a process's nice value in /proc")
    def test_the_query_runs_at_the_callers_priority(self, user: dict[str, str]) -> None:
        """A caller at nice 7 has its query run at nice 7, though the server runs at 0."""
        with held_index(user), warm_server(user) as log:
            script, child = waiting_query(user, log, "nice", "-n", "7")
            try:
                until(lambda: _nice(child) == 7, "the query to take the caller's priority")
            finally:
                script.kill()
                script.wait(DEADLINE)


@contextmanager
def held_index(user: dict[str, str]) -> Iterator[None]:
    """``search.db`` built, then locked by another writer: a query waits on it (10 s at most)."""
    assert 0 == run("memory", "search", "notes", "--json", env=user).returncode
    holder = sqlite3.connect(Path(user["PBOT_WATCH_STATE_DIR"]) / "search.db", isolation_level=None)
    try:
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("CREATE TABLE held(x)")  # a write: the lock is taken now
        yield
    finally:
        holder.rollback()
        holder.close()


def waiting_query(
    user: dict[str, str], log: Path, *prefix: str, stderr: int = subprocess.DEVNULL
) -> tuple[subprocess.Popen[bytes], int]:
    """A memory search through the script (after ``prefix``, such as ``nice``), once forked: the script and its query's pid."""
    script = subprocess.Popen(
        [*prefix, pbot_watch_executable(), "memory", "search", "notes", "--json"],
        env=user,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )
    until(lambda: forks(log) == 1, "the query to be forked")
    return script, int(json.loads(_forked_line(log))["pid"])


def _forked_line(log: Path) -> str:
    return next(line for line in log.read_text().splitlines() if "warm_query_forked" in line)


def _nice(pid: int) -> int | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[16])  # field 19 of stat(5); the list starts at field 3


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers: ask the process table whether it has been reaped or is exiting.
    # It may be reaped between the two questions: its stat then is gone (open fails), or goes
    # while it is read (the read fails with ESRCH), and so is it.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


PRELOADED_THEN_RUN = """
import io, json, sys
from contextlib import redirect_stderr, redirect_stdout
from pbot_watch.prefork.server import preload
preload()
before = set(sys.modules)
from pbot_watch.cli import main
for args in json.loads(sys.argv[1]):
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        try:
            main.main(args=args, prog_name="pbot-watch")
        except SystemExit:
            pass
print(json.dumps(sorted(m for m in set(sys.modules) - before if m.startswith("pbot_watch"))))
"""


def test_the_server_has_imported_what_the_queries_import(user: dict[str, str]) -> None:
    """Nothing of pbot-watch is left for a forked query to import: ``PRELOAD`` is complete."""
    node = json.loads(run("search", "notes", "--json", env=user).stdout)["matches"][0]["id"]
    handle = json.loads(run("memory", "search", "notes", "--json", env=user).stdout)["hits"][0]["handle"]
    commands = [
        ["search", "notes", "--json"],
        ["search", "notes"],
        ["search", "notes", "--match", "terms"],
        ["search"],
        ["read", node, "--json"],
        ["read", node],
        ["memory", "search", "notes", "--json"],
        ["memory", "search", "notes"],
        ["memory", "search", "notes the", "--match", "terms"],
        ["recall", handle, "--json"],
        ["recall", handle],
        ["read", "no-such-node"],
    ]
    done = subprocess.run(
        [sys.executable, "-P", "-c", PRELOADED_THEN_RUN, json.dumps(commands)],
        env=user,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert 0 == done.returncode, done.stderr
    assert [] == json.loads(done.stdout.splitlines()[-1])


@pytest.mark.slow
class TestBesideTheService:
    def test_the_service_runs_a_server_that_ends_with_it(self, user: dict[str, str], tmp_path: Path) -> None:
        """``run`` starts the server (status says so), queries go to it, and a service killed
        outright takes its server along: the socket is gone and queries run in the script again."""
        state = Path(user["PBOT_WATCH_STATE_DIR"])
        service = ServiceProcess(
            [tmp_path / "sessions"], tmp_path / "archive", "--log-level", "debug", state_dir=state, env=user
        )
        with service.start():
            status = service.wait_status(
                lambda s: (
                    bool((s.extensions.get("warm_queries") or {}).get("running"))
                    and s.catch_up is not None
                    and s.catch_up.finished is not None
                ),
                "the warm server, and raw memory caught up",
            )
            server = int(status.extensions["warm_queries"]["pid"])
            until((state / "query.sock").exists, "the server's socket")
            here, warm = both("memory", "search", "notes", "--json", env=user)
            assert here == warm
            until(lambda: forks(service.log) == 1, "the service to log the query forked")  # on its tick
            service.kill()
            until(lambda: not _alive(server), "the server to end with the service")
            assert not (state / "query.sock").exists()
            here, warm = both("memory", "search", "notes", "--json", env=user)
            assert here == warm
            assert 1 == forks(service.log)
