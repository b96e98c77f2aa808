"""The upkeep lead written once: of the supervisors sharing a database, one at a time runs the
cluster's upkeep (``supervisor.election``). The lead is a lease in one ``control`` row,
``upkeep_lead``, whose value is the time it was last taken or renewed (fixed-width ISO text,
written with ``dialect.lease_now``: the server's clock where many hosts share the database) and
the holder's owner token: ``<time> <token>``.

:meth:`LeadSql.lead_upkeep` takes or renews it in one guarded upsert: the row is written only
where it is ours or older than the caller's ``hold`` (judged on the same clock as it was
written), and ``RETURNING`` says whether it was. A value that is not such a time (a row written
around jobq) counts as expired. Giving the lead up deletes the row, if it is ours. ``jobq status`` reads the row
(``shared.ops``).
"""

from __future__ import annotations

from shared.runtime.clock import iso
from .base import SqlBase

LEAD = "upkeep_lead"  # the control row's name
_STAMP = 24  # characters of an ISO time as shared.runtime.clock.iso and db_now() write it
_TIME = f"substr(c.value, 1, {_STAMP})"
_TOKEN = f"substr(c.value, {_STAMP + 2})"
_IS_TIME = "c.value LIKE '____-__-__T__:__:__.___Z %'"

_TAKE = (
    "INSERT INTO control AS c (name, value) VALUES (:name, {lease} || ' ' || :token) "
    "ON CONFLICT (name) DO UPDATE SET value = excluded.value "
    f"WHERE {_TOKEN} = :token OR CASE WHEN {_IS_TIME} THEN {{age}} >= :hold ELSE 1 = 1 END "
    "RETURNING value"
)
_GIVE_UP = f"DELETE FROM control AS c WHERE name = :name AND {_TOKEN} = :token"


class LeadSql(SqlBase):
    """``lead_upkeep``."""

    def lead_upkeep(self, token: str, now: float, hold: float) -> bool:
        """Take or renew the upkeep lead for ``token`` (one guarded statement): True when it is
        ours now, i.e. it was ours, free, or not renewed for ``hold`` seconds on the engine's
        lease clock. ``hold <= 0``: give it up if ours (False)."""
        params = {"name": LEAD, "token": token, "now": iso(now), "hold": float(hold)}
        if hold <= 0:
            self._write(lambda c: self._run(c, _GIVE_UP, params))
            return False
        lease = self.dialect.lease_now
        sql = _TAKE.format(lease=self.dialect.iso(lease), age=self.dialect.between(lease, _TIME))
        return bool(self._write(lambda c: self._run(c, sql, params).fetchall()))
