"""Pi's header rule, read once and used by every part that asks "is this a session, whose, where".

The rule (Pi's ``loadEntriesFromFile``): blank lines and lines that do not parse are skipped;
the first line that parses must be ``{type: "session", id: string}``, or the file is not a
session. ``pbot-watch index`` archives by this rule, so ``search`` and ``summarize`` must find
by it too.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pbot_watch.pi.entries import SessionHeader, session_header
from pbot_watch.sources import NotRegularFile, open_session, read_header
from tests.support.cli import invoke
from tests.support.pi_sessions import PiSession, jsonl


def header_line(session_id: str, cwd: str, **extra: str) -> bytes:
    """A header alone, with ``extra`` fields after Pi's own."""
    return PiSession(session_id, cwd, header_fields=extra).data()


def exchange(question: str) -> bytes:
    """The lines of one question and its answer, without a header."""
    pi = PiSession()
    pi.turn(question)
    return jsonl(pi.entries)


NESTED = b"[" * 1000 + b"]" * 1000 + b"\n"

# What comes before the header (or what the header carries), per odd first line.
ODD_STARTS = {
    "blank first line": (b"\n", {}),
    "garbage first line": (b"this is not json\n", {}),
    "first line nested 1000 deep": (NESTED, {}),
    "header over 64 KB": (b"", {"note": "x" * (70 * 1024)}),
}


class TestSessionHeader:
    """``session_header``: the pure rule over a file's bytes, in any chunks."""

    def header_of(self, data: bytes, chunk: int = 7) -> SessionHeader | bool | None:
        return session_header(data[i : i + chunk] for i in range(0, len(data), chunk))

    @pytest.mark.parametrize("start", list(ODD_STARTS), ids=list(ODD_STARTS))
    def test_skips_what_pi_skips(self, start: str) -> None:
        """Blank and unparseable lines before the header are skipped; a long header is read whole."""
        before, extra = ODD_STARTS[start]
        header = self.header_of(before + header_line("s1", "/w", **extra) + exchange("q"), chunk=4096)
        assert isinstance(header, SessionHeader)
        assert ("s1", "/w") == (header.id, header.workspace)

    def test_first_parsed_line_must_be_the_header(self) -> None:
        """JSON that parses but is not a session header makes the file not a session."""
        assert False is self.header_of(b'{"type":"message","id":"x"}\n' + header_line("s1", "/w"))

    def test_header_id_must_be_a_string(self) -> None:
        """A header whose id is not a string is not a session header."""
        assert False is self.header_of(b'{"type":"session","id":7}\n')

    def test_unfinished_line_is_not_decided(self) -> None:
        """Until its newline arrives, a header being written is not known yet."""
        assert None is self.header_of(header_line("s1", "/w").rstrip(b"\n"))

    def test_empty_file_is_not_decided(self) -> None:
        """An empty file may still become a session."""
        assert None is self.header_of(b"")

    def test_stops_reading_at_the_header(self) -> None:
        """Chunks after the header are never asked for."""
        asked: list[int] = []

        def chunks() -> object:
            yield header_line("s1", "/w")
            asked.append(1)
            yield b"{never decoded\n"

        assert isinstance(session_header(chunks()), SessionHeader)  # type: ignore[arg-type]
        assert [] == asked


class TestReadHeader:
    """``read_header``: the rule applied to a file on disk, without ever blocking."""

    def test_reads_a_session_file(self, tmp_path: Path) -> None:
        """A session file gives its header."""
        path = tmp_path / "s.jsonl"
        path.write_bytes(b"\n" + header_line("s1", str(tmp_path)) + exchange("q"))
        header = read_header(path)
        assert isinstance(header, SessionHeader)
        assert "s1" == header.id

    def test_fifo_is_not_a_session(self, tmp_path: Path) -> None:
        """A FIFO is never opened for a blocking read: it is simply not a session file."""
        path = tmp_path / "s.jsonl"
        os.mkfifo(path)
        assert False is read_header(path)

    def test_device_is_not_a_session(self, tmp_path: Path) -> None:
        """A symlink to an endless device is not read: it is not a session file."""
        path = tmp_path / "s.jsonl"
        path.symlink_to("/dev/zero")
        assert False is read_header(path)

    def test_missing_file_raises(self, tmp_path: Path) -> None:
        """A file that is gone is the caller's to report."""
        with pytest.raises(FileNotFoundError):
            read_header(tmp_path / "gone.jsonl")


