"""Logging setup: JSON lines off a terminal, console lines on one, CJK kept readable."""

from __future__ import annotations

import io
import json
import logging
import os
import pty
import select
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest
import structlog
from structlog.testing import capture_logs

from pbot_watch.config import Settings
from pbot_watch.log import NOISY_LIBRARIES, configure_logging, get_logger, resolve_format

# A small program that logs the way the service does; run in a real subprocess so stdout is a
# real pipe (or a real terminal), as under journald or in a shell.
PROGRAM = textwrap.dedent(
    """
    import logging, sys
    from pbot_watch.log import configure_logging, get_logger
    fmt = configure_logging(log_format=sys.argv[1] if len(sys.argv) > 1 else None)
    log = get_logger("pbot_watch.indexer", session="会话-一")
    log.info("记录已写入", path="/工作区/.pi/pbot/history/a.json", bytes=42)
    try:
        raise ValueError("坏的行")
    except ValueError:
        log.exception("解析失败")
    logging.getLogger("watchdog.observers").warning("回退到轮询 %s", "inotify")
    log.debug("not shown at info")
    """
)


def run_program(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=True,
        timeout=60,
    )


@pytest.fixture(autouse=True)
def reset_structlog() -> Iterator[None]:
    """Each test starts and ends with structlog's defaults and the root logger as it was."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    libraries = {name: logging.getLogger(name).level for name in NOISY_LIBRARIES}
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    for name, old in libraries.items():
        logging.getLogger(name).setLevel(old)


class TestJsonOutput:
    def test_piped_stdout_gets_json_lines_with_readable_cjk(self) -> None:
        """Off a terminal every event is one JSON line and Chinese text is written as is, never \\u-escaped."""
        result = run_program()
        lines = result.stdout.splitlines()
        assert len(lines) == 3  # info, exception, stdlib warning; debug filtered
        assert "\\u" not in result.stdout
        assert "记录已写入" in result.stdout
        first = json.loads(lines[0])
        assert first["event"] == "记录已写入"
        assert first["session"] == "会话-一"
        assert first["path"] == "/工作区/.pi/pbot/history/a.json"
        assert first["level"] == "info"
        assert first["logger"] == "pbot_watch.indexer"

    def test_timestamps_are_iso_utc(self) -> None:
        """Timestamps are ISO 8601 in UTC."""
        first = json.loads(run_program().stdout.splitlines()[0])
        assert first["timestamp"].endswith("Z")
        assert "T" in first["timestamp"]

    def test_exceptions_are_dicts_without_locals(self) -> None:
        """Tracebacks are structured (dict_tracebacks) and carry no local variables, which may hold secrets."""
        event = json.loads(run_program().stdout.splitlines()[1])
        assert event["event"] == "解析失败"
        assert event["level"] == "error"
        (exc,) = event["exception"]
        assert exc["exc_type"] == "ValueError"
        assert exc["exc_value"] == "坏的行"
        assert exc["frames"]
        assert all("locals" not in frame for frame in exc["frames"])

    def test_stdlib_records_share_the_format(self) -> None:
        """Library records (standard logging) come out as the same JSON lines."""
        event = json.loads(run_program().stdout.splitlines()[2])
        assert event == {
            "event": "回退到轮询 inotify",
            "logger": "watchdog.observers",
            "level": "warning",
            "timestamp": event["timestamp"],
        }

    def test_explicit_console_off_a_terminal(self) -> None:
        """``console`` forces readable lines even into a pipe, without colour codes."""
        result = run_program("console")
        assert "记录已写入" in result.stdout
        assert "\x1b[" not in result.stdout
        assert not result.stdout.lstrip().startswith("{")
        assert "session=会话-一" in result.stdout


class TestTerminal:
    def test_auto_on_a_terminal_is_console(self) -> None:
        """On a real terminal ``auto`` gives console lines, not JSON."""
        leader, follower = pty.openpty()
        try:
            proc = subprocess.Popen(  # our own interpreter
                [sys.executable, "-c", PROGRAM], stdout=follower, stderr=follower, stdin=subprocess.DEVNULL
            )
            os.close(follower)
            output = b""
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                ready, _, _ = select.select([leader], [], [], 0.5)
                if ready:
                    try:
                        chunk = os.read(leader, 65536)
                    except OSError:  # the terminal closes when the child exits
                        break
                    if not chunk:
                        break
                    output += chunk
                elif proc.poll() is not None:
                    break
            proc.wait(timeout=30)
        finally:
            os.close(leader)
        text = output.decode("utf-8", "replace")
        assert proc.returncode == 0, text
        assert "记录已写入" in text
        assert '"event"' not in text
        assert "\x1b[" in text  # colours on a terminal


class TestConfigure:
    def test_auto_resolves_by_stream(self) -> None:
        """``auto`` is JSON for anything that is not a terminal."""
        assert resolve_format("auto", io.StringIO()) == "json"
        assert resolve_format("console", io.StringIO()) == "console"

    def test_settings_choose_format_and_level(self) -> None:
        """Settings supply the format and level when no explicit ones are given."""
        out = io.StringIO()
        fmt = configure_logging(Settings(log_format="json", log_level="warning"), stream=out)
        log = get_logger("t")
        log.info("dropped")
        log.warning("kept", n=1)
        assert fmt == "json"
        (line,) = out.getvalue().splitlines()
        assert json.loads(line)["event"] == "kept"

    def test_explicit_arguments_win_over_settings(self) -> None:
        """``log_format``/``level`` arguments override the settings (the CLI's --log-* flags)."""
        out = io.StringIO()
        assert configure_logging(Settings(log_format="json"), log_format="console", stream=out) == "console"

    def test_level_filters_events(self) -> None:
        """Events under the configured level never reach the processors."""
        configure_logging(log_format="json", level="warning", stream=io.StringIO())
        log = get_logger("pbot_watch.test")
        with capture_logs() as captured:
            log.info("too quiet")
            log.warning("索引失败", session="会话")
        assert captured == [{"event": "索引失败", "session": "会话", "log_level": "warning"}]

    def test_loggers_follow_reconfiguration(self) -> None:
        """A logger made before configure_logging() uses the configuration in force when it logs."""
        log = get_logger("early", session="s")
        first, second = io.StringIO(), io.StringIO()
        configure_logging(log_format="json", stream=first)
        configure_logging(log_format="json", level="debug", stream=second)
        log.debug("later")
        assert first.getvalue() == ""
        assert json.loads(second.getvalue())["event"] == "later"

    def test_bound_context_is_kept(self) -> None:
        """Values bound on the logger appear on every event."""
        configure_logging(log_format="json", stream=io.StringIO())
        with capture_logs() as captured:
            get_logger("t", session="abc").bind(path="/p").info("indexed", records=2)
        assert captured == [
            {"event": "indexed", "session": "abc", "path": "/p", "records": 2, "log_level": "info"}
        ]

    def test_stream_is_configurable_for_stdio_protocols(self) -> None:
        """The MCP server logs to stderr: nothing reaches a stream that was not chosen."""
        out = io.StringIO()
        configure_logging(log_format="json", stream=out)
        get_logger("mcp").info("started")
        assert json.loads(out.getvalue())["event"] == "started"
