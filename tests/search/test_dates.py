"""Date.parse for pbot's time ranges."""

from __future__ import annotations

import time

import pytest

from pbot_watch.search.dates import parse_ms


class TestParseMs:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("2026-11-29T20:18:03.014Z", 1795983483014.0),
            ("2026-11-29", 1795910400000.0),
            ("2026", 1767225600000.0),
            ("2026-11", 1793491200000.0),
            ("2024-02-29T00:00:00+01:00", 1709161200000.0),
            ("1970-01-01T00:00:00Z", 0.0),
            ("2019-02-31", 1551571200000.0),  # V8 rolls the day over into March
        ],
    )
    def test_iso_values(self, text: str, expected: float) -> None:
        """ISO dates and date-times give JavaScript's milliseconds."""
        assert expected == parse_ms(text)

    @pytest.mark.parametrize("text", ["", "yesterday", "2026-13-01", "2026-11-29T25:00", "29/11/2026"])
    def test_invalid_is_none(self, text: str) -> None:
        """What JavaScript parses to NaN is None."""
        assert parse_ms(text) is None

    def test_date_time_without_offset_is_local(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A date-time without an offset is local time, as in JavaScript."""
        monkeypatch.setenv("TZ", "Asia/Tokyo")
        time.tzset()
        try:
            assert parse_ms("2026-11-29T09:00:00") == parse_ms("2026-11-29T00:00:00Z")
            assert parse_ms("2026-11-29") == parse_ms("2026-11-29T00:00:00Z")
        finally:
            monkeypatch.delenv("TZ")
            time.tzset()
