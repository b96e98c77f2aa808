"""The PostgreSQL engine's leases: the heartbeat (hot path: one statement of this engine's own)
and lease and process-row ages on the server's clock
(``shared.engines.contract.UpkeepStore.lease_ages`` and ``process_ages``).

``heartbeat_at`` is written by the server (``db_now()``: ``statement_timestamp()`` to the
millisecond), so its age is the server's statement time minus it: one clock for every host,
whatever their own clocks say. The caller's ``now`` is not used. (The column is a
``timestamptz``: a row written around jobq holds a time or none, which is left out.)
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from shared.runtime.clock import iso
from shared.model.job import RunningGroup
from ..sql import GIVEN_BACK, RELEASE

# One statement: the process row and the held jobs' leases renewed on the server's clock; the
# owner's other running jobs (claimed, answer lost: never started) pending again, due now,
# their attempt given back, idle workers notified. ``held`` NULL: renew every running job.
_BEAT = (
    "WITH p AS (UPDATE processes SET heartbeat_at = db_now() WHERE id = %(o)s), "
    "r AS (UPDATE jobs SET " + GIVEN_BACK + "attempts = attempts - 1, run_at = %(now)s, "
    "updated_at = %(now)s, " + RELEASE + "WHERE status = 'running' AND owner = %(o)s "
    "AND id <> ALL(%(held)s::uuid[]) RETURNING 1), "
    "u AS (UPDATE jobs SET heartbeat_at = db_now() WHERE status = 'running' AND owner = %(o)s "
    "AND (%(held)s::uuid[] IS NULL OR id = ANY(%(held)s::uuid[])) RETURNING 1) "
    "SELECT (SELECT count(*) FROM u) AS renewed, "
    "(SELECT count(*) FROM (SELECT pg_notify(%(channel)s, '') FROM r LIMIT 1) n) AS notified"
)

_AGE = "extract(epoch FROM statement_timestamp() - heartbeat_at)::float8"


def _ages_sql(table: str, where: str) -> str:
    """Ages of the rows' leases; a row without one (written around jobq) is left out."""
    return f"SELECT id, {_AGE} AS age FROM {table} WHERE heartbeat_at IS NOT NULL{where}"


_LEASE_AGES = _ages_sql("jobs", " AND status = 'running'")
_PROCESS_AGES = _ages_sql("processes", "")
# The oldest lease is the least heartbeat_at, aged once per group, not per row.
_GROUPS = (
    "SELECT owner, type, jobs, first_start, cancels, "
    f"CASE WHEN heartbeat_at IS NULL THEN NULL ELSE {_AGE} END AS oldest "
    "FROM (SELECT owner, type, count(*) AS jobs, min(started_at) AS first_start, "
    "min(heartbeat_at) AS heartbeat_at, count(cancel_requested_at) AS cancels "
    "FROM jobs WHERE status = 'running' GROUP BY owner, type) g"
)


class PgLeases:
    """Mixin of :class:`.store.PgStore` (uses ``self.conn`` and ``self.channel``)."""

    conn: Any
    channel: str

    def heartbeat(
        self, owner: str, now: float | Callable[[], float], holding: Sequence[str] | None = None
    ) -> int:
        """Renew the leases of the running jobs of ``owner`` in ``holding`` and its process row,
        on the server's clock (hosts' clocks may disagree), in one statement; with ``holding``
        the owner's other running jobs are given back (see the contract). Renewed job count."""
        stamp = iso(now() if callable(now) else now)
        held = None if holding is None else list(holding)
        row = self.conn.execute(
            _BEAT, {"o": owner, "now": stamp, "held": held, "channel": self.channel}
        )
        return row.fetchone()["renewed"]

    def lease_ages(self, now: float) -> dict[str, float]:
        """Job id -> seconds since each running job's lease was renewed, on the server's clock."""
        return {r["id"]: float(r["age"]) for r in self.conn.execute(_LEASE_AGES).fetchall()}

    def running_groups(self, now: float) -> list[RunningGroup]:
        """The running jobs per owner and type, lease ages on the server's clock (the oldest
        lease's; None where the group has no lease time, rows written around jobq)."""
        return [
            RunningGroup(
                r["owner"], r["type"], r["jobs"], r["first_start"], r["oldest"], r["cancels"]
            )
            for r in self.conn.execute(_GROUPS).fetchall()
        ]

    def process_ages(self, now: float) -> dict[str, float]:
        """Process token -> seconds since its row was refreshed, on the server's clock."""
        return {r["id"]: float(r["age"]) for r in self.conn.execute(_PROCESS_AGES).fetchall()}
