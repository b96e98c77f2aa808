"""shared.settings.durations: the one grammar of durations and rates."""

from __future__ import annotations

import pytest

from shared.settings.durations import (
    is_duration,
    is_rate,
    parse_duration,
    parse_rate,
    parse_seconds,
)


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("90", 90.0),
        ("2.5", 2.5),
        ("0", 0.0),
        ("30s", 30.0),
        ("1h30m", 5400.0),
        ("250ms", 0.25),
        ("1.5h", 5400.0),
        ("7d", 604800.0),
        ("2w", 1209600.0),
        (" 5M ", 300.0),
        ("1m1ms", 60.001),
    ],
)
def test_parse_seconds(text, seconds):
    assert parse_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    ["", " ", "-5", "1h30", "1h 30m", "h", "5x", "nan", "inf", "1e999", "never", "30s-", "m5"],
)
def test_parse_seconds_refuses_naming_the_text(text):
    with pytest.raises(ValueError, match=repr(text).replace("+", r"\+")):
        parse_seconds(text)


def test_parse_seconds_refuses_non_strings():
    with pytest.raises(ValueError, match="is not a duration"):
        parse_seconds(30)  # type: ignore[arg-type]


def test_parse_duration_accepts_never():
    assert parse_duration("never") is None
    assert parse_duration(" Never ") is None
    assert parse_duration("12h") == 43200.0
    with pytest.raises(ValueError, match=r"'soon' is not .*or \"never\""):
        parse_duration("soon")


@pytest.mark.parametrize(
    "text, rate",
    [
        ("10/min", (10, 60.0)),
        ("5/s", (5, 1.0)),
        ("100/hour", (100, 3600.0)),
        ("3/10s", (3, 10.0)),
        ("2 / 1.5 min", (2, 90.0)),
        ("1/days", (1, 86400.0)),
        ("7/Mins", (7, 60.0)),
    ],
)
def test_parse_rate(text, rate):
    assert parse_rate(text) == rate


@pytest.mark.parametrize(
    "text", ["0/min", "10/ms", "10/0s", "10", "/min", "10/fortnight", "-1/s", "1.5/s", None]
)
def test_parse_rate_refuses_naming_the_text(text):
    with pytest.raises(ValueError, match=r"bad rate " + repr(text).replace(".", r"\.")):
        parse_rate(text)  # type: ignore[arg-type]


def test_predicates():
    assert is_duration("never") and is_duration("5m") and not is_duration("5 m")
    assert is_rate("1/s") and not is_rate("1/ms") and not is_rate(3)
