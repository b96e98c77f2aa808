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
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, Union

from ...clock import iso, parse_iso
from ...job import Job
from ...limits import pick_claims
from .jobs import CLAIM_ORDER
from .keys import ROW, SET_TURN, KeyCounts, KeysSql
from .queues import QUEUE_FREE, QueueServing

if TYPE_CHECKING:
    from ...limits import TypeLimit

CANDIDATES_PER_SLOT = 4   # candidates read per job wanted, for batches that fill a type's room

# The claim's state in one read: the running rows per (type, key) (``dialect.jobs_running``
# names the index where it must; few rows), the global pause, the latest start counted (see
# claim_limited_in) and each fair type's turn (the last key served).
STATE = ("SELECT 'run' AS kind, type, limit_key AS k, count(*) AS n FROM {jobs} WHERE status = 'running' "
         "GROUP BY type, limit_key "
         "UNION ALL SELECT 'paused', NULL, NULL, 1 FROM control WHERE name = 'paused' AND value = '1' "
         "UNION ALL SELECT 'latest', NULL, max(t), 0 FROM (SELECT max(started_at) AS t FROM type_starts "
         "UNION ALL SELECT max(started_at) AS t FROM key_starts) s "
         "UNION ALL SELECT 'turn', type, last_key, 0 FROM key_turns")
# The claim order and index of the plain claim; types with no room are filtered out.
# A paused queue's jobs are skipped (QUEUE_FREE); a pool's worker takes only its queues' (_candidates).
CANDIDATES = (f"SELECT {ROW} FROM jobs WHERE status = 'pending' AND run_at <= :now AND {QUEUE_FREE} "
              f"{{skip}}{CLAIM_ORDER} LIMIT :n")
# started_at/updated_at: the caller's clock; the lease: ``dialect.lease_now``.
_CLAIM_IDS = ("{turn}UPDATE jobs SET status = 'running', attempts = attempts + 1, owner = :owner, owner_pid = :pid, "
              "started_at = :now, heartbeat_at = {lease}, updated_at = :now "
              "WHERE {ids} AND status = 'pending' RETURNING *")
_FORGET = "DELETE FROM type_starts WHERE type = :type AND started_at <= :since"
_USED = "SELECT count(*) AS n FROM type_starts WHERE type = :type"
_START = "INSERT INTO type_starts (type, started_at) VALUES (:type, :now)"

Now = Union[float, Callable[[], float]]  # a time, or a clock's ``now`` to read once the lock is held


def read_now(now: Now) -> float:
    """The time ``now`` stands for: a time, or a clock's ``now`` to call. A limited claim reads
    its clock once its transaction holds the lock (:meth:`LimitsSql.claim_limited_in`): a time
    read before is older than the claim by however long the claim waited for the lock (SQLite's
    busy handler, PostgreSQL's advisory lock), so its start would be counted as of that older
    time and leave a rate's window early: a later claim would start too soon."""
    return now() if callable(now) else now


