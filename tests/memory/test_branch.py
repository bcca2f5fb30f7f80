"""What a branch's latest compaction left out of the model's context: historical or retained."""

from __future__ import annotations

from pbot_watch.memory.branch import context_labels, first_kept, kept_boundary

PATH = ["u1", "a1", "t1", "u2", "a2", "c1", "u3", "a3"]


class TestContextLabels:
    def test_no_compaction_everything_is_retained(self) -> None:
        """A branch without a compaction is all still in context."""
        assert ["retained"] * len(PATH) == context_labels(PATH, {})

    def test_before_the_kept_boundary_is_historical(self) -> None:
        """Entries before firstKeptEntryId are historical; from it on, retained."""
        labels = dict(zip(PATH, context_labels(PATH, {"c1": "u2"}), strict=True))
        assert ["historical"] * 3 == [labels["u1"], labels["a1"], labels["t1"]]
        assert ["retained"] * 5 == [labels[e] for e in ("u2", "a2", "c1", "u3", "a3")]

    def test_retain_none_compaction_names_itself(self) -> None:
        """A compaction whose kept id is its own leaves everything before it out."""
        assert ["historical"] * 5 + ["retained"] * 3 == context_labels(PATH, {"c1": "c1"})

    def test_the_latest_compaction_decides(self) -> None:
        """With two compactions on the branch, the later one's boundary counts."""
        path = [*PATH, "c2", "u4"]
        labels = context_labels(path, {"c1": "u2", "c2": "u3"})
        assert ["historical"] * 6 + ["retained"] * 4 == labels

    def test_kept_id_not_on_the_path_keeps_nothing(self) -> None:
        """A kept id that is not before the compaction (or none at all): Pi keeps nothing before it."""
        for kept in ("elsewhere", "u3", ""):
            assert ["historical"] * 5 + ["retained"] * 3 == context_labels(PATH, {"c1": kept})

    def test_compactions_off_the_path_do_not_count(self) -> None:
        """A compaction on another branch labels nothing here."""
        assert ["retained"] * len(PATH) == context_labels(PATH, {"other": "u1"})


class TestFirstKept:
    def test_positions(self) -> None:
        """The kept entry's position before the compaction, the compaction's own for retain-none, else None."""
        assert 3 == first_kept(PATH, 5, "u2")
        assert 5 == first_kept(PATH, 5, "c1")
        assert first_kept(PATH, 5, "a3") is None

    def test_boundary(self) -> None:
        """The kept boundary: the kept entry's position, else the compaction's own (nothing kept)."""
        assert 3 == kept_boundary(PATH, 5, "u2")
        assert 5 == kept_boundary(PATH, 5, "a3")
        assert 5 == kept_boundary(PATH, 5, "")
