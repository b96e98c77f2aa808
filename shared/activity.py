"""Reads of what happened recently (issue 15): attempts per minute from ``job_attempts`` and the
use of a type's rate window, for ``status``, ``top`` and the dashboard.

Each follows an index (the attempt sequence, ``type_starts_by_type``), so its cost is the
window's rows, not the table's. Same contract as :mod:`shared.admin`: reads only, ``now`` and
times from the caller. Its SQL is still the SQLite engine's (it reads ``store.conn``): the
next engine moves it behind the ops protocol.
"""
from __future__ import annotations

from typing import Any

from .clock import iso


def finished_per_minute(store: Any, since: float) -> list[dict[str, Any]]:
    """Rows ``{minute, status, n}`` (``YYYY-MM-DDTHH:MM``): attempts that ended at or after
    ``since`` per minute, by status: ``completed``, ``failed`` (for good) and ``retried``.

    Read from ``job_attempts`` from the first attempt of the window on (found by
    :func:`first_attempt_since`), so the cost follows the attempts in the window, not the table.
    """
    start = first_attempt_since(store, since)
    return store.conn.execute(
        "SELECT substr(ended_at, 1, 16) AS minute, "
        "CASE outcome WHEN 'retry' THEN 'retried' ELSE outcome END AS status, count(*) AS n "
        "FROM job_attempts WHERE seq >= ? AND ended_at >= ? GROUP BY minute, status ORDER BY minute",
        (start, iso(since))).fetchall()


def attempts_by_minute(store: Any, after: int, upto: int) -> list[dict[str, Any]]:
    """Rows ``{minute, status, n}`` like :func:`finished_per_minute`, over the attempts with
    ``after < seq <= upto`` (for a reader that follows the table: the dashboard's chart)."""
    return store.conn.execute(
        "SELECT substr(ended_at, 1, 16) AS minute, "
        "CASE outcome WHEN 'retry' THEN 'retried' ELSE outcome END AS status, count(*) AS n "
        "FROM job_attempts WHERE seq > ? AND seq <= ? GROUP BY minute, status", (after, upto)).fetchall()


def first_attempt_since(store: Any, since: float) -> int:
    """The lowest ``job_attempts.seq`` whose attempt ended at or after ``since`` (a binary search
    over the primary key: ``ended_at`` grows with ``seq`` up to clock skew between writers);
    one past the last seq when none did."""
    stamp = iso(since)
    # two statements: min and max together defeat SQLite's min/max shortcut (it would scan)
    lo = store.conn.execute("SELECT coalesce(min(seq), 1) AS s FROM job_attempts").fetchone()["s"]
    hi = store.conn.execute("SELECT coalesce(max(seq), 0) AS s FROM job_attempts").fetchone()["s"] + 1
    probe = "SELECT seq, ended_at FROM job_attempts WHERE seq >= ? ORDER BY seq LIMIT 1"
    while lo < hi:
        mid = (lo + hi) // 2
        r = store.conn.execute(probe, (mid,)).fetchone()
        if r is None or r["ended_at"] >= stamp:
            hi = mid
        else:
            lo = r["seq"] + 1
    return lo


def rate_window_use(store: Any, job_type: str, since: float) -> int:
    """Claims of ``job_type`` recorded in its rate window (``type_starts``) since ``since``."""
    return store.conn.execute("SELECT count(*) AS n FROM type_starts WHERE type = ? AND started_at > ?",
                              (job_type, iso(since))).fetchone()["n"]
