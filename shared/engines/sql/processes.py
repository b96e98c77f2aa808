"""The process registry written once: every supervisor and worker keeps a ``processes`` row,
refreshed as it beats, so every host sees who is alive (``shared.engines.contract`` Worker and
Upkeep parts). The row's ``heartbeat_at`` is a lease: written with ``dialect.lease_now`` (the
server's clock where many hosts share the database)."""

from __future__ import annotations

from typing import Any

from shared.runtime.clock import iso
from .base import SqlBase

_REGISTER = (
    "INSERT INTO processes (id, kind, pid, host, slot, parent, started_at, heartbeat_at) "
    "VALUES (:id, :kind, :pid, :host, :slot, :parent, :now, {lease}) ON CONFLICT (id) DO UPDATE SET "
    "kind = excluded.kind, pid = excluded.pid, host = excluded.host, slot = excluded.slot, "
    "parent = excluded.parent, started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at"
)
# The supervisor's row and its children's: an idle worker need not beat for its row (its own
# beats are then rare: worker.heartbeat.SUPERVISED_IDLE_BEAT).
_TOUCH = "UPDATE processes SET heartbeat_at = {lease} WHERE id = :id OR parent = :id"
_REMOVE = "DELETE FROM processes WHERE id = :id"
_ALL = "SELECT * FROM processes ORDER BY kind, slot"
_OF_KIND = "SELECT * FROM processes WHERE kind = :kind ORDER BY slot"


class ProcessesSql(SqlBase):
    """``register_process``, ``touch_process``, ``remove_process``, ``processes``."""

    def register_process(
        self,
        token: str,
        kind: str,
        pid: int,
        host: str,
        now: float,
        *,
        slot: int | None = None,
        parent: str | None = None,
    ) -> None:
        """Insert or replace the row of process ``token``, its lease renewed (one statement)."""
        params = {
            "id": token,
            "kind": kind,
            "pid": pid,
            "host": host,
            "slot": slot,
            "parent": parent,
            "now": iso(now),
        }
        sql = _REGISTER.format(lease=self.dialect.lease_now)
        self._write(lambda c: self._run(c, sql, params))

    def touch_process(self, token: str, now: float) -> None:
        """Renew the lease of process ``token``'s row and of its children's rows (``parent``
        ``token``: a supervisor's workers), one statement; no row: nothing."""
        sql = _TOUCH.format(lease=self.dialect.lease_now)
        self._write(lambda c: self._run(c, sql, {"id": token, "now": iso(now)}))

    def remove_process(self, token: str) -> None:
        """Delete the row of process ``token`` (one statement)."""
        self._write(lambda c: self._run(c, _REMOVE, {"id": token}))

    def processes(self, kind: str | None = None) -> list[dict[str, Any]]:
        """Every process row (only ``kind``'s when given), by kind and slot."""
        return self._rows(_ALL) if kind is None else self._rows(_OF_KIND, {"kind": kind})
