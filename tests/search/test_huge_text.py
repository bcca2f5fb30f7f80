"""A pasted 50 MB log in a session: search reads it in pieces, and says what it said before.

Such a text is *capped* (``INDEXED_CHARS``): literal search tests it itself. Reading it whole,
and lower-casing a copy, for every query cost hundreds of MB and seconds; it is read in pieces
now, and the snippet and preview must be exactly what the whole text gives (pbot's).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pbot_watch.search.index import INDEXED_CHARS, READ_PIECE
from pbot_watch.search.queries import CAPPED_NODES, _utf16_index, preview, snippet_at
from tests.support.cli import invoke
from tests.support.pi_sessions import PiSession


def indexed_text(needle_text: str) -> str:
    """The exact text of the node holding ``needle_text``, straight from search.db."""
    db = Path(os.environ["XDG_STATE_HOME"]) / "pbot-watch" / "search.db"
    with sqlite3.connect(db) as conn:
        (text,) = conn.execute(
            "SELECT text FROM node_texts WHERE instr(text, ?) > 0", (needle_text,)
        ).fetchone()
    conn.close()
    return str(text)


@pytest.fixture
def roots(tmp_path: Path) -> tuple[str, ...]:
    """A session whose question is a 3 MB log of CJK, emoji and ASCII, with marks past the first piece."""
    line = "2026-11-29 构建 ✅ step 😀 output Straße\n"
    log = line * (3 * READ_PIECE // len(line.encode()))
    cut = len(log) // 2
    log = log[:cut] + "NEEDLE in the middle 𝔘 " + log[cut:] + "tail mark"
    assert len(log) > INDEXED_CHARS
    pi = PiSession("s-log", "/w")
    pi.user("here is the log:\n" + log, id="u1")
    pi.assistant("seen", id="a1")
    pi.write(tmp_path / "sessions" / "--w--" / "log.jsonl")
    other = PiSession("s-other", "/w")
    other.exchanges(3)
    other.write(tmp_path / "sessions" / "--w--" / "other.jsonl")
    where = ("--sessions", str(tmp_path / "sessions"), "--archive", str(tmp_path / "archive"))
    assert 0 == invoke("index", *where).returncode
    return where


class TestSnippets:
    @pytest.mark.parametrize("needle", ["needle in the middle 𝔘", "tail mark", "构建 ✅ step"])
    def test_the_snippet_is_what_the_whole_text_gives(self, roots: tuple[str, ...], needle: str) -> None:
        """Snippet and preview of a hit in a capped text equal pbot's, computed on the whole text."""
        found = json.loads(invoke("search", needle, "--json", *roots).stdout)
        (match,) = found["matches"]
        text = indexed_text("NEEDLE in the middle")
        expected = (snippet_at(text, _utf16_index(text.lower(), needle.lower())), preview(text))
        assert expected == (match["snippet"], match["preview"])


def peak_rss_mb(*args: str) -> float:
    """The peak RSS of a fresh interpreter that runs ``pbot-watch ARGS`` (Linux ``VmHWM``)."""
    code = (
        "import sys\nfrom pathlib import Path\nfrom pbot_watch.cli import main\n"
        "try:\n    main(sys.argv[1:], prog_name='pbot-watch')\nexcept SystemExit:\n    pass\n"
        "hwm = [l for l in Path('/proc/self/status').read_text().splitlines() if l.startswith('VmHWM:')]\n"
        "print(int(hwm[0].split()[1]) / 1024)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, check=False
    )
    return float(done.stdout.splitlines()[-1])


@pytest.mark.slow
class TestMemory:
    def test_a_search_hitting_a_20_mb_line_costs_little_memory(self, tmp_path: Path) -> None:
        """Once built, a search (and a memory search) whose hit is in a 20 MB pasted line costs under
        10 MB more than one hitting a short text."""
        log = "".join(f"2026-11-29 line {n} GET /api/items 200 latency_ms={n % 97}\n" for n in range(400_000))
        assert len(log) > 20_000_000
        pi = PiSession("s-log", "/w")
        pi.user("pasted:\n" + log + "UNIQUEMARKER", id="u1")
        pi.assistant("ok", id="a1")
        pi.write(tmp_path / "sessions" / "--w--" / "log.jsonl")
        other = PiSession("s-other", "/w")
        other.user("an unrelated question about sqlite", id="u1")
        other.assistant("ok", id="a1")
        other.write(tmp_path / "sessions" / "--w--" / "other.jsonl")
        where = ("--sessions", str(tmp_path / "sessions"), "--archive", str(tmp_path / "archive"))
        assert 0 == invoke("index", *where).returncode
        assert 0 == invoke("search", "uniquemarker", *where).returncode  # builds the index
        short = peak_rss_mb("search", "sqlite", *where)  # reads the 20 MB text too, to find no match
        hit = peak_rss_mb("search", "uniquemarker", *where)
        assert hit - short < 10, (hit, short)
        assert 0 == invoke("memory", "search", "uniquemarker", *where).returncode  # builds raw memory
        short = peak_rss_mb("memory", "search", "sqlite", *where)
        hit = peak_rss_mb("memory", "search", "uniquemarker", *where)
        assert hit - short < 10, (hit, short)


class TestPlan:
    def test_finding_the_capped_nodes_reads_only_them(self, roots: tuple[str, ...]) -> None:
        """Every literal query looks up the capped nodes: through the partial index, not a scan of all nodes."""
        assert 0 == invoke("search", "tail mark", *roots).returncode
        db = Path(os.environ["XDG_STATE_HOME"]) / "pbot-watch" / "search.db"
        with sqlite3.connect(db) as conn:
            plan = [row[-1] for row in conn.execute(f"EXPLAIN QUERY PLAN {CAPPED_NODES}")]
        conn.close()
        assert ["SCAN nodes USING INDEX nodes_capped"] == plan