class ClaimState:
    """The :data:`STATE` rows of one limited claim: ``paused``, ``latest`` (the last start
    counted, or None), running jobs ``by_type`` and ``by_key`` ((type, key) -> n), ``turns``."""

    def __init__(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self.paused, self.latest = False, None
        self.by_type: dict[str, int] = {}
        self.by_key: dict[tuple[str, str], int] = {}
        self.turns: dict[str, str] = {}
        for r in rows:
            if r["kind"] == "run":
                self.by_type[r["type"]] = self.by_type.get(r["type"], 0) + r["n"]
                if r["k"] is not None:
                    self.by_key[(r["type"], r["k"])] = r["n"]
            elif r["kind"] == "paused":
                self.paused = True
            elif r["kind"] == "latest":
                self.latest = r["k"]
            else:
                self.turns[r["type"]] = r["k"]


class LimitsSql(KeysSql, QueueServing):
    """``claim_limited`` and ``claim_limited_in`` (the latter for a batch's transaction)."""

    def claim_limited(self, owner: str, owner_pid: int, now: Now, limits: Mapping[str, "TypeLimit"],
                      limit: int = 1, *, types: Sequence[str] | None = None,
                      ids: Sequence[str] | None = None) -> list[Job]:
        """Like ``claim``, but never past a type's ``concurrency`` or ``rate`` (across every
        process and host on the database), in one transaction. See :meth:`claim_limited_in`."""
        return self._limited_tx(lambda c: self.claim_limited_in(c, owner, owner_pid, now, limits, limit,
                                                                types=types, ids=ids))

    def _limited_tx(self, fn: Callable[[Any], Any]) -> Any:
        """A limited claim's transaction: the engine's own (``_tx``), unless it has a cheaper
        one for a claim's statements (PostgreSQL: pipelined)."""
        return self._tx(fn)

    def claim_limited_in(self, c: Any, owner: str, owner_pid: int, now: Now,
                         limits: Mapping[str, "TypeLimit"], limit: int = 1, *,
                         types: Sequence[str] | None = None, ids: Sequence[str] | None = None) -> list[Job]:
        """The limited claim, inside the caller's transaction on ``c``.

        Takes up to ``limit`` due pending jobs in claim order (priority, then first due, then
        first created; a worker of several queues: of the first queue in its weighted draw
        that has one), skipping the types with no room: ``running < concurrency`` and fewer
        than ``count`` claims in the last ``period`` seconds; the same per key, and a fair type's
        keyed jobs by turns of their keys (:mod:`.keys`). A held-back job stays pending and
        blocks nothing else. A job of a rate-limited type is only ever claimed first in a batch
        and ends it, so it starts at once: its start is counted now (in ``type_starts``).
        Nothing while the queue is paused. Cost: the plain claim's index walk, plus the held-back
        jobs it steps over. ``types``/``ids``: only those types or ids; ``now``: :func:`read_now`.
        """
        if limit < 1:
            return []
        if self.dialect.limits_lock:
            self._run(c, self.dialect.limits_lock, {"key": f"jobq.limits.{self.schema}"})
        state = ClaimState(self._run(c, STATE.format(jobs=self.dialect.jobs_running)).fetchall())
        now = read_now(now)  # the lock is held: the state read after it has answered (pipelined or not)
        if state.paused:
            return []
        # Another host's clock may be behind the one that stamped the latest start: never count
        # with an earlier time, or this claim would see (and delete) the window too early.
        if state.latest is not None:
            now = max(now, parse_iso(state.latest))
        stamp = iso(now)
        room = {t: self._room(c, lim, state.by_type.get(t, 0), now) for t, lim in limits.items()}
        rated = {t for t, lim in limits.items() if lim.rate or lim.rate_per_key}
        keyed = {t: lim for t, lim in limits.items() if lim.keyed}
        counts = self._key_counts(c, keyed, state.by_key, lambda period: iso(now - period)) if keyed else None
        # A worker's queues in its weighted order (QueueOrder), as the plain claim: the first that gives jobs.
        for queue in self.claim_order() if ids is None else [None]:
            rows = self._candidates(c, stamp, room, types, ids, limit, keyed, counts, state.turns, queue)
            jobs = self._pick_and_take(c, rows, room, rated, keyed, counts, limit,
                                       {"owner": owner, "pid": owner_pid, "now": stamp})
            if jobs:
                return jobs
        return []

    def _pick_and_take(self, c: Any, rows: list[dict[str, Any]], room: dict[str, float], rated: set[str],
                       keyed: Mapping[str, "TypeLimit"], counts: KeyCounts | None, limit: int,
                       params: dict[str, Any]) -> list[Job]:
        """Pick within each type's and each key's room, claim, and book the keys' starts (the
        turn of a fair type rides in the claim statement where the engine allows)."""
        key_room = {(r["type"], r["limit_key"]): counts.room(keyed[r["type"]], r["limit_key"]) for r in rows
                    if counts is not None and r["type"] in keyed and r["limit_key"] is not None}
        picked = pick_claims([(r["id"], r["type"], r["limit_key"]) for r in rows], room, rated, limit, key_room)
        if not picked:
            return []
        keys = {r["id"]: (r["type"], r["limit_key"]) for r in rows}
        turn = None
        if self.dialect.dml_in_with:
            served = [keys[i] for i in picked if keys[i][1] is not None and keys[i][0] in keyed
                      and keyed[keys[i][0]].fair]
            if served:
                turn = served[-1]
                params = {**params, "turn_type": turn[0], "turn_key": turn[1]}
        jobs = self._take(c, picked, rated, params, turn is not None)
        if keyed:
            self._record_keys(c, [keys[j.id] for j in jobs], keyed, params["now"], turn[0] if turn else None)
        return jobs

    def _take(self, c: Any, picked: Sequence[str], rated: set[str], params: dict[str, Any],
              turn: bool = False) -> list[Job]:
        """Claim the ``picked`` ids (still pending), in their order, and count the starts of
        rate-limited types (a rated job ends its batch: one row at most). ``turn``: the same
        statement moves ``:turn_type``'s turn to ``:turn_key`` (``dialect.dml_in_with``)."""
        where, ids = self.dialect.member("id", "ids", picked)
        prefix = f"WITH turn AS ({SET_TURN}) " if turn else ""
        claimed = self._run(c, _CLAIM_IDS.format(turn=prefix, lease=self.dialect.lease_now, ids=where),
                            {**params, **ids})
        order = {job_id: i for i, job_id in enumerate(picked)}
        jobs = sorted((Job.from_row(r) for r in claimed.fetchall()), key=lambda j: order[j.id])
        for j in jobs:
            if j.type in rated:
                self._run(c, _START, {"type": j.type, "now": params["now"]})
        return jobs

    def _candidates(self, c: Any, stamp: str, room: Mapping[str, float], types: Sequence[str] | None,
                    ids: Sequence[str] | None, limit: int, keyed: Mapping[str, "TypeLimit"],
                    counts: KeyCounts | None, turns: Mapping[str, str],
                    queue: str | None = None) -> list[dict[str, Any]]:
        """The due pending jobs in claim order (types with no room, and keys at their limit,
        left out), merged with the fair types' turns (:meth:`_fair_candidates`); of ``queue``
        alone when given, else of every queue this store serves."""
        full = [t for t, n in room.items() if n <= 0]
        fair = [t for t, lim in keyed.items() if lim.fair and t not in full] if ids is None else []  # ids: no turns
        queues = [queue] if queue is not None else self.serving_names()
        common, params = self._filters([("queue", "queues", queues, False)], {"now": stamp})
        skip, params = self._filters([("type", "full", full or None, True), ("type", "only", types, False),
                                      ("id", "ids", ids, False)], params)
        skip += common
        for i, (t, lim) in enumerate(keyed.items()):  # keys at their limit are stepped over
            at_limit = counts.full(lim) if counts is not None else []
            if at_limit:
                where = self.dialect.any_of.format(col="limit_key", param=f":k{i}_")  # one list parameter
                skip += f"AND NOT (type = :kt{i} AND {where}) "
                params.update({f"k{i}_": self.dialect.list_param(at_limit), f"kt{i}": t})
        # A fair type's keyed jobs come by turns (_fair_candidates), not in claim order; its keys
        # with room stay in this walk's window, so that the jobs behind them wait their turn in
        # claim order instead of the walk reading the whole backlog.
        # Every read is sent before any answer is read: one round trip where the engine pipelines.
        plain = self._run(c, CANDIDATES.format(skip=skip), {**params, "n": limit * CANDIDATES_PER_SLOT})
        walks = [self._fair_candidates(c, keyed[t], counts, stamp, limit, common, params, turns.get(t, ""))
                 for t in (fair if types is None else [t for t in fair if t in types])
                 if counts is not None]
        rows = [dict(r) for r in plain.fetchall() if not (r["type"] in fair and r["limit_key"] is not None)]
        for walk in walks:
            rows += walk()
        if walks:
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
