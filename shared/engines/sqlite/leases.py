"""The SQLite engine's leases: the heartbeat (hot path: its SQL is this engine's own), the
ages of leases and process rows, and the running jobs summed up per owner and type.

:class:`SqliteLeases` is a mixin of :class:`.store.SqliteStore` (it uses ``conn`` and
``_immediate``). Times here come from the callers' clocks, which on one host are one clock.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Callable, Iterable, Sequence

from shared.runtime.clock import iso, parse_iso
from shared.model.job import RunningGroup
from ..sql import GIVEN_BACK, RELEASE

_HELD = "(SELECT value FROM json_each(?))"  # the ids a worker holds, as one JSON array
_RENEW = "UPDATE jobs SET heartbeat_at = ? WHERE status = 'running' AND owner = ?"
# claimed but not held (the claim's answer was lost, never started): pending, due now, attempt back
_GROUPS = (
    "SELECT owner, type, count(*) AS jobs, min(started_at) AS first_start, min(heartbeat_at) AS oldest, "
    "max(heartbeat_at) AS newest, count(cancel_requested_at) AS cancels "
    "FROM jobs WHERE status = 'running' GROUP BY owner, type"
)
_GIVE_BACK = (
    "UPDATE jobs SET "
    + GIVEN_BACK
    + "attempts = attempts - 1, run_at = ?, updated_at = ?, "
    + RELEASE
    + f"WHERE status = 'running' AND owner = ? AND id NOT IN {_HELD}"
)


class SqliteLeases:
    """``heartbeat``, ``lease_ages``, ``running_groups`` and ``process_ages``."""

    conn: sqlite3.Connection
    _immediate: Callable[..., Any]

    def heartbeat(
        self, owner: str, now: float | Callable[[], float], holding: Sequence[str] | None = None
    ) -> int:
        """Refresh the lease of the running jobs of ``owner`` in ``holding`` (None: every one)
        and its process row, in one transaction; with ``holding`` the owner's other running jobs
        are given back (see the contract). Returns the renewed job count.

        ``now`` may be a clock function: it is then read once the write lock is held, so a beat
        that waited for the lock does not record a lease older than it is."""

        def tx(c: sqlite3.Connection) -> int:
            stamp = iso(now() if callable(now) else now)
            if holding is None:
                n = c.execute(_RENEW, (stamp, owner)).rowcount
            else:
                held = json.dumps(list(holding))
                c.execute(_GIVE_BACK, (stamp, stamp, owner, held))
                n = c.execute(f"{_RENEW} AND id IN {_HELD}", (stamp, owner, held)).rowcount
            c.execute("UPDATE processes SET heartbeat_at = ? WHERE id = ?", (stamp, owner))
            return n

        return self._immediate(tx)

    def lease_ages(self, now: float) -> dict[str, float]:
        """Seconds since each running job's lease was renewed: ``now - heartbeat_at``."""
        rows = self.conn.execute(
            "SELECT id, heartbeat_at AS t FROM jobs WHERE status = 'running'"
        ).fetchall()
        return _ages(rows, now)

    def running_groups(self, now: float) -> list[RunningGroup]:
        """The running jobs per owner and type (see the contract); a lease time that is not a
        time among the oldest and newest of its group gives ``inf``: the supervisor looks."""
        out = []
        for r in self.conn.execute(_GROUPS).fetchall():
            ages = _ages(
                [{"id": k, "t": r[k]} for k in ("oldest", "newest") if r[k] is not None], now
            )
            odd = len(ages) < (r["oldest"] is not None) + (r["newest"] is not None)
            oldest = float("inf") if odd else ages.get("oldest")
            out.append(
                RunningGroup(
                    r["owner"], r["type"], r["jobs"], r["first_start"], oldest, r["cancels"]
                )
            )
        return out

    def process_ages(self, now: float) -> dict[str, float]:
        """Seconds since each process row was refreshed: ``now - heartbeat_at``."""
        return _ages(
            self.conn.execute("SELECT id, heartbeat_at AS t FROM processes").fetchall(), now
        )


def _ages(rows: Iterable[Any], now: float) -> dict[str, float]:
    """``{id: now - t}`` of rows with an ``id`` and a time ``t``; rows whose time is missing or
    not a time (written around jobq) are left out: they are judged some other way."""
    out = {}
    for r in rows:
        try:
            out[r["id"]] = now - parse_iso(r["t"])
        except (AttributeError, TypeError, ValueError):
            continue
    return out