class TestOpenSession:
    """``open_session``: every reader's way in; regular files only, never blocking."""

    def test_regular_file_opens(self, tmp_path: Path) -> None:
        """A regular file gives a descriptor and its stat."""
        path = tmp_path / "s.jsonl"
        path.write_bytes(b"x\n")
        fd, st = open_session(path)
        os.close(fd)
        assert 2 == st.st_size

    def test_symlink_to_a_regular_file_opens(self, tmp_path: Path) -> None:
        """A symlink to a session file is followed, as the scan follows it."""
        path = tmp_path / "s.jsonl"
        path.write_bytes(b"x\n")
        link = tmp_path / "link.jsonl"
        link.symlink_to(path)
        fd, st = open_session(link)
        os.close(fd)
        assert path.stat().st_ino == st.st_ino

    @pytest.mark.parametrize(
        ("kind", "named"), [("folder", "a folder"), ("fifo", "a FIFO"), ("device", "a character device")]
    )
    def test_anything_else_is_refused(self, tmp_path: Path, kind: str, named: str) -> None:
        """A folder, a FIFO (even with a writer waiting) or a device is refused, naming what it is."""
        path = tmp_path / "s.jsonl"
        if kind == "folder":
            path.mkdir()
        elif kind == "fifo":
            os.mkfifo(path)
        else:
            path.symlink_to("/dev/zero")
        with pytest.raises(NotRegularFile) as raised:
            open_session(path)
        assert f"{named}, not a regular file (only regular files are sessions)" == raised.value.strerror


class TestIndexedIsSearchable:
    """What ``index`` archives, ``search`` finds: both read headers by the same rule."""

    @pytest.mark.parametrize("start", list(ODD_STARTS), ids=list(ODD_STARTS))
    def test_odd_first_line(self, tmp_path: Path, start: str) -> None:
        """A session with an odd first line (or a huge header) is archived and then found."""
        before, extra = ODD_STARTS[start]
        sessions = tmp_path / "sessions"
        (sessions / "--w--").mkdir(parents=True)
        # Each session in a workspace of its own: only its own header can lead search to its records.
        odd, plain = tmp_path / "odd-ws", tmp_path / "plain-ws"
        odd.mkdir()
        plain.mkdir()
        (sessions / "--w--" / "odd.jsonl").write_bytes(
            before + header_line("odd", str(odd), **extra) + exchange("where is the marmalade")
        )
        (sessions / "--w--" / "plain.jsonl").write_bytes(
            header_line("plain", str(plain)) + exchange("unrelated question")
        )
        indexed = invoke("index", "--sessions", str(sessions))
        assert 0 == indexed.returncode, indexed.stderr
        assert "2 sessions, 2 records written" in indexed.stdout
        found = invoke("search", "marmalade", "--sessions", str(sessions), "--json")
        assert 0 == found.returncode, found.stderr
        matches = json.loads(found.stdout)["matches"]
        assert ["odd"] == [m["sessionId"] for m in matches]

    def test_nested_line_alone_does_not_break_search(self, tmp_path: Path) -> None:
        """A file that is only a deeply nested line is not a session, and search still works."""
        workspace = tmp_path / "ws"
        workspace.mkdir()
        sessions = tmp_path / "sessions"
        (sessions / "--w--").mkdir(parents=True)
        (sessions / "--w--" / "bad.jsonl").write_bytes(NESTED)
        (sessions / "--w--" / "plain.jsonl").write_bytes(
            header_line("plain", str(workspace)) + exchange("where is the marmalade")
        )
        assert 0 == invoke("index", "--sessions", str(sessions)).returncode
        found = invoke("search", "marmalade", "--sessions", str(sessions), "--json")
        assert 0 == found.returncode, found.stderr
        assert ["plain"] == [m["sessionId"] for m in json.loads(found.stdout)["matches"]]


class TestSummaryDiscovery:
    """The summary worker finds record folders by the same header rule."""

    @pytest.mark.parametrize("start", list(ODD_STARTS), ids=list(ODD_STARTS))
    def test_odd_first_line(self, tmp_path: Path, start: str) -> None:
        """The records of a session with an odd first line are queued for summaries."""
        from pbot_watch.config import load_settings
        from pbot_watch.summarize.worker import discover_folders

        before, extra = ODD_STARTS[start]
        workspace = tmp_path / "ws"
        sessions = tmp_path / "sessions"
        (sessions / "--w--").mkdir(parents=True)
        (workspace / ".pi" / "pbot" / "history").mkdir(parents=True)
        (sessions / "--w--" / "odd.jsonl").write_bytes(
            before + header_line("odd", str(workspace), **extra) + exchange("q")
        )
        settings = load_settings({"sessions": [sessions]})
        assert [workspace / ".pi" / "pbot" / "history"] == discover_folders(settings)
