"""The control rows operators and supervisors exchange: scale requests (``jobq scale``) and each
supervisor's published counters (for ``status``). Small rows in the ``control`` table.
"""

from __future__ import annotations

import json
from typing import Any

from shared.engines.contract import OpsStore

_UPSERT = (
    "INSERT INTO control (name, value) VALUES (:name, :value) "
    "ON CONFLICT (name) DO UPDATE SET value = excluded.value"
)
_COUNTERS = "counters:"


def request_scale(store: OpsStore, supervisor: str, workers: int) -> None:
    """Ask the supervisor with owner token ``supervisor`` to run ``workers`` workers."""
    store.write(_UPSERT, {"name": _scale_key(supervisor), "value": str(int(workers))})
    store.notify_controls("scale")  # (after the commit) the supervisor takes it at once


def pending_scale(store: OpsStore, supervisor: str) -> int | None:
    """The scale request not yet taken by ``supervisor``, or None."""
    rows = store.read(
        "SELECT value FROM control WHERE name = :name", {"name": _scale_key(supervisor)}
    )
    return int(rows[0]["value"]) if rows else None


def take_scale_request(store: OpsStore, supervisor: str) -> int | None:
    """Remove and return ``supervisor``'s scale request: a read (every maintenance round asks, and
    a read takes no write lock), then, only if one is there, one statement that takes it (two
    takers never both get it)."""
    if pending_scale(store, supervisor) is None:
        return None
    rows = store.write(
        "DELETE FROM control WHERE name = :name RETURNING value", {"name": _scale_key(supervisor)}
    )
    return int(rows[0]["value"]) if rows else None


def save_counters(store: OpsStore, supervisor: str, counters: dict[str, int]) -> None:
    """Publish a supervisor's own counters (restarts, reaped jobs ...) for ``status``; drops the
    rows of supervisors that no longer have a process row. One transaction."""

    def tx(run: Any) -> None:
        run(
            _UPSERT, {"name": _COUNTERS + supervisor, "value": json.dumps(counters, sort_keys=True)}
        )
        run(
            f"DELETE FROM control WHERE name LIKE '{_COUNTERS}%' "
            f"AND substr(name, {len(_COUNTERS) + 1}) NOT IN (SELECT id FROM processes)"
        )

    store.transaction(tx)


def supervisor_counters(store: OpsStore) -> dict[str, dict[str, int]]:
    """``{supervisor token: counters}`` as published by :func:`save_counters`."""
    out = {}
    for r in store.read(f"SELECT name, value FROM control WHERE name LIKE '{_COUNTERS}%'"):
        try:
            out[r["name"][len(_COUNTERS) :]] = json.loads(r["value"])
        except ValueError:
            continue
    return out


def _scale_key(supervisor: str) -> str:
    return f"scale:{supervisor}"
