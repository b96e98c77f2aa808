"""shared.runtime.clock: the injected clocks and the fixed-width time text."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from shared.model.bounds import MAX_TIME, MIN_TIME
from shared.runtime.clock import FakeClock, IsoTimes, iso, parse_iso, to_timestamp


def test_fake_clock_moves_only_when_told_and_both_readings_together():
    c = FakeClock(100.0)
    assert c.now() == c.monotonic() == 100.0
    assert c.advance(2.5) == 102.5 and c.monotonic() == 102.5
    c.set(5)
    assert c.now() == 5.0


@pytest.mark.parametrize(
    "ts, text",
    [
        (0, "1970-01-01T00:00:00.000Z"),
        (1.2345, "1970-01-01T00:00:01.234Z"),
        (1.9996, "1970-01-01T00:00:02.000Z"),
        (-0.5, "1969-12-31T23:59:59.500Z"),
        (MIN_TIME, "0001-01-01T00:00:00.000Z"),
        (MAX_TIME, "9999-12-31T23:59:59.000Z"),
    ],
)
def test_iso_is_fixed_width_with_milliseconds(ts, text):
    assert iso(ts) == text and len(text) == 24


@pytest.mark.parametrize("ts", [MAX_TIME + 0.9995, MIN_TIME - 0.001, float("nan"), float("inf")])
def test_iso_refuses_times_outside_the_years_1_to_9999(ts):
    with pytest.raises(ValueError, match="outside the years 1 to 9999"):
        iso(ts)


def test_iso_text_orders_as_time():
    times = [-1e9, -0.001, 0, 0.0005, 59.999, 1e9, 2e9]
    assert sorted(iso(t) for t in times) == [iso(t) for t in times]


def test_iso_times_match_iso_across_seconds():
    fmt = IsoTimes()
    for ts in (10.001, 10.999, 11.0, 10.5, 1e9 + 0.9996, MAX_TIME):
        assert fmt(ts) == iso(ts)
    with pytest.raises(ValueError, match="outside"):
        fmt(float("nan"))


def test_parse_iso_inverts_iso_and_needs_a_zone():
    assert parse_iso(iso(1_700_000_000.125)) == 1_700_000_000.125
    assert parse_iso("2025-01-01T01:00:00+01:00") == parse_iso("2025-01-01T00:00:00Z")
    with pytest.raises(ValueError, match="'2025-01-01T00:00:00' has no timezone"):
        parse_iso("2025-01-01T00:00:00")


def test_to_timestamp_accepts_aware_times_text_and_numbers():
    aware = datetime(2025, 1, 1, 1, tzinfo=timezone(timedelta(hours=1)))
    assert to_timestamp(aware) == to_timestamp("2025-01-01T00:00:00Z") == 1_735_689_600.0
    assert to_timestamp(7) == 7.0


def test_to_timestamp_refuses_naive_bools_and_huge_ints():
    with pytest.raises(ValueError, match="has no timezone; pass an aware datetime"):
        to_timestamp(datetime(2025, 1, 1))
    with pytest.raises(TypeError, match="not bool"):
        to_timestamp(True)
    with pytest.raises(ValueError, match="outside the years 1 to 9999"):
        to_timestamp(10**400)
