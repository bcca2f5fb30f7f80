"""One error root: every expected error derives from it, and each edge maps it in one place.

A typo in ``config.toml`` is the same mistake whichever command meets it, so it ends every
command the same way: one stderr line naming the key, exit 2 (it was 1 from seven commands and
2 from five). The full disk is the other thing a person's machine does to any command: one line.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import subprocess
from pathlib import Path

import pytest

import pbot_watch
from pbot_watch.errors import (
    EXIT_FAILURE,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    MESSAGE_CHARS,
    PbotWatchError,
    bounded,
    exit_code,
    failure_kind,
)
from pbot_watch.service.status import ErrorInfo, Status
from tests.pi_bridge.child import ServeChild
from tests.service.test_odd_files import fill, small_state_disk  # noqa: F401 - the fixture, used by name
from tests.support.cli import invoke, run, scratch_user
from tests.support.pi_sessions import PiSession


def package_exceptions() -> list[type[BaseException]]:
    """Every exception class the package defines, in every module its installed extras can import."""
    found: dict[str, type[BaseException]] = {}
    for module in pkgutil.walk_packages(pbot_watch.__path__, "pbot_watch."):
        if module.name.startswith("pbot_watch.pi_package"):
            continue
        try:
            loaded = importlib.import_module(module.name)
        except ModuleNotFoundError as missing:  # an optional dependency (psycopg for the team index)
            if (missing.name or "pbot_watch").startswith("pbot_watch"):
                raise
            continue
        for _, value in inspect.getmembers(loaded, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == module.name:
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return list(found.values())


class TestOneRoot:
    def test_every_exception_derives_from_the_root(self) -> None:
        """No exception class of the package stands outside ``PbotWatchError``."""
        classes = package_exceptions()
        assert len(classes) >= 24
        assert [] == [c.__qualname__ for c in classes if not issubclass(c, PbotWatchError)]

    def test_kinds(self) -> None:
        """The three failure kinds and the exit codes come from the class, in one place each."""
        from pbot_watch.config import SettingsError
        from pbot_watch.search.errors import BadCursor, NotReady, UnknownHandle, UnknownNode
        from pbot_watch.sources import NotRegularFile

        assert [EXIT_USAGE, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_NOT_FOUND, EXIT_FAILURE, EXIT_FAILURE] == [
            exit_code(e)
            for e in (
                SettingsError("x"),
                BadCursor("x"),
                UnknownNode("x"),
                UnknownHandle("x"),
                NotReady(),
                KeyError(),
            )
        ]
        assert ["arguments", "arguments", "unavailable", "unavailable", "unavailable", "internal"] == [
            failure_kind(e)
            for e in (SettingsError("x"), UnknownNode("x"), NotReady(), NotRegularFile(22, "x"), OSError(28, "full"), KeyError())
        ]  # fmt: skip


# ---- a bad setting, from every command -------------------------------------------------------------
IN_PROCESS = [
    ("index",),
    ("config",),
    ("summarize",),
    ("search", "x"),
    ("read", "x"),
    ("memory", "search", "x"),
    ("recall", "m1.x"),
    ("cues", "--session-file", "x.jsonl"),
    ("secrets", "scan"),
    ("reindex",),
    ("service", "install", "--print"),
]
# These start long-running work (or re-execute themselves) and are run as real processes.
AS_PROCESSES = [("run",), ("mcp",), ("pi", "serve")]


def typo(home: Path) -> None:
    (home / "config" / "pbot-watch").mkdir(parents=True, exist_ok=True)
    (home / "config" / "pbot-watch" / "config.toml").write_text("modle = 'gpt'\n")


class TestBadSetting:
    """``modle = ...`` in config.toml: exit 2 and the same one line, whatever the command."""

    @pytest.mark.parametrize("args", IN_PROCESS, ids=" ".join)
    def test_in_process(self, isolated_home: Path, args: tuple[str, ...]) -> None:
        typo(isolated_home)
        done = invoke(*args)
        assert (EXIT_USAGE, "") == (done.returncode, done.stdout)
        assert done.stderr.startswith("pbot-watch: invalid settings: modle (")
        assert 1 == len(done.stderr.splitlines())

    @pytest.mark.slow
    @pytest.mark.timeout(120)
    @pytest.mark.parametrize("args", AS_PROCESSES, ids=" ".join)
    def test_as_processes(self, tmp_path: Path, args: tuple[str, ...]) -> None:
        home = tmp_path / "home"
        typo(home)
        done = subprocess.run(
            [*run_argv(), *args], capture_output=True, text=True, env=scratch_user(home),
            stdin=subprocess.DEVNULL, check=False, timeout=60,
        )  # fmt: skip
        assert (EXIT_USAGE, "") == (done.returncode, done.stdout)
        assert done.stderr.startswith("pbot-watch: invalid settings: modle (")
        assert 1 == len(done.stderr.splitlines())


def run_argv() -> list[str]:
    from tests.support.cli import pbot_watch_executable

    return [pbot_watch_executable()]


# ---- a full disk --------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.timeout(120)
class TestFullDisk:
    def test_memory_search_says_one_line(self, isolated_home: Path, small_state_disk: Path) -> None:  # noqa: F811
        """The index's folder full: one line naming it, exit 1, not a 51-line traceback."""
        pi = PiSession("01a228f5-0000-7000-8000-00000000e001", str(isolated_home))
        pi.turn("findme " + "word " * 40_000, "answer " * 40_000)
        pi.write(isolated_home / ".pi" / "agent" / "sessions" / "--w--" / "s.jsonl")
        filler = fill(small_state_disk)
        try:
            done = run("memory", "search", "findme", env=scratch_user(isolated_home))
        finally:
            filler.unlink()
        assert EXIT_FAILURE == done.returncode, done.stderr
        assert done.stderr.startswith("pbot-watch: cannot go on: database or disk is full")
        assert 1 == len(done.stderr.splitlines()), done.stderr


# ---- bounded texts ---------------------------------------------------------------------------------
class TestBoundedTexts:
    def test_status_error_texts(self) -> None:
        """An error text holding a 2 MB answer is kept at MESSAGE_CHARS in status, saying what was cut."""
        answer = "x" * 2_000_000
        status = Status(
            running=True, pid=1, version="0", started="t", uptime_seconds=1, heartbeat="t", heartbeat_epoch=1,
            errors=[ErrorInfo(time="t", message=f"summary failed: {answer}")],
            summaries={"last_error": answer}, state_error=answer, warnings=[answer],
        )  # fmt: skip
        assert len(status.model_dump_json()) < 6 * MESSAGE_CHARS
        assert status.errors[0].message.endswith(f"… ({2_000_016 - MESSAGE_CHARS} more characters)")
        assert bounded("short") == "short"

    @pytest.mark.slow
    @pytest.mark.timeout(120)
    def test_logs_keep_no_whole_argument(self, isolated_home: Path) -> None:
        """A 3 MB id the model sends: answered, and no log line of ``pi serve`` holds it whole."""
        huge = "n" * 3_000_000
        with ServeChild() as child:
            reply = child.ask("tool", {"name": "history_read", "arguments": {"id": huge}})
            assert "arguments" == reply["result"]["failure"], reply
            assert 0 == child.close()
        lines = bytes(child.stderr).decode().splitlines()
        refused = [json.loads(line) for line in lines if "tool_refused" in line]
        assert refused
        assert max(len(line) for line in lines) < 3 * MESSAGE_CHARS
