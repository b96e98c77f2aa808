"""Reads of what happened recently: attempts per minute from ``job_attempts`` and the
use of a type's rate window, for ``status``, ``top`` and the dashboard.

Each follows an index (the attempt sequence, ``type_starts_by_type``), so its cost is the
window's rows, not the table's: reads only, ``now`` and times from the caller. The search for a
window's first attempt is a binary search over two indexed probes.
"""

from __future__ import annotations

from typing import Any

from shared.runtime.clock import iso
from shared.engines.contract import OpsStore

_PER_MINUTE = (
    "SELECT substr({ended}, 1, 16) AS minute, "
    "CASE outcome WHEN 'retry' THEN 'retried' ELSE outcome END AS status, count(*) AS n "
    "FROM job_attempts WHERE seq > :after"
)


def finished_per_minute(store: OpsStore, since: float) -> list[dict[str, Any]]:
    """Rows ``{minute, status, n}`` (``YYYY-MM-DDTHH:MM``): attempts that ended at or after
    ``since`` per minute, by status: ``completed``, ``failed`` (for good) and ``retried``.

    Read from ``job_attempts`` from the first attempt of the window on (found by
    :func:`first_attempt_since`), so the cost follows the attempts in the window, not the table.
    """
    return attempts_per_minute(store, first_attempt_since(store, since) - 1, since=since)


def attempts_by_minute(store: OpsStore, after: int, upto: int) -> list[dict[str, Any]]:
    """Rows ``{minute, status, n}`` like :func:`finished_per_minute`, over the attempts with
    ``after < seq <= upto`` (for a reader that follows the table: the dashboard's chart)."""
    return attempts_per_minute(store, after, upto)


def attempts_per_minute(
    store: OpsStore, after: int, upto: int | None = None, since: float | None = None
) -> list[dict[str, Any]]:
    """Rows ``{minute, status, n}`` (``minute``: ``YYYY-MM-DDTHH:MM`` of ``ended_at``; ``status``:
    ``completed``, ``failed``, ``cancelled`` or ``retried``) counting the attempts with
    ``after < seq`` (``seq <= upto`` when given) that ended at or after ``since`` (when given);
    ordered by minute, then status. A range of ``job_attempts``' primary key."""
    sql = (
        _PER_MINUTE.format(ended=store.dialect.iso("ended_at"))
        + ("" if upto is None else " AND seq <= :upto")
        + ("" if since is None else " AND ended_at >= :since")
    )
    return store.read(
        sql + " GROUP BY minute, status ORDER BY minute, status",
        {"after": after, "upto": upto, "since": None if since is None else iso(since)},
    )


def first_attempt_since(store: OpsStore, since: float) -> int:
    """The lowest ``job_attempts.seq`` whose attempt ended at or after ``since`` (a binary search
    over the primary key: ``ended_at`` grows with ``seq`` up to clock skew between writers);
    one past the last seq when none did."""
    stamp = iso(since)
    lo, hi = attempt_seq_bounds(store)
    hi += 1
    while lo < hi:
        mid = (lo + hi) // 2
        r = attempt_from(store, mid)
        if r is None or r["ended_at"] >= stamp:
            hi = mid
        else:
            lo = r["seq"] + 1
    return lo


def attempt_seq_bounds(store: OpsStore) -> tuple[int, int]:
    """``(lowest, highest)`` ``seq`` in ``job_attempts``; ``(1, 0)`` when it is empty."""
    # two statements: min and max together defeat an engine's min/max shortcut (it would scan)
    lo = store.read("SELECT min(seq) AS s FROM job_attempts")[0]["s"]
    hi = store.read("SELECT max(seq) AS s FROM job_attempts")[0]["s"]
    return (1, 0) if lo is None else (lo, hi)


def attempt_from(store: OpsStore, seq: int) -> dict[str, Any] | None:
    """``{seq, ended_at}`` of the attempt with the lowest ``seq`` at or above ``seq``, or None."""
    rows = store.read(
        "SELECT seq, ended_at FROM job_attempts WHERE seq >= :seq ORDER BY seq LIMIT 1",
        {"seq": seq},
    )
    return rows[0] if rows else None


def rate_window_use(store: OpsStore, job_type: str, since: float) -> int:
    """Claims of ``job_type`` recorded in its rate window (``type_starts``) after ``since``
    (index ``type_starts_by_type``)."""
    return int(
        store.read(
            "SELECT count(*) AS n FROM type_starts WHERE type = :type AND started_at > :since",
            {"type": job_type, "since": iso(since)},
        )[0]["n"]
    )
