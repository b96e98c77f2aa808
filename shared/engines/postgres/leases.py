"""Lease and process-row ages on the server's clock (``shared.contract.UpkeepStore.lease_ages``
and ``process_ages``).

``heartbeat_at`` is written by the server (``db_now()``: ``statement_timestamp()`` as ISO text),
so its age is the server's statement time minus it: one clock for every host, whatever their
own clocks say. The caller's ``now`` is not used. A value that is not such a time (a row
written around jobq) is left out instead of failing the cast for every row.
"""
from __future__ import annotations

from typing import Any

# ISO-8601 UTC as db_now() and shared.clock.iso write it; anything else is not cast
_ISO = r"'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)$'"

_AGE = ("extract(epoch FROM statement_timestamp() - heartbeat_at::timestamptz)::float8")


def _ages_sql(table: str, where: str) -> str:
    return (f"SELECT id, age FROM (SELECT id, CASE WHEN heartbeat_at ~ {_ISO} THEN {_AGE} END AS age "
            f"FROM {table} {where}) a WHERE age IS NOT NULL")


_LEASE_AGES = _ages_sql("jobs", "WHERE status = 'running'")
_PROCESS_AGES = _ages_sql("processes", "")


class PgLeases:
    """Mixin of :class:`.store.PgStore` (uses ``self.conn``)."""

    conn: Any

    def lease_ages(self, now: float) -> dict[str, float]:
        """Job id -> seconds since each running job's lease was renewed, on the server's clock."""
        return {r["id"]: float(r["age"]) for r in self.conn.execute(_LEASE_AGES).fetchall()}

    def process_ages(self, now: float) -> dict[str, float]:
        """Process token -> seconds since its row was refreshed, on the server's clock."""
        return {r["id"]: float(r["age"]) for r in self.conn.execute(_PROCESS_AGES).fetchall()}
