"""Per-type limits written once: the claim used while some type has a
``concurrency`` or ``rate`` limit (``shared.engines.contract.UpkeepStore.claim_limited``).

Types at their limit are skipped, not waited for: other types keep flowing. The fast,
unlimited claim (each engine's own) is untouched, and no index is added to ``jobs``. Limited
claims take turns: an engine with one write lock serializes them already; elsewhere
``dialect.limits_lock`` (a transaction-level advisory lock on a key of the engine's namespace)
does, so each one counts running jobs and recent starts with every earlier one committed.

Here the claim itself; what it works with is named in :mod:`.limitstate`, and its candidate
reads are in :mod:`.candidates`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from shared.runtime.clock import iso, parse_iso
from shared.model.job import Job
from shared.model.limits import pick_claims
from .candidates import (
    CANDIDATES,
    CANDIDATES_PER_SLOT,
    CandidatesSql,
    EarlyReads,
    Inputs,
    candidate_inputs,
)
from .keys import KeyCounts
from .limitstate import STATE, ClaimState, LimitedAsk, Now, Rooms, read_now

if TYPE_CHECKING:
    from shared.model.limits import TypeLimit

__all__ = [
    "CANDIDATES",
    "CANDIDATES_PER_SLOT",
    "STATE",
    "ClaimState",
    "Inputs",
    "LimitsSql",
    "Now",
    "candidate_inputs",
    "read_now",
]

# started_at/updated_at: the caller's clock; the lease: ``dialect.lease_now``. A run starts clean,
# as every claim's: no earlier attempt's error or progress (the attempt history keeps the error).
_CLAIM_IDS = (
    "UPDATE jobs SET status = 'running', attempts = attempts + 1, owner = :owner, owner_pid = :pid, "
    "started_at = :now, heartbeat_at = {lease}, updated_at = :now, error = NULL, "
    "progress = NULL "
    "WHERE {ids} AND status = 'pending' RETURNING *"
)
_FORGET = "DELETE FROM type_starts WHERE type = :type AND started_at <= :since"
_USED = "SELECT count(*) AS n FROM type_starts WHERE type = :type"
_START = "INSERT INTO type_starts (type, started_at) VALUES (:type, :now)"
# Where writes ride in a WITH (dialect.dml_in_with), the claim's bookkeeping rides in the claim
# statement (_claim_with): the fair types' turns, and the starts of the rated types and keys among
# the rows claimed (``taken``). Nothing then follows the claim in its transaction.
_TURN_COLUMNS = (("type", "text"), ("last_key", "text"))
_TURNS = (
    "INSERT INTO key_turns (type, last_key) SELECT type, last_key FROM {rows} "
    "ON CONFLICT (type) DO UPDATE SET last_key = excluded.last_key"
)
_TAKEN_STARTS = (
    "INSERT INTO type_starts (type, started_at) SELECT type, :now FROM taken WHERE {where}"
)
_TAKEN_KEY_STARTS = (
    "INSERT INTO key_starts (type, limit_key, started_at) SELECT type, limit_key, :now "
    "FROM taken WHERE limit_key IS NOT NULL AND {where}"
)


class LimitsSql(CandidatesSql):
    """``claim_limited`` and ``claim_limited_in`` (the latter for a batch's transaction)."""

    def claim_limited(
        self,
        owner: str,
        owner_pid: int,
        now: Now,
        limits: Mapping[str, "TypeLimit"],
        limit: int = 1,
        *,
        types: Sequence[str] | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[Job]:
        """Like ``claim``, but never past a type's ``concurrency`` or ``rate`` (across every
        process and host on the database), in one transaction. See :meth:`claim_limited_in`."""
        return self._limited_tx(
            lambda c: self.claim_limited_in(
                c, owner, owner_pid, now, limits, limit, types=types, ids=ids
            )
        )

    def _limited_tx(self, fn: Callable[[Any], Any]) -> Any:
        """A limited claim's transaction: the engine's own (``_tx``), unless it has a cheaper
        one for a claim's statements (PostgreSQL: pipelined)."""
        return self._tx(fn)

    def claim_limited_in(
        self,
        c: Any,
        owner: str,
        owner_pid: int,
        now: Now,
        limits: Mapping[str, "TypeLimit"],
        limit: int = 1,
        *,
        types: Sequence[str] | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[Job]:
        """The limited claim, inside the caller's transaction on ``c``.

        Takes up to ``limit`` due pending jobs in claim order (priority, then first due, then
        first created; a worker of several queues: of the first queue in its weighted draw
        that has one), skipping the types with no room: ``running < concurrency`` and fewer
        than ``count`` claims in the last ``period`` seconds; the same per key, and a fair type's
        keyed jobs by turns of their keys (:mod:`.keys`). A held-back job stays pending and
        blocks nothing else. A job of a rate-limited type is only ever claimed first in a batch
        and ends it, so it starts at once: its start is counted now (in ``type_starts``).
        Nothing while the queue is paused. Cost: the plain claim's index walk, plus the held-back
        jobs it steps over. ``types``/``ids``: only those types or ids; ``now``: :func:`read_now`."""
        if limit < 1:
            return []
        ask = LimitedAsk.of(owner, owner_pid, limits, limit, types, ids)
        if self.dialect.limits_lock:
            self._run(c, self.dialect.limits_lock, {"key": f"jobq.limits.{self.schema}"})
        read = self._run(
            c, STATE.format(jobs=self.dialect.jobs_running, latest=self.dialect.iso("max(t)"))
        )
        # A worker's queues in its weighted order (QueueOrder), as the plain claim: the first that gives jobs.
        order = self.claim_order() if ids is None else [None]
        early = self._early_reads(c, now, ask, order[0])
        state = ClaimState(read.fetchall())
        if state.paused:
            return []
        rooms = self._rooms(c, state, read_now(now), ask)  # (the lock is held: see read_now)
        return self._claim_by_queue(c, ask, state, rooms, order, early)

    def _claim_by_queue(
        self,
        c: Any,
        ask: LimitedAsk,
        state: ClaimState,
        rooms: Rooms,
        order: Sequence[str | None],
        early: EarlyReads | None,
    ) -> list[Job]:
        """Claim from each queue of ``order`` in turn (None: every queue served) until one gives
        jobs; the ``early`` reads stand for the first queue's if made on its inputs."""
        for i, queue in enumerate(order):
            inputs = candidate_inputs(rooms.room, ask.keyed, rooms.counts)
            reads = self._early_used(early, ask, inputs) if i == 0 and ask.ids is None else None
            reads = reads or self._candidates(c, ask, rooms.stamp, inputs, queue)
            jobs = self._pick_and_take(c, ask, rooms, reads(state.turns), i == len(order) - 1)
            if jobs:
                return jobs
        return []

    def _rooms(self, c: Any, state: ClaimState, now: float, ask: LimitedAsk) -> Rooms:
        """The claim's time (as text), each type's room and the keyed types' counts, as of ``now``."""
        # Another host's clock may be behind the one that stamped the latest start: never count
        # with an earlier time, or this claim would see (and delete) the window too early.
        if state.latest is not None:
            now = max(now, parse_iso(state.latest))
        room = {
            t: self._room(c, lim, state.by_type.get(t, 0), now) for t, lim in ask.limits.items()
        }
        counts = (
            self._key_counts(c, ask.keyed, state.by_key, lambda period: iso(now - period))
            if ask.keyed
            else None
        )
        return Rooms(iso(now), room, counts)

    def _pick_and_take(
        self, c: Any, ask: LimitedAsk, rooms: Rooms, rows: list[dict[str, Any]], last: bool
    ) -> list[Job]:
        """Pick within each type's and each key's room, claim, and book the starts and the fair
        types' turns: in the claim statement where the engine allows (``dialect.dml_in_with``),
        and then, when this is the ``last`` statement the claim may need, its transaction may
        end in the same round trip (:meth:`_claim_is_last`)."""
        key_room = _key_room(rows, ask.keyed, rooms.counts)
        picked = pick_claims(
            [(r["id"], r["type"], r["limit_key"]) for r in rows],
            rooms.room,
            ask.rated,
            ask.limit,
            key_room,
        )
        if not picked:
            return []
        keys = {r["id"]: (r["type"], r["limit_key"]) for r in rows}
        params: dict[str, Any] = {"owner": ask.owner, "pid": ask.owner_pid, "now": rooms.stamp}
        if not self.dialect.dml_in_with:
            jobs = self._take(c, picked, ask.rated, params)
            if ask.keyed:
                self._record_keys(c, [keys[j.id] for j in jobs], ask.keyed, params["now"])
            return jobs
        return self._take_with(c, ask, picked, [keys[i] for i in picked], params, last)

    def _take_with(
        self,
        c: Any,
        ask: LimitedAsk,
        picked: Sequence[str],
        taken: list[tuple[str, str | None]],
        params: dict[str, Any],
        last: bool,
    ) -> list[Job]:
        """Claim the ``picked`` ids ((type, key) of each: ``taken``) with the claim's bookkeeping
        in its statement (:meth:`_claim_with`); then, if ``last``, :meth:`_claim_is_last`."""
        keyed = ask.keyed
        turns = {t: k for t, k in taken if k is not None and t in keyed and keyed[t].fair}
        types = {t for t, _ in taken}
        key_rated = [t for t in types if t in keyed and keyed[t].rate_per_key is not None]
        claimed = self._run(
            c, *self._claim_with(picked, turns, sorted(types & ask.rated), key_rated, params)
        )
        if last:
            self._claim_is_last(c)
        return _in_order(claimed.fetchall(), picked)

    def _claim_is_last(self, c: Any) -> None:
        """The claim statement just sent on ``c`` ends the limited claim's work: an engine that
        pipelines may send its COMMIT now, in the same round trip (nothing by default)."""

    def _take(
        self, c: Any, picked: Sequence[str], rated: set[str], params: dict[str, Any]
    ) -> list[Job]:
        """Claim the ``picked`` ids (still pending), in their order, and count the starts of
        rate-limited types (a rated job ends its batch: one row at most)."""
        where, ids = self.dialect.member("id", "ids", picked, kind="id")
        claimed = self._run(
            c, _CLAIM_IDS.format(lease=self.dialect.lease_now, ids=where), {**params, **ids}
        )
        jobs = _in_order(claimed.fetchall(), picked)
        for j in jobs:
            if j.type in rated:
                self._run(c, _START, {"type": j.type, "now": params["now"]})
        return jobs

    def _claim_with(
        self,
        picked: Sequence[str],
        turns: Mapping[str, str],
        rated: Sequence[str],
        key_rated: Sequence[str],
        params: dict[str, Any],
    ) -> tuple[str, dict[str, Any]]:
        """The claim of ``picked`` with its bookkeeping in its ``WITH`` (``dialect.dml_in_with``):
        the fair types' ``turns`` (type -> last key served), the starts of the ``rated`` types
        and of the keys of the ``key_rated`` types among the claimed rows. Text and parameters."""
        # one job: ``id = :id`` (see CANDIDATES: a generic plan then costs what a custom one does)
        where, out = (
            ("id = :id", {"id": picked[0]})
            if len(picked) == 1
            else self.dialect.member("id", "ids", picked, kind="id")
        )
        out.update(params)
        parts = []
        if turns:
            parts.append(
                f"turn AS ({_TURNS.format(rows=self.dialect.row_set('turns', _TURN_COLUMNS))}), "
            )
            out.update(self.dialect.row_params("turns", _TURN_COLUMNS, list(turns.items())))
        parts.append(f"taken AS ({_CLAIM_IDS.format(lease=self.dialect.lease_now, ids=where)})")
        for name, sql, types in (
            ("rated", _TAKEN_STARTS, rated),
            ("key_rated", _TAKEN_KEY_STARTS, key_rated),
        ):
            if types:
                parts.append(
                    f", {name} AS ({sql.format(where=self.dialect.any_of.format(col='type', param=':' + name))})"
                )
                out[name] = self.dialect.list_param(types)
        return f"WITH {''.join(parts)} SELECT * FROM taken", out

    def _room(self, c: Any, lim: "TypeLimit", running: int, now: float) -> float:
        """How many more jobs of one type may be claimed now (inf when unlimited)."""
        room = math.inf if lim.concurrency is None else lim.concurrency - running
        if lim.rate is not None:
            count, period = lim.rate
            self._run(c, _FORGET, {"type": lim.type, "since": iso(now - period)})
            room = min(room, count - self._run(c, _USED, {"type": lim.type}).fetchone()["n"])
        return room


def _in_order(rows: Sequence[Mapping[str, Any]], picked: Sequence[str]) -> list[Job]:
    """The claimed ``rows`` as jobs, in the order of ``picked`` (their ids)."""
    order = {job_id: i for i, job_id in enumerate(picked)}
    return sorted((Job.from_row(r) for r in rows), key=lambda j: order[j.id])


def _key_room(
    rows: list[dict[str, Any]], keyed: Mapping[str, "TypeLimit"], counts: KeyCounts | None
) -> dict[tuple[str, str], float]:
    """The room of each keyed candidate's key ((type, key) -> room), for ``pick_claims``."""
    return {
        (r["type"], r["limit_key"]): counts.room(keyed[r["type"]], r["limit_key"])
        for r in rows
        if counts is not None and r["type"] in keyed and r["limit_key"] is not None
    }
