"""Per type: its busiest limit keys and how many due jobs wait on a limit, for
``jobq status --types`` and the dashboard's Types page.

Read-only: the pending side is read from the keyed claim index (``jobs_key_claim``) of one type,
the running side from the running rows (few), the rate windows from the start logs.
"""

from __future__ import annotations

from typing import Any

from shared.runtime.clock import iso
from shared.engines.contract import OpsStore
from shared.model.limits import TypeLimit, type_limits

_DUE_BY_KEY = (
    "SELECT limit_key, count(*) AS n FROM jobs WHERE type = :type AND status = 'pending' "
    "AND limit_key IS NOT NULL AND run_at <= :now GROUP BY limit_key"
)
_RUNNING_BY_KEY = (
    "SELECT limit_key, count(*) AS n FROM jobs WHERE status = 'running' AND type = :type "
    "AND limit_key IS NOT NULL GROUP BY limit_key"
)
_DUE = "SELECT count(*) AS n FROM jobs WHERE type = :type AND status = 'pending' AND run_at <= :now"
_RUNNING = "SELECT count(*) AS n FROM jobs WHERE status = 'running' AND type = :type"
_KEY_STARTS = (
    "SELECT limit_key, count(*) AS n FROM key_starts WHERE type = :type AND started_at > :since "
    "GROUP BY limit_key"
)
_TYPE_STARTS = "SELECT count(*) AS n FROM type_starts WHERE type = :type AND started_at > :since"


def type_keys(store: OpsStore, config: Any, now: float, top: int = 5) -> list[dict[str, Any]]:
    """Per type with a limit: ``{type, running, due, waiting, busiest: [{key, running, due}]}``;
    ``waiting``: due jobs held back by the type's limit, or by their key's."""
    return [_type_row(store, t, lim, now, top) for t, lim in sorted(type_limits(config).items())]


def _type_row(store: OpsStore, t: str, lim: TypeLimit, now: float, top: int) -> dict[str, Any]:
    """The row of :func:`type_keys` of the type ``t``, whose limit is ``lim``."""
    p = {"type": t, "now": iso(now)}
    due, running, used = _per_key(store, lim, p, now)
    all_due = int(store.read(_DUE, p)[0]["n"])
    all_running = int(store.read(_RUNNING, p)[0]["n"])
    if _type_full(store, lim, all_running, now):
        waiting = all_due
    else:
        waiting = sum(
            n for k, n in due.items() if _key_full(lim, running.get(k, 0), used.get(k, 0))
        )
    keys = sorted(set(due) | set(running), key=lambda k: (-(running.get(k, 0) + due.get(k, 0)), k))[
        :top
    ]
    return {
        "type": t,
        "running": all_running,
        "due": all_due,
        "waiting": waiting,
        "busiest": [{"key": k, "running": running.get(k, 0), "due": due.get(k, 0)} for k in keys],
    }


def _per_key(
    store: OpsStore, lim: TypeLimit, p: dict[str, Any], now: float
) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """Per limit key of the type: its due jobs, its running jobs, and its starts in the
    per-key rate's window (each empty where the limit has no keys, or no per-key rate)."""
    due = {r["limit_key"]: int(r["n"]) for r in store.read(_DUE_BY_KEY, p)} if lim.keyed else {}
    running = (
        {r["limit_key"]: int(r["n"]) for r in store.read(_RUNNING_BY_KEY, p)} if lim.keyed else {}
    )
    used = (
        {
            r["limit_key"]: int(r["n"])
            for r in store.read(_KEY_STARTS, {**p, "since": iso(now - lim.rate_per_key[1])})
        }
        if lim.rate_per_key
        else {}
    )
    return due, running, used


def _type_full(store: OpsStore, lim: TypeLimit, running: int, now: float) -> bool:
    if lim.concurrency is not None and running >= lim.concurrency:
        return True
    if lim.rate is not None:
        used = store.read(_TYPE_STARTS, {"type": lim.type, "since": iso(now - lim.rate[1])})[0]["n"]
        return int(used) >= lim.rate[0]
    return False


def _key_full(lim: TypeLimit, running: int, used: int) -> bool:
    return (lim.concurrency_per_key is not None and running >= lim.concurrency_per_key) or (
        lim.rate_per_key is not None and used >= lim.rate_per_key[0]
    )
