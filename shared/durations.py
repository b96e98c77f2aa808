"""Parsing of the human-written periods in ``jobq.toml``: durations (``"7d"``) and rates
(``"10/min"``). Pure functions; the config validates with them, retention and limits use them.
"""
from __future__ import annotations

import re

NEVER = "never"

_UNIT_SECONDS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")

_RATE_UNITS = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0,
               "h": 3600.0, "hr": 3600.0, "hour": 3600.0, "d": 86400.0, "day": 86400.0}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)?\s*([a-z]+)\s*$")

DURATION_EXPECTED = 'a duration like "7d", "12h", "30m", "45s" or "2w", or "never"'
RATE_EXPECTED = 'a rate like "10/min": a count per s, min, hour or day (also "5/s", "100/hour", "3/10s")'


def parse_duration(text: str) -> float | None:
    """Seconds in ``text`` (``"7d"`` -> 604800.0); None for ``"never"``.

    Raises ValueError for anything else, including negative or unit-less numbers.
    """
    if not isinstance(text, str):
        raise ValueError(f"duration must be text, got {text!r}")
    if text.strip().lower() == NEVER:
        return None
    m = _DURATION.match(text.lower())
    if m is None:
        raise ValueError(f"bad duration {text!r}: expected {DURATION_EXPECTED}")
    return float(m.group(1)) * _UNIT_SECONDS[m.group(2)]


def parse_rate(text: str) -> tuple[int, float]:
    """``"10/min"`` -> ``(10, 60.0)``: at most ``count`` starts in any ``period`` seconds.

    Raises ValueError unless the count is >= 1 and the period > 0.
    """
    m = _RATE.match(text.lower()) if isinstance(text, str) else None
    unit = _rate_unit(m.group(3)) if m else None
    if m is None or unit is None:
        raise ValueError(f"bad rate {text!r}: expected {RATE_EXPECTED}")
    count = int(m.group(1))
    period = float(m.group(2) or 1) * unit
    if count < 1 or period <= 0:
        raise ValueError(f"bad rate {text!r}: expected {RATE_EXPECTED}")
    return count, period


def _rate_unit(word: str) -> float | None:
    """Seconds of a rate's unit; plurals ("mins", "hours") too, but "ms" is not minutes."""
    if word in _RATE_UNITS:
        return _RATE_UNITS[word]
    if len(word) > 2 and word.endswith("s"):
        return _RATE_UNITS.get(word[:-1])
    return None


def is_duration(text: object) -> bool:
    try:
        parse_duration(text)  # type: ignore[arg-type]
    except ValueError:
        return False
    return True


def is_rate(text: object) -> bool:
    try:
        parse_rate(text)  # type: ignore[arg-type]
    except ValueError:
        return False
    return True
