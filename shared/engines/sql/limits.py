"""Per-type limits written once (issue 6): the claim used while some type has a
``concurrency`` or ``rate`` limit (``shared.contract.UpkeepStore.claim_limited``).

Types at their limit are skipped, not waited for: other types keep flowing. The fast,
unlimited claim (each engine's own) is untouched, and no index is added to ``jobs``. Limited
claims take turns: an engine with one write lock serializes them already; elsewhere
``dialect.limits_lock`` (a transaction-level advisory lock on a key of the engine's namespace)
does, so each one counts running jobs and recent starts with every earlier one committed.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ...clock import iso, parse_iso
from ...job import Job
from ...limits import pick_claims
from .base import SqlBase
from .jobs import CLAIM_ORDER
from .keys import ROW, KeyCounts, KeysSql
from .queues import QUEUE_FREE, QueueServing

if TYPE_CHECKING:
    from ...limits import TypeLimit

CANDIDATES_PER_SLOT = 4   # candidates read per job wanted, for batches that fill a type's room

PAUSED = "SELECT 1 AS paused FROM control WHERE name = 'paused' AND value = '1'"
_LATEST_START = ("SELECT max(t) AS t FROM (SELECT max(started_at) AS t FROM type_starts "
                 "UNION ALL SELECT max(started_at) AS t FROM key_starts) s")
# Only running rows are read (``dialect.jobs_running`` names the index where it must).
RUNNING_BY_TYPE = "SELECT type, count(*) AS n FROM {jobs} WHERE status = 'running' GROUP BY type"
# The claim order and index of the plain claim; types with no room are filtered out.
# A paused queue's jobs are skipped (QUEUE_FREE); a pool's worker takes only its queues' (_candidates).
CANDIDATES = (f"SELECT {ROW} FROM jobs WHERE status = 'pending' AND run_at <= :now AND {QUEUE_FREE} "
              f"{{skip}}{CLAIM_ORDER} LIMIT :n")
# started_at/updated_at: the caller's clock; the lease: ``dialect.lease_now``.
_CLAIM_IDS = ("UPDATE jobs SET status = 'running', attempts = attempts + 1, owner = :owner, owner_pid = :pid, "
              "started_at = :now, heartbeat_at = {lease}, updated_at = :now "
              "WHERE {ids} AND status = 'pending' RETURNING *")
_FORGET = "DELETE FROM type_starts WHERE type = :type AND started_at <= :since"
_USED = "SELECT count(*) AS n FROM type_starts WHERE type = :type"
_START = "INSERT INTO type_starts (type, started_at) VALUES (:type, :now)"


class LimitsSql(KeysSql, QueueServing):
    """``claim_limited`` and ``claim_limited_in`` (the latter for a batch's transaction)."""

    def claim_limited(self, owner: str, owner_pid: int, now: float, limits: Mapping[str, "TypeLimit"],
                      limit: int = 1, *, types: Sequence[str] | None = None,
                      ids: Sequence[str] | None = None) -> list[Job]:
        """Like ``claim``, but never past a type's ``concurrency`` or ``rate`` (across every
        process and host on the database), in one transaction. See :meth:`claim_limited_in`."""
        return self._tx(lambda c: self.claim_limited_in(c, owner, owner_pid, now, limits, limit,
                                                        types=types, ids=ids))

    def claim_limited_in(self, c: Any, owner: str, owner_pid: int, now: float,
                         limits: Mapping[str, "TypeLimit"], limit: int = 1, *,
                         types: Sequence[str] | None = None, ids: Sequence[str] | None = None) -> list[Job]:
        """The limited claim, inside the caller's transaction on ``c``.

        Takes up to ``limit`` due pending jobs in claim order (priority, then first due, then
        first created), skipping the types with no room: ``running < concurrency`` and fewer
        than ``count`` claims in the last ``period`` seconds; the same per key, and a fair type's
        keyed jobs by turns of their keys (:mod:`.keys`). A held-back job stays pending and
        blocks nothing else. A job of a rate-limited type is only ever claimed first in a batch
        and ends it, so it starts at once: its start is counted now (in ``type_starts``).
        Returns nothing while the queue is paused. Cost: the plain claim's index walk, plus the
        held-back jobs it steps over. ``types`` and ``ids`` (the in-process runner of
        :mod:`shared.inline`) take only jobs of those types or with those ids.
        """
        if limit < 1:
            return []
        if self.dialect.limits_lock:
            self._run(c, self.dialect.limits_lock, {"key": f"jobq.limits.{self.schema}"})
        if self._run(c, PAUSED).fetchone():
            return []
        # ``now`` was read before this transaction won the lock: a claim that committed in the
        # meantime may carry a later time. Never count with an earlier one, or this claim would
        # see (and delete) the window as of a moment before starts it must count.
        latest = self._run(c, _LATEST_START).fetchone()["t"]
        if latest is not None:
            now = max(now, parse_iso(latest))
        stamp = iso(now)
        running = {r["type"]: r["n"] for r in
                   self._run(c, RUNNING_BY_TYPE.format(jobs=self.dialect.jobs_running)).fetchall()}
        room = {t: self._room(c, lim, running.get(t, 0), now) for t, lim in limits.items()}
        rated = {t for t, lim in limits.items() if lim.rate or lim.rate_per_key}
        keyed = {t: lim for t, lim in limits.items() if lim.keyed}
        counts = self._key_counts(c, keyed, now, lambda period: iso(now - period)) if keyed else None
        rows = self._candidates(c, stamp, room, types, ids, limit, keyed, counts)
        return self._pick_and_take(c, rows, room, rated, keyed, counts, limit,
                                   {"owner": owner, "pid": owner_pid, "now": stamp})

    def _pick_and_take(self, c: Any, rows: list[dict[str, Any]], room: dict[str, float], rated: set[str],
                       keyed: Mapping[str, "TypeLimit"], counts: KeyCounts | None, limit: int,
                       params: dict[str, Any]) -> list[Job]:
        """Pick within each type's and each key's room, claim, and book the keys' starts."""
        key_room = {(r["type"], r["limit_key"]): counts.room(keyed[r["type"]], r["limit_key"]) for r in rows
                    if counts is not None and r["type"] in keyed and r["limit_key"] is not None}
        picked = pick_claims([(r["id"], r["type"], r["limit_key"]) for r in rows], room, rated, limit, key_room)
        if not picked:
            return []
        jobs = self._take(c, picked, rated, params)
        if keyed:
            keys = {r["id"]: r["limit_key"] for r in rows}
            self._record_keys(c, [(j.type, keys.get(j.id)) for j in jobs], keyed, params["now"])
        return jobs

    def _take(self, c: Any, picked: Sequence[str], rated: set[str], params: dict[str, Any]) -> list[Job]:
        """Claim the ``picked`` ids (still pending), in their order, and count the starts of
        rate-limited types (a rated job ends its batch: one row at most)."""
        where, ids = self.dialect.member("id", "ids", picked)
        claimed = self._run(c, _CLAIM_IDS.format(lease=self.dialect.lease_now, ids=where), {**params, **ids})
        order = {job_id: i for i, job_id in enumerate(picked)}
        jobs = sorted((Job.from_row(r) for r in claimed.fetchall()), key=lambda j: order[j.id])
        for j in jobs:
            if j.type in rated:
                self._run(c, _START, {"type": j.type, "now": params["now"]})
        return jobs

    def _candidates(self, c: Any, stamp: str, room: Mapping[str, float], types: Sequence[str] | None,
                    ids: Sequence[str] | None, limit: int, keyed: Mapping[str, "TypeLimit"],
                    counts: KeyCounts | None) -> list[dict[str, Any]]:
        """The due pending jobs in claim order (types with no room, and keys at their limit,
        left out), merged with the fair types' turns (:meth:`_fair_candidates`)."""
        full = [t for t, n in room.items() if n <= 0]
        fair = [t for t, lim in keyed.items() if lim.fair and t not in full]
        common, params = self._filters([("queue", "queues", self.serving_names(), False)], {"now": stamp})
        skip, params = self._filters([("type", "full", full or None, True), ("type", "only", types, False),
                                      ("id", "ids", ids, False)], params)
        skip += common
        for i, (t, lim) in enumerate(keyed.items()):  # keys at their limit are stepped over
            at_limit = counts.full(lim) if counts is not None else []
            if at_limit:
                where, more = self.dialect.member("limit_key", f"k{i}_", at_limit)
                skip += f"AND NOT (type = :kt{i} AND {where}) "
                params.update(more, **{f"kt{i}": t})
        # A fair type's keyed jobs come by turns (_fair_candidates), not in claim order; its keys
        # with room stay in this walk's window, so that the jobs behind them wait their turn in
        # claim order instead of the walk reading the whole backlog.
        rows = [dict(r) for r in self._run(c, CANDIDATES.format(skip=skip),
                                           {**params, "n": limit * CANDIDATES_PER_SLOT}).fetchall()
                if not (r["type"] in fair and r["limit_key"] is not None)]
        if ids is None and counts is not None:
            for t in fair if types is None else [t for t in fair if t in types]:
                rows += self._fair_candidates(c, keyed[t], counts, stamp, limit, common, params)
            rows.sort(key=lambda r: (-r["priority"], r["run_at"], r["created_at"]))
        return rows

    def _filters(self, checks: list[tuple[str, str, Any, bool]], params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """``AND`` fragments for (column, parameter name, values or None, negate) and their parameters."""
        out, params = "", dict(params)
        for expr, name, values, negate in checks:
            if values is not None:
                where, more = self.dialect.member(expr, name, list(values), negate)
                out += f"AND {where} "
                params.update(more)
        return out, params

    def _room(self, c: Any, lim: "TypeLimit", running: int, now: float) -> float:
        """How many more jobs of one type may be claimed now (inf when unlimited)."""
        room = math.inf if lim.concurrency is None else lim.concurrency - running
        if lim.rate is not None:
            count, period = lim.rate
            self._run(c, _FORGET, {"type": lim.type, "since": iso(now - period)})
            room = min(room, count - self._run(c, _USED, {"type": lim.type}).fetchone()["n"])
        return room
