"""Injected time.

Everything in jobq that needs "now" takes a clock object, so tests drive backoff, leases and
schedules without sleeping. Timestamps stored in the database are ISO-8601 UTC text with
milliseconds (``2026-11-30T14:01:29.123Z``): fixed width, so ordering by text is ordering by time.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

from shared.model.bounds import MAX_TIME, MIN_TIME


class SystemClock:
    """Wall-clock time (``now``) and a monotonic clock for measuring intervals."""

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


class FakeClock:
    """A clock that only moves when told to. ``now`` and ``monotonic`` advance together."""

    def __init__(self, start: float = 1_767_225_600.0) -> None:  # 2026-01-01T00:00:00Z
        self._now = float(start)

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        self._now += seconds
        return self._now

    def set(self, ts: float) -> None:
        self._now = float(ts)


def iso(ts: float) -> str:
    """Format a Unix timestamp as fixed-width ISO-8601 UTC text with milliseconds.

    Raises ValueError for a time outside the years 1 to 9999 (NaN, infinite, too large): its
    text would not be fixed-width, or not exist."""
    if not MIN_TIME <= ts < MAX_TIME + 0.9995:
        raise ValueError(f"time {ts!r} is outside the years 1 to 9999")
    ms = int(round(ts * 1000))
    secs, milli = divmod(ms, 1000)
    t = time.gmtime(secs)
    return "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ" % (
        t.tm_year,
        t.tm_mon,
        t.tm_mday,
        t.tm_hour,
        t.tm_min,
        t.tm_sec,
        milli,
    )


class IsoTimes:
    """:func:`iso` for many times close together (a batch's runs, one commit's outcomes): the
    text of each second is made once, the milliseconds added to it. The same text as
    :func:`iso`, and the same ValueError."""

    def __init__(self) -> None:
        self.second: int | None = None
        self.head = ""

    def __call__(self, ts: float) -> str:
        if not MIN_TIME <= ts < MAX_TIME + 0.9995:
            return iso(ts)  # raises
        secs, milli = divmod(int(round(ts * 1000)), 1000)
        if secs != self.second:
            self.head, self.second = iso(secs)[:-4], secs  # "YYYY-MM-DDTHH:MM:SS."
        return f"{self.head}{milli:03d}Z"


def parse_iso(text: str) -> float:
    """Inverse of :func:`iso`; also accepts any ISO-8601 text with a timezone."""
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no timezone")
    return dt.timestamp()


def to_timestamp(value: datetime | float | int | str) -> float:
    """Convert a user-supplied ``run_at`` to a Unix timestamp; naive datetimes are refused."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
            raise ValueError(f"run_at {value!r} has no timezone; pass an aware datetime")
        return value.astimezone(timezone.utc).timestamp()
    if isinstance(value, str):
        return parse_iso(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            raise ValueError(f"run_at {value!r} is outside the years 1 to 9999") from None
    raise TypeError(
        f"run_at must be a datetime, ISO-8601 text or Unix timestamp, not {type(value).__name__}"
    )
