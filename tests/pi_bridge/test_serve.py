"""``pbot-watch pi serve``: the JSON-lines child of the Pi extension, as a real subprocess."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pbot_watch import __version__
from tests.pi_bridge.child import ServeChild

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def child(isolated_home: Path) -> Iterator[ServeChild]:
    with ServeChild() as running:
        yield running


class TestQuickMethods:
    def test_hello(self, child: ServeChild, isolated_home: Path) -> None:
        """hello names the version, the pid and the service's status file."""
        result = child.ask("hello")["result"]
        assert __version__ == result["version"]
        assert child.proc.pid == result["pid"]
        assert str(isolated_home / "state" / "pbot-watch" / "status.json") == result["statusFile"]

    def test_footer_without_service(self, child: ServeChild) -> None:
        """With no service status file, the footer says the service is not running."""
        assert {"text": "pbot-watch: not running"} == child.ask("footer")["result"]


class TestBadInput:
    def test_not_json(self, child: ServeChild) -> None:
        """A line that is not JSON gets a protocol error without an id, and the child goes on."""
        child.send_raw(b"{not json\n")
        reply = child.reply()
        assert reply["id"] is None
        assert "protocol" == reply["error"]["kind"]
        assert "not a JSON line" in reply["error"]["message"]
        assert "result" in child.ask("footer")

    def test_not_an_object(self, child: ServeChild) -> None:
        """A JSON value that is not a request object is a protocol error."""
        child.send_raw(b"[1, 2]\n")
        reply = child.reply()
        assert (None, "protocol") == (reply["id"], reply["error"]["kind"])

    def test_missing_method_keeps_the_id(self, child: ServeChild) -> None:
        """A request without a method is refused under its own id."""
        child.send_raw(b'{"id": 41, "params": {}}\n')
        reply = child.reply()
        assert 41 == reply["id"]
        assert "protocol" == reply["error"]["kind"]
        assert "method" in reply["error"]["message"]

    def test_unknown_method(self, child: ServeChild) -> None:
        """An unknown method is named, with the methods the child knows."""
        reply = child.ask("summon", {})
        assert "protocol" == reply["error"]["kind"]
        assert "unknown method 'summon'" in reply["error"]["message"]
        assert "footer" in reply["error"]["message"]

    def test_bad_params(self, child: ServeChild) -> None:
        """Params a method does not take are refused (unknown keys are errors)."""
        reply = child.ask("footer", {"verbose": True})
        assert "protocol" == reply["error"]["kind"]
        assert "verbose" in reply["error"]["message"]

    def test_string_ids_are_echoed(self, child: ServeChild) -> None:
        """An id may be a string; the reply carries it back."""
        child.send_raw(b'{"id": "a-7", "method": "footer"}\n')
        assert "a-7" == child.reply()["id"]

    def test_replies_are_ascii_lines(self, child: ServeChild) -> None:
        """Every non-ASCII character is escaped, so a reader may split on newline alone."""
        child.send_raw('{"id": 1, "method": "überprüfen\u2028"}\n'.encode())
        line = child.reply_line()
        assert line.endswith(b"\n")
        assert line.isascii()
        assert 1 == line.count(b"\n")

    def test_blank_lines_are_ignored(self, child: ServeChild) -> None:
        """Empty lines get no reply."""
        child.send_raw(b"\n  \n")
        assert "result" in child.ask("footer")


class TestLifetime:
    def test_end_of_input_stops_the_child(self, isolated_home: Path) -> None:
        """Closing stdin (Pi quit or died) makes the child exit 0."""
        with ServeChild() as child:
            child.ask("hello")
            assert 0 == child.close()

    def test_logs_go_to_stderr_only(self, isolated_home: Path) -> None:
        """stdout holds replies only; the start and stop are logged on stderr."""
        env = {**os.environ, "PBOT_WATCH_LOG_LEVEL": "info"}
        with ServeChild(env=env) as child:
            child.ask("hello")
            child.close()
            assert b"pi child started" in child.stderr
            assert b"pi child stopped" in child.stderr
