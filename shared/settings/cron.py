"""Cron arithmetic in a time zone, on Unix timestamps: a thin layer over ``cronsim``.

cronsim (written for Healthchecks.io) parses standard 5-field expressions and reproduces
Debian cron's behaviour across daylight-saving changes, which is what cron users expect:

- a job at a fixed local time in the skipped hour (``30 2 * * *`` on a spring-forward day) runs
  once, right after the jump (03:00 local);
- a job at a fixed local time in the repeated hour (``30 1 * * *`` on a fall-back day) runs once,
  at the first occurrence;
- an expression with a wildcard minute or hour (``0 * * * *``) follows real time: it fires
  every hour, 23 times on a spring-forward day and 25 times on a fall-back day.

Every function here is pure: times come in and go out as Unix timestamps (floats); ticks are
whole seconds.

``cronsim`` and ``zoneinfo`` are imported by the functions that use them: the config module
imports this one for its ``[[schedule]]`` checks, and every supervisor, template and worker
imports the config module before its first job, most of them with no schedule to check
(``cronsim`` with ``calendar`` and ``locale``, and ``zoneinfo``: ~4 ms of each start).
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

CRON_EXPECTED = (
    'a 5-field cron expression like "0 8 * * *" (minute hour day-of-month month day-of-week)'
)
ZONE_EXPECTED = 'an IANA time zone name like "America/New_York" or "UTC"'

# Around a fall-back change cronsim may yield a local time that is, in real time, before the
# start point; such ticks are skipped. An hour holds at most 60 of them.
_MAX_SKIPPED = 120


def cron_error(expr: object) -> str | None:
    """Why ``expr`` is not a usable cron expression, or None when it is."""
    if not isinstance(expr, str) or len(expr.split()) != 5:
        return "expected 5 fields"
    from cronsim import CronSim, CronSimError  # here: see the module's docstring

    try:
        CronSim(expr, datetime(2000, 1, 1))
    except CronSimError as exc:
        return str(exc)
    return None


def zone(name: str) -> ZoneInfo:
    """The ZoneInfo for ``name``; raises ValueError for an unknown zone."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError  # here: see the module's docstring

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError) as exc:
        raise ValueError(f"unknown time zone {name!r}") from exc


def is_zone(name: object) -> bool:
    if not isinstance(name, str) or not name:
        return False
    try:
        zone(name)
    except ValueError:
        return False
    return True


def _forward(expr: str, tz: str, after: float) -> Iterator[float]:
    """Ticks strictly after ``after``, in increasing order (ends after ~50 years without one)."""
    from cronsim import CronSim

    start = datetime.fromtimestamp(math.floor(after), zone(tz))
    last, skipped = after, 0
    for dt in CronSim(expr, start):
        ts = dt.timestamp()
        if ts <= last:
            skipped += 1
            if skipped > _MAX_SKIPPED:
                return
            continue
        skipped = 0
        last = ts
        yield ts


def _backward(expr: str, tz: str, until: float) -> Iterator[float]:
    """Ticks at or before ``until``, in decreasing order (may miss one in a repeated hour:
    callers use it only to find where to start walking forward)."""
    from cronsim import CronSim

    start = datetime.fromtimestamp(math.floor(until) + 1, zone(tz))
    for dt in CronSim(expr, start, reverse=True):
        ts = dt.timestamp()
        if ts <= until:
            yield ts


def next_after(expr: str, tz: str, after: float) -> float | None:
    """The first tick strictly after ``after``, or None if there is none within ~50 years."""
    return next(_forward(expr, tz, after), None)


def ticks_between(expr: str, tz: str, after: float, until: float, keep: int) -> list[float]:
    """The last ``keep`` (>= 1) ticks ``t`` with ``after < t <= until``, oldest first.

    Cost grows with ``keep``, not with the length of the interval: a walk back from ``until``
    finds where to start, then a forward walk (which never misses a tick) collects them.
    """
    if until <= after:
        return []
    start, seen = after, 0
    for ts in _backward(expr, tz, until):
        if ts <= after:
            break
        seen += 1
        if seen >= keep + 1:  # one more than needed: the forward walk starts after it
            start = ts
            break
    out: list[float] = []
    for ts in _forward(expr, tz, start):
        if ts > until:
            break
        out.append(ts)
        if len(out) > keep:
            del out[0]
    return out
