"""The catalog (``pbot_watch/catalog.py``): one header cache, one scope, real files in a temporary folder."""

from __future__ import annotations

import os
from pathlib import Path

from pbot_watch.catalog import Catalog, HeaderCache, Scope
from tests.support.pi_sessions import PiSession


def session(path: Path, session_id: str, cwd: str) -> Path:
    pi = PiSession(session_id, cwd)
    pi.turn("q")
    return pi.write(path)


def test_a_header_is_read_once_until_the_file_is_replaced(tmp_path: Path) -> None:
    """The cache answers for an unchanged inode; a rewrite (new inode) is read again."""
    path = session(tmp_path / "s" / "a.jsonl", "id-one", "/w/one")
    catalog = Catalog([tmp_path / "s"])
    assert ["id-one"] == [s.session_id for s in catalog.sessions()]
    # The same bytes but another id, written in place (same inode, same size): not read again.
    data = path.read_bytes()
    with path.open("r+b") as handle:
        handle.write(data.replace(b"id-one", b"id-two"))
    assert ["id-one"] == [s.session_id for s in catalog.sessions()]
    replaced = tmp_path / "replaced.jsonl"
    replaced.write_bytes(data.replace(b"id-one", b"id-two"))
    os.replace(replaced, path)
    assert ["id-two"] == [s.session_id for s in catalog.sessions()]


def test_a_file_without_a_header_yet_is_read_again_when_it_grows(tmp_path: Path) -> None:
    path = tmp_path / "s" / "a.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"")
    catalog = Catalog([tmp_path / "s"])
    assert ["no-header"] == [s.kind for s in catalog.sightings()]
    path.write_bytes(PiSession("late", "/w").data())
    assert ["late"] == [s.session_id for s in catalog.sessions()]


def test_kept_rows_answer_the_next_command(tmp_path: Path) -> None:
    """Rows taken from one cache (search keeps them in search.db) answer without a read."""
    path = session(tmp_path / "s" / "a.jsonl", "id-one", "/w/one")
    first = Catalog([tmp_path / "s"])
    first.sessions()
    rows = first.cache.take_rows()
    assert [] == first.cache.take_rows()
    with path.open("r+b") as handle:
        handle.write(path.read_bytes().replace(b"id-one", b"id-two"))
    assert ["id-one"] == [
        s.session_id for s in Catalog([tmp_path / "s"], cache=HeaderCache.from_rows(rows)).sessions()
    ]


def test_the_scope_names_each_session_record_folder(tmp_path: Path) -> None:
    """Included workspaces have their own folder; excluded, relative and cwd-less ones have none."""
    for name, cwd in (("kept", "/w/kept"), ("left", "/scratch/left"), ("relative", "rel/dir")):
        session(tmp_path / "s" / f"{name}.jsonl", name, cwd)
    scope = Scope(exclude=("/scratch/*",))
    folders = Catalog([tmp_path / "s"], scope).record_folders()
    assert {Path("/w/kept/.pi/pbot/history"): "/w/kept"} == folders
    assert "excluded" == scope.exclusion("/scratch/left")
    assert "not included" == Scope(include=("/w/*",)).exclusion("/scratch/left")
    assert scope.record_folder(None) is None
    central = tmp_path / "archive"
    assert {central: None} == Catalog([tmp_path / "s"], Scope(archive=central)).record_folders()


def test_what_cannot_be_read_is_said_and_not_kept(tmp_path: Path) -> None:
    """A folder named like a session file is no session; a file that vanished is said, not cached."""
    (tmp_path / "s" / "odd.jsonl").mkdir(parents=True)
    cache = HeaderCache()
    sighting = cache.sight(tmp_path / "s" / "gone.jsonl")
    assert ("unreadable", None) == (sighting.kind, sighting.stamp)
    assert sighting.problem is not None
    assert [] == cache.take_rows()
    assert [] == list(Catalog([tmp_path / "s"], cache=cache).sightings())  # a folder is not listed
