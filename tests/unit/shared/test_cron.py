"""shared.settings.cron: cron ticks in a time zone, across daylight-saving changes."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from shared.settings import cron

BERLIN = "Europe/Berlin"


def utc(*args: int) -> float:
    return datetime(*args, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize("expr", ["0 8 * * *", "*/5 * * * 1-5", "30 2 1 1 *"])
def test_valid_expressions(expr):
    assert cron.cron_error(expr) is None


@pytest.mark.parametrize("expr", ["0 8 * *", "0 8 * * * *", "61 * * * *", "x * * * *", 5, None])
def test_invalid_expressions_say_why(expr):
    assert cron.cron_error(expr)


def test_zones():
    assert cron.is_zone("UTC") and cron.is_zone(BERLIN)
    assert not cron.is_zone("Mars/Olympus") and not cron.is_zone("") and not cron.is_zone(None)
    with pytest.raises(ValueError, match="unknown time zone 'Mars/Olympus'"):
        cron.zone("Mars/Olympus")


def test_next_after_is_strictly_after():
    eight = utc(2025, 1, 2, 8, 0)
    assert cron.next_after("0 8 * * *", "UTC", eight - 0.5) == eight
    assert cron.next_after("0 8 * * *", "UTC", eight) == eight + 86400


def test_next_after_in_a_zone():
    # 08:00 in Berlin in winter is 07:00 UTC
    assert cron.next_after("0 8 * * *", BERLIN, utc(2025, 1, 2, 0, 0)) == utc(2025, 1, 2, 7, 0)


def test_a_day_no_month_has_is_refused_up_front():
    assert "day-of-month" in cron.cron_error("0 0 30 2 *")


def test_skipped_hour_runs_once_right_after_the_jump():
    # 2025-03-30: Berlin jumps from 02:00 to 03:00 (01:00 UTC)
    got = cron.ticks_between("30 2 * * *", BERLIN, utc(2025, 3, 29, 12), utc(2025, 3, 30, 12), 10)
    assert got == [utc(2025, 3, 30, 1, 0)]


def test_repeated_hour_runs_once_at_the_first_occurrence():
    # 2025-10-26: Berlin goes back from 03:00 CEST to 02:00 CET (01:00 UTC)
    got = cron.ticks_between("30 2 * * *", BERLIN, utc(2025, 10, 25, 12), utc(2025, 10, 26, 12), 10)
    assert got == [utc(2025, 10, 26, 0, 30)]


def test_hourly_follows_real_time_across_changes():
    spring = cron.ticks_between(
        "0 * * * *", BERLIN, utc(2025, 3, 29, 22, 30), utc(2025, 3, 30, 21, 30), 100
    )
    fall = cron.ticks_between(
        "0 * * * *", BERLIN, utc(2025, 10, 25, 21, 30), utc(2025, 10, 26, 22, 30), 100
    )
    assert len(spring) == 23 and len(fall) == 25
    assert all(b - a == 3600 for a, b in zip(fall, fall[1:]))


def test_ticks_between_keeps_the_last_ones_oldest_first():
    start = utc(2025, 1, 1)
    got = cron.ticks_between("0 * * * *", "UTC", start, start + 10 * 3600, 3)
    assert got == [start + 8 * 3600, start + 9 * 3600, start + 10 * 3600]


def test_ticks_between_is_half_open():
    start = utc(2025, 1, 1)
    assert cron.ticks_between("0 * * * *", "UTC", start, start + 3600, 5) == [start + 3600]
    assert cron.ticks_between("0 * * * *", "UTC", start, start, 5) == []
    assert cron.ticks_between("0 * * * *", "UTC", start + 10, start, 5) == []
