"""Per-type limits written once: the claim used while some type has a
``concurrency`` or ``rate`` limit (``shared.engines.contract.UpkeepStore.claim_limited``).

Types at their limit are skipped, not waited for: other types keep flowing. The fast,
unlimited claim (each engine's own) is untouched, and no index is added to ``jobs``. Limited
claims take turns: an engine with one write lock serializes them already; elsewhere
``dialect.limits_lock`` (a transaction-level advisory lock on a key of the engine's namespace)
does, so each one counts running jobs and recent starts with every earlier one committed.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, Tuple, Union

from shared.runtime.clock import iso, parse_iso
from shared.model.job import Job
from shared.model.limits import pick_claims
from .jobs import CLAIM_ORDER
from .keys import ROW, KeyCounts, KeysSql
from .queues import QUEUE_FREE, QueueServing

if TYPE_CHECKING:
    from shared.model.limits import TypeLimit

CANDIDATES_PER_SLOT = 4  # candidates read per job wanted, for batches that fill a type's room

# The claim's state in one read: the running rows per (type, key) (``dialect.jobs_running``
# names the index where it must; few rows), the global pause, the latest start counted (see
# claim_limited_in) and each fair type's turn (the last key served).
STATE = (
    "SELECT 'run' AS kind, type, limit_key AS k, count(*) AS n FROM {jobs} WHERE status = 'running' "
    "GROUP BY type, limit_key "
    "UNION ALL SELECT 'paused', NULL, NULL, 1 FROM control WHERE name = 'paused' AND value = '1' "
    "UNION ALL SELECT 'latest', NULL, max(t), 0 FROM (SELECT max(started_at) AS t FROM type_starts "
    "UNION ALL SELECT max(started_at) AS t FROM key_starts) s "
    "UNION ALL SELECT 'turn', type, last_key, 0 FROM key_turns"
)
# The claim order and index of the plain claim; types with no room are filtered out.
# A paused queue's jobs are skipped (QUEUE_FREE); a pool's worker takes only its queues' (_candidates).
# ``{n}``: the LIMIT as a literal, not a parameter: with it the generic plan of the prepared
# statement (the claim index, in order) costs what a custom one does, and PostgreSQL keeps it
# instead of planning every execution again (the same for ``id = :id`` in a one-job claim).
CANDIDATES = (
    f"SELECT {ROW} FROM jobs WHERE status = 'pending' AND run_at <= :now AND {QUEUE_FREE} "
    f"{{skip}}{CLAIM_ORDER} LIMIT {{n:d}}"
)
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

# What a claim's candidate reads take from its state: the types with no room, and each keyed
# type's keys at their limit ((type, keys) pairs).
Inputs = Tuple[Tuple[str, ...], Tuple[Tuple[str, Tuple[str, ...]], ...]]
Now = Union[
    float, Callable[[], float]
]  # a time, or a clock's ``now`` to read once the lock is held


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

    _reads_pipelined = False  # True where a claim's reads are pipelined: see _early_reads
    _last_inputs: Any = (
        None  # (shape, candidate inputs, same as the claim before) of the last claim
    )

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
        if self.dialect.limits_lock:
            self._run(c, self.dialect.limits_lock, {"key": f"jobq.limits.{self.schema}"})
        read = self._run(c, STATE.format(jobs=self.dialect.jobs_running))
        # A worker's queues in its weighted order (QueueOrder), as the plain claim: the first that gives jobs.
        order = self.claim_order() if ids is None else [None]
        shape = (tuple(limits.values()), None if types is None else tuple(types), limit)
        early = self._early_reads(c, now, shape, limits, types, ids, order[0])
        state = ClaimState(read.fetchall())
        if state.paused:
            return []
        stamp, room, counts = self._rooms(
            c, state, read_now(now), limits
        )  # (the lock is held: see read_now)
        rated = {t for t, lim in limits.items() if lim.rate or lim.rate_per_key}
        keyed = {t: lim for t, lim in limits.items() if lim.keyed}
        for i, queue in enumerate(order):
            inputs = candidate_inputs(room, keyed, counts)
            if i == 0 and ids is None:
                early = self._early_used(early, shape, inputs)
            reads = early or self._candidates(c, stamp, inputs, types, ids, limit, keyed, queue)
            early = None
            jobs = self._pick_and_take(
                c,
                reads(state.turns),
                room,
                rated,
                keyed,
                counts,
                limit,
                {"owner": owner, "pid": owner_pid, "now": stamp},
                i == len(order) - 1,
            )
            if jobs:
                return jobs
        return []

    def _rooms(
        self, c: Any, state: ClaimState, now: float, limits: Mapping[str, "TypeLimit"]
    ) -> tuple[str, dict[str, float], KeyCounts | None]:
        """The claim's time (as text), each type's room and the keyed types' counts, as of ``now``."""
        # Another host's clock may be behind the one that stamped the latest start: never count
        # with an earlier time, or this claim would see (and delete) the window too early.
        if state.latest is not None:
            now = max(now, parse_iso(state.latest))
        room = {t: self._room(c, lim, state.by_type.get(t, 0), now) for t, lim in limits.items()}
        keyed = {t: lim for t, lim in limits.items() if lim.keyed}
        counts = (
            self._key_counts(c, keyed, state.by_key, lambda period: iso(now - period))
            if keyed
            else None
        )
        return iso(now), room, counts

    def _early_reads(
        self,
        c: Any,
        now: Now,
        shape: tuple,
        limits: Mapping[str, "TypeLimit"],
        types: Sequence[str] | None,
        ids: Sequence[str] | None,
        queue: str | None,
    ) -> Any:
        """Where the engine pipelines (:attr:`_reads_pipelined`), the candidate reads sent at once,
        with the state read (before its answer: one round trip fewer), on the inputs
        (:func:`candidate_inputs`) the last two claims of this store of the same ``shape``
        both found; of the jobs due at the time read now (as a plain claim's: the time it was
        asked). None, or (those inputs, the reads): :meth:`_early_used` keeps them if the
        claim's own inputs are the same."""
        last = self._last_inputs
        if (
            not self._reads_pipelined
            or ids is not None
            or last is None
            or last[0] != shape
            or not last[2]
        ):
            return None
        keyed = {t: lim for t, lim in limits.items() if lim.keyed}
        return last[1], self._candidates(
            c, iso(read_now(now)), last[1], types, ids, shape[2], keyed, queue
        )

    def _early_used(self, early: Any, shape: tuple, inputs: "Inputs") -> Any:
        """The early reads if they were made on ``inputs`` (else None: the claim reads again);
        remembers ``inputs`` for the next claim, and whether they were the last claim's too."""
        last = self._last_inputs
        self._last_inputs = (
            shape,
            inputs,
            last is not None and last[0] == shape and last[1] == inputs,
        )
        return early[1] if early is not None and early[0] == inputs else None

    def _pick_and_take(
        self,
        c: Any,
        rows: list[dict[str, Any]],
        room: dict[str, float],
        rated: set[str],
        keyed: Mapping[str, "TypeLimit"],
        counts: KeyCounts | None,
        limit: int,
        params: dict[str, Any],
        last: bool = False,
    ) -> list[Job]:
        """Pick within each type's and each key's room, claim, and book the starts and the fair
        types' turns: in the claim statement where the engine allows (``dialect.dml_in_with``),
        and then, when this is the ``last`` statement the claim may need, its transaction may
        end in the same round trip (:meth:`_claim_is_last`)."""
        key_room = {
            (r["type"], r["limit_key"]): counts.room(keyed[r["type"]], r["limit_key"])
            for r in rows
            if counts is not None and r["type"] in keyed and r["limit_key"] is not None
        }
        picked = pick_claims(
            [(r["id"], r["type"], r["limit_key"]) for r in rows], room, rated, limit, key_room
        )
        if not picked:
            return []
        keys = {r["id"]: (r["type"], r["limit_key"]) for r in rows}
        if not self.dialect.dml_in_with:
            jobs = self._take(c, picked, rated, params)
            if keyed:
                self._record_keys(c, [keys[j.id] for j in jobs], keyed, params["now"])
            return jobs
        taken = [keys[i] for i in picked]
        turns = {t: k for t, k in taken if k is not None and t in keyed and keyed[t].fair}
        types = {t for t, _ in taken}
        key_rated = [t for t in types if t in keyed and keyed[t].rate_per_key is not None]
        claimed = self._run(
            c, *self._claim_with(picked, turns, sorted(types & rated), key_rated, params)
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
        where, ids = self.dialect.member("id", "ids", picked)
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
            else self.dialect.member("id", "ids", picked)
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

    def _candidates(
        self,
        c: Any,
        stamp: str,
        inputs: "Inputs",
        types: Sequence[str] | None,
        ids: Sequence[str] | None,
        limit: int,
        keyed: Mapping[str, "TypeLimit"],
        queue: str | None = None,
    ) -> Callable[[Mapping[str, str]], list[dict[str, Any]]]:
        """Send the reads of the due pending jobs in claim order (``inputs``: the types with no
        room and the keys at their limit, left out), and of the fair types' turns
        (:meth:`_fair_candidates`); of ``queue`` alone when given, else of every queue this
        store serves. The returned function, given the turns the claim read, reads them merged."""
        full, at_limit = inputs
        fair = (
            [t for t, lim in keyed.items() if lim.fair and t not in full] if ids is None else []
        )  # ids: no turns
        queues = [queue] if queue is not None else self.serving_names()
        common, params = self._filters([("queue", "queues", queues, False)], {"now": stamp})
        skip, params = self._filters(
            [
                ("type", "full", list(full) or None, True),
                ("type", "only", types, False),
                ("id", "ids", ids, False),
            ],
            params,
        )
        skip += common
        for i, (t, keys) in enumerate(at_limit):  # keys at their limit are stepped over
            if keys:
                where = self.dialect.any_of.format(
                    col="limit_key", param=f":k{i}_"
                )  # one list parameter
                skip += f"AND NOT (type = :kt{i} AND {where}) "
                params.update({f"k{i}_": self.dialect.list_param(keys), f"kt{i}": t})
        # A fair type's keyed jobs come by turns (_fair_candidates), not in claim order; its keys
        # with room stay in this walk's window, so that the jobs behind them wait their turn in
        # claim order instead of the walk reading the whole backlog.
        # Every read is sent before any answer is read: one round trip where the engine pipelines.
        plain = self._run(c, CANDIDATES.format(skip=skip, n=limit * CANDIDATES_PER_SLOT), params)
        walks = [
            self._fair_candidates(
                c, keyed[t], list(dict(at_limit).get(t, ())), stamp, limit, common, params
            )
            for t in (fair if types is None else [t for t in fair if t in types])
        ]

        def rows(turns: Mapping[str, str]) -> list[dict[str, Any]]:
            out = [
                dict(r)
                for r in plain.fetchall()
                if not (r["type"] in fair and r["limit_key"] is not None)
            ]
            for walk in walks:
                out += walk(turns)
            if walks:
                out.sort(key=lambda r: (-r["priority"], r["run_at"], r["created_at"]))
            return out

        return rows

    def _filters(
        self, checks: list[tuple[str, str, Any, bool]], params: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
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


def _in_order(rows: Sequence[Mapping[str, Any]], picked: Sequence[str]) -> list[Job]:
    """The claimed ``rows`` as jobs, in the order of ``picked`` (their ids)."""
    order = {job_id: i for i, job_id in enumerate(picked)}
    return sorted((Job.from_row(r) for r in rows), key=lambda j: order[j.id])


def candidate_inputs(
    room: Mapping[str, float], keyed: Mapping[str, "TypeLimit"], counts: KeyCounts | None
) -> Inputs:
    """What a claim's candidate reads take from its state (:data:`Inputs`)."""
    full = tuple(t for t, n in room.items() if n <= 0)
    return full, tuple(
        (t, tuple(counts.full(lim))) for t, lim in keyed.items()
    ) if counts is not None else ()
