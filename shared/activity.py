"""Reads of what happened recently (issue 15): attempts per minute from ``job_attempts`` and the
use of a type's rate window, for ``status``, ``top`` and the dashboard.

Each follows an index (the attempt sequence, ``type_starts_by_type``), so its cost is the
window's rows, not the table's. Same contract as :mod:`shared.admin`: reads only, ``now`` and
times from the caller. The SQL is the engine's (the "activity" group of ``OpsStore``); the
search for a window's first attempt is here, on the engine's two indexed probes.
"""
from __future__ import annotations

from typing import Any

from .clock import iso
from .contract import OpsStore


def finished_per_minute(store: OpsStore, since: float) -> list[dict[str, Any]]:
    """Rows ``{minute, status, n}`` (``YYYY-MM-DDTHH:MM``): attempts that ended at or after
    ``since`` per minute, by status: ``completed``, ``failed`` (for good) and ``retried``.

    Read from ``job_attempts`` from the first attempt of the window on (found by
    :func:`first_attempt_since`), so the cost follows the attempts in the window, not the table.
    """
    return store.attempts_per_minute(first_attempt_since(store, since) - 1, since=since)


def attempts_by_minute(store: OpsStore, after: int, upto: int) -> list[dict[str, Any]]:
    """Rows ``{minute, status, n}`` like :func:`finished_per_minute`, over the attempts with
    ``after < seq <= upto`` (for a reader that follows the table: the dashboard's chart)."""
    return store.attempts_per_minute(after, upto)


def first_attempt_since(store: OpsStore, since: float) -> int:
    """The lowest ``job_attempts.seq`` whose attempt ended at or after ``since`` (a binary search
    over the primary key: ``ended_at`` grows with ``seq`` up to clock skew between writers);
    one past the last seq when none did."""
    stamp = iso(since)
    lo, hi = store.attempt_seq_bounds()
    hi += 1
    while lo < hi:
        mid = (lo + hi) // 2
        r = store.attempt_from(mid)
        if r is None or r["ended_at"] >= stamp:
            hi = mid
        else:
            lo = r["seq"] + 1
    return lo


def rate_window_use(store: OpsStore, job_type: str, since: float) -> int:
    """Claims of ``job_type`` recorded in its rate window (``type_starts``) since ``since``."""
    return store.rate_window_use(job_type, since)
