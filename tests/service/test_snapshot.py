"""Reconcile scans: the pure diff of two snapshots, and a scan of real folders."""

from __future__ import annotations

from pathlib import Path

from pbot_watch.service.snapshot import Stat, diff, scan


class TestDiff:
    def test_created_modified_deleted(self) -> None:
        """Each path lands in exactly one list; unchanged paths in none."""
        a, b, c, d = (Path(f"/{n}.jsonl") for n in "abcd")
        before = {a: Stat(1, 1, 10, 5), b: Stat(1, 2, 10, 5), c: Stat(1, 3, 10, 5)}
        after = {a: Stat(1, 1, 10, 5), b: Stat(1, 2, 20, 6), d: Stat(1, 4, 1, 7)}
        result = diff(before, after)
        assert (result.created, result.modified, result.deleted) == ([d], [b], [c])

    def test_new_inode_is_a_change(self) -> None:
        """A file replaced under the same name and size is modified."""
        path = Path("/a.jsonl")
        assert diff({path: Stat(1, 1, 10, 5)}, {path: Stat(1, 2, 10, 5)}).modified == [path]


class TestScan:
    def test_only_jsonl_below_existing_roots(self, tmp_path: Path) -> None:
        """Nested ``*.jsonl`` files are found; other files and missing roots are ignored."""
        (tmp_path / "r" / "--w--").mkdir(parents=True)
        session = tmp_path / "r" / "--w--" / "s.jsonl"
        session.write_bytes(b"{}\n")
        (tmp_path / "r" / "notes.txt").write_text("x")
        snapshot = scan([tmp_path / "r", tmp_path / "missing"])
        assert list(snapshot) == [session]
        assert snapshot[session].size == 3
