"""A tool source's label is kept only when its text and sections do not give it (``index.stored_label``).

Whatever is kept, a search shows the label extraction made, exactly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pbot_watch.memory.extract import session_memory
from pbot_watch.memory.index import NAMED, refresh_memory
from pbot_watch.memory.query import search_memory
from pbot_watch.pi.entries import SessionReader
from pbot_watch.search.index import SearchIndex
from tests.support.pi_sessions import PiSession

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("bash", {"command": "npm test"}),
    ("bash", {"command": "echo 'a: b'\nls -la | head -3"}),
    ("read", {"path": "src/app.py", "offset": 10}),
    ("edit", {"file_path": "a.py", "old": "x", "new": "y"}),
    ("grep", {"pattern": "foo(bar", "path": "."}),
    ("web", {"limit": 3}),
    ("odd name", {"command": "ls"}),
    ("colon: name", {"command": "ls"}),
    ("bash", {"command": "x" * 300}),
    ("bash", {}),
]
OUTPUTS = ["3 failed\nbudget over limit\n", "", "\n", "one line", "a\n\nb\n\n", "x" * 200 + "\nmore"]


def labels_shown(tmp_path: Path, pi: PiSession) -> list[str | None]:
    """Search shows each tool source with the label extraction gave it; the labels ``mem_sources`` keeps."""
    with SearchIndex(tmp_path / "search.db") as index:
        refresh_memory(index, [tmp_path / "sessions"])
        page = search_memory(index, "", limit=50)
        hits = list(page.hits)
        while page.next_cursor is not None:
            page = search_memory(index, "", limit=50, after=page.next_cursor)
            hits += page.hits
        kept = [label for (label,) in index.conn.execute("SELECT label FROM mem_sources WHERE kind = 'tool'")]
    reader = SessionReader()
    entries = reader.feed(pi.file.read_bytes())
    made = [(s.entry_id, s.label) for s in session_memory(entries).sources if s.kind == "tool"]
    assert sorted((h.entry_id, h.label) for h in hits if h.kind == "tool") == sorted(made)
    return kept


def test_tool_labels_read_back_exactly(tmp_path: Path) -> None:
    pi = PiSession("sess-1", file=tmp_path / "sessions" / "ws" / "s.jsonl")
    for i, (name, arguments) in enumerate(CALLS):
        for j, output in enumerate(OUTPUTS):
            call = f"c{i}_{j}"
            pi.assistant(None, calls=[(call, name, arguments)], id=f"a{i}_{j}")
            if j % 3 != 2:  # else unanswered: the call is a source of its own
                pi.tool_result(output, call_id=call, name=name, error=j % 2 == 1, id=f"t{i}_{j}")
        pi.tool_result("no call seen\n", call_id=f"lost{i}", name=name, id=f"l{i}")
    kept = labels_shown(tmp_path, pi)
    # Kept: a name the call's text does not set apart, and an output ending in blank lines (the
    # text has one line fewer than its count). Every other one is derived.
    odd = [k for k in kept if k is not None and not k.startswith(NAMED)]
    assert odd and all(("odd name" in k or "colon: name" in k or "[4 lines]" in k) for k in odd)
    # The results of calls not seen keep only the tool's name.
    assert sum(k is not None and k.startswith(NAMED) for k in kept) == len(CALLS)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.text(min_size=1, max_size=12),
    st.dictionaries(st.sampled_from(["command", "path", "x", "query"]), st.text(max_size=20), max_size=3),
    st.text(max_size=40),
    st.booleans(),
)
def test_any_tool_label_reads_back_exactly(
    tmp_path_factory: Any, name: str, arguments: dict[str, Any], output: str, error: bool
) -> None:
    tmp_path = tmp_path_factory.mktemp("labels")
    pi = PiSession("sess-1", file=tmp_path / "sessions" / "ws" / "s.jsonl")
    pi.assistant(None, calls=[("c1", name, arguments), ("c2", name, arguments)], id="a1")
    pi.tool_result(output, call_id="c1", name=name, error=error, id="t1")
    pi.tool_result(output, call_id="lost", name=name, error=error, id="t2")
    labels_shown(tmp_path, pi)
