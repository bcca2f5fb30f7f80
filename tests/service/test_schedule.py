"""When the service reads a changed file: the ``ReadSchedule`` rules on given clock values, and batches."""

from __future__ import annotations

from pathlib import Path

from pbot_watch.service.schedule import ReadSchedule, batches

A = Path("/s/a.jsonl")
B = Path("/s/b.jsonl")


def schedule() -> ReadSchedule:
    return ReadSchedule(debounce_seconds=0.15, max_delay=0.5, retry_seconds=(1, 5, 30, 120))


class TestDebounce:
    def test_a_change_waits_for_a_quiet_gap(self) -> None:
        """A changed file is due once it has been quiet for the debounce, not before."""
        plan = schedule()
        plan.mark(A, 10.0)
        assert ([], [A]) == (plan.due(10.1), plan.due(10.15))

    def test_each_change_restarts_the_gap(self) -> None:
        """A second change before the gap ends moves the due time to a gap after it."""
        plan = schedule()
        plan.mark(A, 10.0)
        plan.mark(A, 10.1)
        assert ([], [A]) == (plan.due(10.2), plan.due(10.25))

    def test_continuous_changes_are_read_within_the_maximum_delay(self) -> None:
        """A file changed every 0.1 s, never quiet, is due 0.5 s after its first unread change."""
        plan = schedule()
        for step in range(5):
            plan.mark(A, 10.0 + step * 0.1)
        assert ([], [A]) == (plan.due(10.49), plan.due(10.5))

    def test_a_file_found_by_a_scan_is_due_at_once(self) -> None:
        """``mark_overdue`` (start scan, reconcile) makes a file due at the time it is marked."""
        plan = schedule()
        plan.mark_overdue(A, 10.0)
        assert [A] == plan.due(10.0)

    def test_due_files_come_sorted(self) -> None:
        """Due files are listed in path order, whatever order they changed in."""
        plan = schedule()
        plan.mark(B, 10.0)
        plan.mark(A, 10.0)
        assert [A, B] == plan.due(11.0)

    def test_a_taken_file_is_no_longer_pending(self) -> None:
        """Once taken for reading, a file is not due again until it changes again."""
        plan = schedule()
        plan.mark(A, 10.0)
        plan.take([A])
        assert ([], 0, False) == (plan.due(11.0), plan.pending, plan.busy)

    def test_the_wait_ends_when_the_next_file_falls_due(self) -> None:
        """The caller waits a full tick with nothing pending, else until the soonest due time."""
        plan = schedule()
        idle_wait = plan.wait_seconds(10.0, tick=0.1)
        plan.mark(A, 10.0)
        assert (0.1, 0.05, 0.0) == (
            idle_wait,
            round(plan.wait_seconds(10.1, tick=0.1), 6),
            plan.wait_seconds(10.3, tick=0.1),
        )


class TestRetries:
    def test_each_failure_backs_off_further(self) -> None:
        """Consecutive failures wait 1, 5, 30, then 120 s for good before the next attempt."""
        plan = schedule()
        now = 100.0
        for wait in (1, 5, 30, 120, 120):
            plan.finished([A], failed={A}, now=now)
            assert ([], [A]) == (plan.due(now + wait - 0.01), plan.due(now + wait))
            now += wait

    def test_a_success_clears_the_back_off(self) -> None:
        """A file read without failure is no longer retried."""
        plan = schedule()
        plan.finished([A], failed={A}, now=100.0)
        plan.finished([A], failed=set(), now=101.0)
        assert ([], 0) == (plan.due(1000.0), plan.retrying)

    def test_only_the_failed_files_back_off(self) -> None:
        """In one batch, the failed file is retried and the others are not."""
        plan = schedule()
        plan.finished([A, B], failed={B}, now=100.0)
        assert [B] == plan.due(101.0)

    def test_a_failing_file_is_not_busy(self) -> None:
        """A file that only waits for its retry counts as retrying, not as pending work."""
        plan = schedule()
        plan.mark(A, 100.0)
        plan.take([A])
        plan.finished([A], failed={A}, now=100.0)
        assert (False, 0, 1) == (plan.busy, plan.pending, plan.retrying)

    def test_a_changed_failing_file_waits_for_its_debounce(self) -> None:
        """A retrying file that changes again is read after its quiet gap, and listed once."""
        plan = schedule()
        plan.finished([A], failed={A}, now=100.0)
        plan.mark(A, 100.9)
        assert ([], [A]) == (plan.due(101.0), plan.due(101.1))


class TestBatches:
    def test_at_most_max_files_per_batch(self, tmp_path: Path) -> None:
        """Five small files in batches of two: 2, 2, 1, in the given order."""
        paths = [tmp_path / f"{n}.jsonl" for n in range(5)]
        for path in paths:
            path.write_bytes(b"{}\n")
        assert [paths[0:2], paths[2:4], paths[4:]] == list(batches(paths, max_files=2))

    def test_a_batch_ends_once_it_holds_max_bytes(self, tmp_path: Path) -> None:
        """A large file closes its batch; the next files start another."""
        big, small, other = tmp_path / "big.jsonl", tmp_path / "small.jsonl", tmp_path / "other.jsonl"
        big.write_bytes(b"x" * 100)
        small.write_bytes(b"x")
        other.write_bytes(b"x")
        assert [[big], [small, other]] == list(batches([big, small, other], max_bytes=100))

    def test_a_large_file_never_shares_a_batch_with_the_files_before_it(self, tmp_path: Path) -> None:
        """The small files' records are written without waiting for a large file's read."""
        small, big = tmp_path / "small.jsonl", tmp_path / "big.jsonl"
        small.write_bytes(b"x")
        big.write_bytes(b"x" * 100)
        assert [[small], [big]] == list(batches([small, big], max_bytes=100))

    def test_a_vanished_file_still_counts_as_a_file(self, tmp_path: Path) -> None:
        """A file deleted since it changed is batched with size 0 (the read finds it gone)."""
        assert [[tmp_path / "gone.jsonl"]] == list(batches([tmp_path / "gone.jsonl"]))
