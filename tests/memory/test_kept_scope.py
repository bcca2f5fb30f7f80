"""The branches raw memory keeps as entries arrive equal a walk of every file from its entries.

An unscoped memory search reads each file's current branch from the index (``mem_visible``)
instead of walking every session on every query; these tests drive session files through
appends, ``/tree`` moves, compactions, forks, rewrites and truncations, syncing between
steps as the CLI and the service do, and compare the kept scope (sources and labels) with
the one walked from the stored entries.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pbot_watch.memory.index import ensure_memory_tables, sync_memory_file
from pbot_watch.memory.query import _kept_scope, _max_rowid, _walked_scope, search_memory
from pbot_watch.search.index import SearchIndex
from tests.support.pi_sessions import PiSession

Step = tuple[str, int]

KINDS = ["turn", "turn", "turn", "sync", "sync", "tree", "compact", "fork", "rewrite", "truncate"]
"""Turns and syncs most often: a change shows only when a sync reads appends after it."""
STEPS = st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 50)), min_size=8, max_size=40)


class Corpus:
    """Session files under one folder, changed step by step as Pi (and a user) change them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.sessions: list[tuple[Path, PiSession]] = []
        self.new_session()

    def new_session(self, parent: PiSession | None = None) -> PiSession:
        n = len(self.sessions)
        path = self.root / f"{n:04d}_s{n}.jsonl"
        if parent is None:
            session = PiSession(f"01a228f5-0000-7000-8000-{n:012x}", file=path, counter=n * 1000)
        else:
            session = parent.fork(f"01a228f5-0000-7000-8000-{n:012x}", counter=n * 1000)
            session.write(path)
            session.file = path
        self.sessions.append((path, session))
        return session

    def ids(self, session: PiSession) -> list[str]:
        return [e["id"] for e in session.entries if isinstance(e, dict) and isinstance(e.get("id"), str)]

    def step(self, kind: str, k: int) -> None:
        path, session = self.sessions[k % len(self.sessions)] if kind != "turn" else self.sessions[-1]
        ids = self.ids(session)
        if kind == "turn":
            k %= 4
            session.user(f"question {len(ids)} about ECONNRESET")
            if k == 1:
                call = f"call-{session.counter}"
                session.assistant(None, calls=[(call, "bash", {"command": "npm test"})])
                session.tool_result(f"timeout after {k} s", call_id=call, name="bash")
            session.assistant(f"answer {len(ids)}: retry the npm test")
        elif kind == "tree" and ids:
            session.branch_at(ids[k % len(ids)])
        elif kind == "compact" and ids:
            session.compaction(ids[k % len(ids)] if k % 5 else "not-an-entry")
        elif kind == "fork" and ids and len(self.sessions) < 4:
            self.new_session(session)
        elif kind == "rewrite":
            session.write(path)  # the same entries, a new file: read again from its start
        elif kind == "truncate" and session.entries:
            session.entries = session.entries[: k % len(session.entries)]
            kept = self.ids(session)
            session.leaf = kept[-1] if kept else None
            session.write(path)

    def sync(self, index: SearchIndex) -> None:
        for path, _session in self.sessions:
            sync_memory_file(index, path)

    def play(self, index: SearchIndex, steps: list[Step], check: Callable[[], None]) -> None:
        """Take ``steps``, syncing where they say and at the end, and ``check()`` after each sync."""
        ensure_memory_tables(index)
        for kind, k in [*steps, ("sync", 0)]:
            if kind == "sync":
                self.sync(index)
                check()
            else:
                self.step(kind, k)


def kept_and_walked(index: SearchIndex) -> tuple[dict[int, Any], dict[int, Any]]:
    snapshot = _max_rowid(index)
    kept = _kept_scope(index, snapshot)
    rowids = [r for (r,) in index.conn.execute("SELECT rowid FROM mem_visible")]
    kept.labels.load(rowids)  # type: ignore[attr-defined]
    walked_rows, walked = _walked_scope(index, None, None, snapshot)
    assert kept.sessions == walked.sessions
    return {r: kept.labels[r] for r in rowids}, {r: walked.labels[r] for r in walked_rows}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_the_kept_branches_equal_a_walk_after_any_changes(tmp_path_factory: Any, steps: list[Step]) -> None:
    root = tmp_path_factory.mktemp("kept")
    corpus = Corpus(root / "sessions")
    with SearchIndex(root / "search.db") as index:

        def same() -> None:
            kept, walked = kept_and_walked(index)
            assert kept == walked

        corpus.play(index, steps, same)


def test_an_unscoped_search_finds_what_is_on_each_current_branch_only(tmp_path: Path) -> None:
    corpus = Corpus(tmp_path / "sessions")
    session = corpus.sessions[0][1]
    session.user("first question")
    abandoned = session.assistant("an abandoned answer about ECONNRESET")
    session.branch_at(session.entries[0]["id"])
    session.assistant("the kept answer about ECONNRESET")
    corpus.new_session(session)
    with SearchIndex(tmp_path / "search.db") as index:
        corpus.sync(index)
        result = search_memory(index, "econnreset")
        assert [hit.entry_id for hit in result.hits] != [] and abandoned not in {
            h.entry_id for h in result.hits
        }
        assert result.total == 2  # the kept answer, in the session and in its fork
        assert sorted(result.scope) == sorted({s.session_id for _p, s in corpus.sessions})
