"""Parsing of the human-written periods of the command line and of ``jobq.toml``: durations
(``"90"``, ``"30s"``, ``"1h30m"``, ``"7d"``) and rates (``"10/min"``). Pure functions; the CLI
(``--delay``, ``--older-than``), the config (``[retention]``), retention and limits all use them,
so one grammar holds everywhere.

The duration grammar: a bare number of seconds (``"90"``, ``"2.5"``), or one or more
``<number><unit>`` parts with no spaces between them, units ``ms s m h d w`` (``"1h30m"``,
``"250ms"``, ``"1.5h"``); case and surrounding spaces are ignored. Config keys that may be
``"never"`` accept that word too (``parse_duration``).
"""

from __future__ import annotations

import math
import re

NEVER = "never"

_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")

_RATE_UNITS = {
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "m": 60.0,
    "min": 60.0,
    "minute": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "hour": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)?\s*([a-z]+)\s*$")

SECONDS_EXPECTED = (
    'a duration like "30s", "5m", "1h30m", "7d", "2w" or "250ms" (a bare number is seconds)'
)
DURATION_EXPECTED = (
    'a duration like "7d", "12h", "1h30m", "45s" or "2w" (a bare number is seconds), or "never"'
)
RATE_EXPECTED = (
    'a rate like "10/min": a count per s, min, hour or day (also "5/s", "100/hour", "3/10s")'
)


def parse_seconds(text: str) -> float:
    """Seconds in ``text``: ``"90"`` -> 90.0, ``"1h30m"`` -> 5400.0, ``"250ms"`` -> 0.25.

    Raises ValueError (``"'x' is not a duration like ..."``) for anything else, including
    negative, unit-less parts after a unit (``"1h30"``), spaces inside, nan and inf.
    """
    if not isinstance(text, str):
        raise ValueError(f"{text!r} is not {SECONDS_EXPECTED}")
    s = text.strip().lower()
    try:
        value = float(s)
    except ValueError:
        pos, value = 0, 0.0
        for m in _PART.finditer(s):
            if m.start() != pos:
                break
            value += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
            pos = m.end()
        if pos != len(s) or not s:
            raise ValueError(f"{text!r} is not {SECONDS_EXPECTED}") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{text!r} is not {SECONDS_EXPECTED}")
    return value


def parse_duration(text: str) -> float | None:
    """Like ``parse_seconds``, and None for ``"never"`` (``[retention]`` keys)."""
    if isinstance(text, str) and text.strip().lower() == NEVER:
        return None
    try:
        return parse_seconds(text)
    except ValueError:
        raise ValueError(f"{text!r} is not {DURATION_EXPECTED}") from None


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
