"""The PostgreSQL engine's store: one psycopg connection to a jobq schema, and every protocol of
:mod:`shared.engines.contract` on it (the transitions written once in :mod:`shared.engines.sql`,
spelt by :mod:`.dialect`; here the hot path whose SQL is this engine's own, the enqueue's in
:mod:`.enqueue`; connecting and errors in :mod:`.connection`; the operators' reads run on it
through :mod:`shared.ops`).

How this engine keeps the contract across many hosts:
- A claim is one ``UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED) RETURNING``:
  concurrent claimers skip each other's rows instead of waiting, and a row is taken only while
  it is still pending and due.
- Outcomes are guarded by id, ``running``, attempt and owner (a batch's completions in one
  ``UPDATE`` of the batch's ids); zero rows means the lease was lost, unless the outcome's
  own history row shows it committed before (a re-send after a commit whose answer was lost).
- Leases (``heartbeat_at``) are written with the server's clock (``db_now()``), so every host
  judges them on one clock; everything else keeps the caller's injected time. Heartbeats and
  lease ages are in :mod:`.leases`.
- An enqueue notifies in the same statement as its insert (``pg_notify``, one per
  transaction; :mod:`.enqueue`): idle workers wake from ``LISTEN`` (:mod:`.wakeup`).
- One job per call is one autocommit statement; a batch's outcomes and the next claim share
  one transaction (round trips, not commits, set the cost here).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, NamedTuple, Sequence, TypeVar

import psycopg
from psycopg import pq
from psycopg.rows import tuple_row

from shared.runtime.clock import iso
from shared.model.job import Finish, Job
from ..sql.jobs import in_claim_order
from ..sql.limits import Now, read_now
from ..sql import GIVEN_BACK, JOB_COLUMNS, RELEASE as _RELEASE, TransitionsSql
from ..sql.queues import IN_QUEUE, QUEUE_FREE, first_claimed
from .connection import _RETRYABLE as RETRYABLE, TX_RETRIES, PgConnection
from .errors import translate_errors
from .dialect import DIALECT
from .loaders import register_native
from .aio import PgAsync
from .enqueue import PgEnqueue
from .finish import (
    COMPLETE_MANY,
    complete_and_claim_sql,
    completion_params,
    finish_one,
    record_finishes,
    recognised_after,
)
from .leases import PgLeases
from .schema import FOLD_COUNTS
from .transfer import PgTransfer

T = TypeVar("T")

_PAUSED = "EXISTS (SELECT 1 FROM control WHERE name = 'paused' AND value = '1')"


def _claim_sql(which: str) -> str:
    """The claim of the due pending jobs that ``which`` admits (see ``shared.engines.sql.queues``).
    The locked rows are taken as an array (``= ANY(ARRAY(...))``), not joined (``IN (...)``),
    which keeps the plan a worker's session caches (see :data:`WORKER_SESSION`) right for every
    ``limit``; and by their ``ctid``, not their id: the update reads each row where the
    subquery locked it (a TID scan) instead of looking its id up again in the primary key
    (EXPLAIN ANALYZE: 2.6 -> 2.2 ms a claim of 100). The ctid is that of the version the
    subquery locked, which nothing can update or remove before this statement ends; a row
    whose newer version the lock followed (updated and committed since the statement began)
    is not visible at that ctid to the update's snapshot and is merely left unclaimed. A run
    starts clean: an earlier attempt's error and progress are cleared (its history row keeps
    the error)."""
    return f"""
UPDATE jobs SET status = 'running', attempts = attempts + 1, owner = %(owner)s, owner_pid = %(pid)s,
       started_at = %(now)s, heartbeat_at = db_now(), updated_at = %(now)s,
       error = NULL, progress = NULL
WHERE ctid = ANY(ARRAY(SELECT ctid FROM jobs
             WHERE {which} AND status = 'pending' AND run_at <= %(now)s AND NOT {_PAUSED}
             ORDER BY priority DESC, run_at, created_at LIMIT %(limit)s
             FOR UPDATE SKIP LOCKED))
RETURNING {JOB_COLUMNS}
"""


_CLAIM = _claim_sql(QUEUE_FREE)  # every queue's jobs (a paused queue's skipped)
_CLAIM_QUEUE = _claim_sql(IN_QUEUE.format(q="%(queue)s"))  # one queue's, on its own index
_COMPLETE_AND_CLAIM = {
    False: complete_and_claim_sql(_CLAIM),
    True: complete_and_claim_sql(_CLAIM_QUEUE),
}

# A worker's sessions plan without sorts or sequential scans where another plan exists, and
# keep one (generic) plan per prepared statement instead of planning every execution. The claim
# must walk the claim index in order and stop after ``limit`` rows; on a table whose statistics
# say it is small or empty (never analyzed, or ANALYZEd while empty and then filled by a burst
# of enqueues) the planner instead reads every due pending row through a bitmap scan and sorts
# them all, per claim: 45-65 ms instead of 1 ms with 20,000 pending. Planning the
# completion-and-claim statement took 0.6-0.7 ms of server CPU per execution, about 20 us per
# job at the 30-job batches of a loaded drain; a generic plan is made once per session (and
# again after an ANALYZE), so it must be right for any table size: no sequential scan, no
# sort, rows found by key (the hot statements are written for that: tests/engines/
# test_pg_claim_plan.py). psycopg prepares a statement at its sixth run (a later run sends no
# text: tests/proofs/test_two_hosts.py's lost claim is cut on the answer). A limited claim turns all three
# settings back to the defaults for its own transaction (dialect.limits_lock): its fair walk
# over keys needs sorts.
WORKER_SESSION = (
    "SELECT set_config('enable_sort', 'off', false), set_config('enable_seqscan', 'off', false), "
    "set_config('plan_cache_mode', 'force_generic_plan', false)"
)

_UNCLAIM = (
    "WITH u AS (UPDATE jobs SET " + GIVEN_BACK + "attempts = attempts - 1, run_at = %(now)s, "
    "updated_at = %(now)s, "
    + _RELEASE
    + "WHERE id = ANY(%(ids)s) AND status = 'running' AND owner = %(owner)s RETURNING 1) "
    "SELECT count(*) AS n, pg_notify(%(channel)s, '') FROM u"
)


class OpenPipeline(NamedTuple):
    """The limited claim under way in pipeline mode (:meth:`PgStore._limited_tx`): its
    connection, and the ``pipeline`` (an exit stack) that ends the pipeline on close."""

    conn: Any
    pipeline: contextlib.ExitStack


@translate_errors
class PgStore(TransitionsSql, PgConnection, PgEnqueue, PgLeases, PgTransfer):
    """One PostgreSQL connection to a jobq schema, and the operations on it (the transitions
    written once in :mod:`shared.engines.sql`; here the hot path, which is this engine's own)."""

    dialect = DIALECT  # the shared SQL (shared.engines.sql, shared.ops) runs through SqlBase
    _open_pipeline: OpenPipeline | None = None  # of the limited claim under way, if any
    _reads_pipelined = (
        True  # a limited claim's candidate reads may go with its state read (pipelined)
    )

    @functools.cached_property
    def aio(self) -> PgAsync:
        """The asyncio calls of this store (:mod:`.aio`: a connection per event loop)."""
        return PgAsync(self)

    def close(self) -> None:
        """Close the store and every event loop's connection of :attr:`aio`."""
        super().close()
        aio = self.__dict__.get("aio")
        if aio is not None:
            aio.close()

    def _app_cursor(self, conn: Any) -> Any:
        """A cursor of the application's connection that reads the native types as jobq's text
        (:mod:`.loaders`, on this cursor only)."""
        cur = conn.cursor()
        register_native(cur.adapters)
        return cur

    def wake_idle(self) -> None:
        """Idle workers LISTEN on the schema's channel: jobs an operator made pending wake them."""
        self.conn.execute("SELECT pg_notify(%s, '')", (self.channel,))

    def notify_controls(self, kind: str) -> None:
        """Supervisors LISTEN on the schema's control channel (``.relay``): a control written
        (and committed) just before reaches them at once; ``kind`` is the payload."""
        self.conn.execute("SELECT pg_notify(%s, %s)", (self.control_channel, kind))

    def wakeup(self) -> Any:
        """The idle wait of a worker: the supervisor's relay's file, or LISTEN on this
        connection where no relay listens (see :mod:`.wakeup`)."""
        from .wakeup import PgWakeup, PolledWakeup

        if self.pooled:  # (no session settings, no LISTEN: see .pooling and .relay)
            from .relay import RelayedWakeup

            return RelayedWakeup(self) if self.listen_url else PolledWakeup(self)
        self.on_connect(
            lambda conn: conn.execute(WORKER_SESSION)
        )  # (only workers wait: see WORKER_SESSION)
        return PgWakeup(self)

    # -- workers --------------------------------------------------------------------------------

    def claim(self, owner: str, owner_pid: int, now: float, limit: int = 1) -> list[Job]:
        """Take up to ``limit`` due pending jobs in claim order (one autocommit statement);
        nothing while the queue is paused."""
        if limit < 1:
            return []
        params = {"owner": owner, "pid": owner_pid, "now": iso(now), "limit": limit}
        return in_claim_order(Job.from_values(r) for r in self._claim_rows(self.conn, params))

    def _claim_rows(self, c: Any, params: dict[str, Any]) -> list[Any]:
        """The claim statement on ``c``, for each queue served until one gives jobs."""
        with c.cursor(row_factory=tuple_row) as cur:
            return first_claimed(
                self.claim_order(),
                lambda q: cur.execute(
                    _CLAIM if q is None else _CLAIM_QUEUE,
                    params if q is None else {**params, "queue": q},
                ).fetchall(),
            )

    def finish(self, f: Finish, owner: str, now: float) -> bool:
        """Record one outcome with one guarded autocommit update; False: the lease was lost
        (an outcome that had committed before, re-sent after an unknown commit, is recognised
        by its history row and reported True, not applied again)."""
        return finish_one(self.conn, f, owner, iso(now), (self.channel, self.done_channel))

    def finish_and_claim(
        self,
        finishes: Sequence[Finish],
        owner: str,
        owner_pid: int,
        now: Now,
        limit: int,
        limits: Any = None,
        types: Sequence[str] | None = None,
    ) -> tuple[list[bool], list[Job]]:
        """Record outcomes and claim up to ``limit`` more. A single outcome with a single
        claim is two autocommit statements (cheaper here than one transaction: round trips set
        the cost); a batch is one transaction. Per finish whether it matched, and the jobs.
        With ``limits`` or ``types`` (only jobs of these types) the claim is the limited one;
        ``now``: a time, or a clock's ``now``, which it reads once it holds its lock."""
        limits = (limits or {}) if types is not None else (limits or None)  # None: the fast claim
        if limits is None:
            now = read_now(now)
        stamp = iso(now) if limits is None else ""
        if not finishes:
            if limits is not None:
                return [], self.claim_limited(owner, owner_pid, now, limits, limit, types=types)
            return [], self.claim(owner, owner_pid, now, limit)
        if limits is None and all(f.kind == "completed" for f in finishes):
            return self._complete_and_claim(finishes, owner, owner_pid, stamp, limit)
        if len(finishes) == 1 and limit <= 1 and limits is None:
            done = [self.finish(finishes[0], owner, now)]
            return done, self.claim(owner, owner_pid, now, limit)
        tx = self._batch_tx(finishes, owner, owner_pid, now, limit, limits, types)
        done, got = self._limited_tx(tx) if limits is not None else self._tx(tx)
        return done, in_claim_order(g if isinstance(g, Job) else Job.from_values(g) for g in got)

    def _batch_tx(
        self,
        finishes: Sequence[Finish],
        owner: str,
        owner_pid: int,
        now: Now,
        limit: int,
        limits: Any,
        types: Sequence[str] | None,
    ) -> Callable[[Any], tuple[list[bool], list[Any]]]:
        """The transaction of :meth:`finish_and_claim` for a batch: record the outcomes, then
        claim (``limits`` None: the fast claim, ``now`` a time)."""
        stamp = iso(now) if limits is None else ""  # type: ignore[arg-type]

        def tx(c: Any) -> tuple[list[bool], list[Any]]:
            # a limited claim reads a clock's ``now`` itself, once it holds the advisory lock
            done = record_finishes(
                c, finishes, owner, stamp or iso(read_now(now)), (self.channel, self.done_channel)
            )
            if limit < 1:
                return done, []
            if limits is not None:
                return done, self.claim_limited_in(
                    c, owner, owner_pid, now, limits, limit, types=types
                )
            params = {"owner": owner, "pid": owner_pid, "now": stamp, "limit": limit}
            return done, self._claim_rows(c, params)

        return tx

    def _limited_tx(self, fn: Callable[[Any], T]) -> T:
        """A limited claim's transaction, ``fn(conn)``, in psycopg's pipeline mode: a statement
        goes without waiting for the answers before it until one is read. BEGIN, the advisory
        lock and the claim's state read travel in one round trip, the candidate reads in one
        (or in the first, once a worker's claims are steady: ``candidates._early_reads``), the claim
        with COMMIT in one (:meth:`_claim_is_last`): 2-3 round trips (7 without the pipeline, 4
        with COMMIT apart). The state read is still a statement after the lock's, so its
        snapshot sees every claim committed before the lock was granted. Run again after a
        serialization failure or deadlock, as ``_tx``."""
        for attempt in range(TX_RETRIES + 1):
            conn = self.conn
            try:
                with contextlib.ExitStack() as pipeline:
                    pipeline.enter_context(conn.pipeline())
                    conn.execute("BEGIN")
                    if self.pooled and self.local_limits:
                        conn.execute(self.local_limits)
                    self._open_pipeline = OpenPipeline(conn, pipeline)
                    out = fn(conn)
                    if self._open_pipeline is not None:  # the claim statement did not end it
                        conn.execute("COMMIT")
                return out
            except BaseException as exc:
                if conn.info.transaction_status != pq.TransactionStatus.IDLE and not conn.broken:
                    with contextlib.suppress(psycopg.Error):  # (the error that got here says why)
                        conn.execute("ROLLBACK")
                if not isinstance(exc, RETRYABLE) or attempt == TX_RETRIES:
                    raise
            finally:
                self._open_pipeline = None
        raise AssertionError("unreachable")

    def _claim_is_last(self, c: Any) -> None:
        """The claim statement just sent ends the transaction of :meth:`_limited_tx`: COMMIT goes
        after it and the pipeline ends (one Sync), so the claim and its commit take one round
        trip; the claim's rows are read after. A failed claim aborts the COMMIT with it (the
        server skips a pipeline's statements after an error until its Sync): nothing commits,
        and :meth:`_limited_tx` rolls back."""
        if self._open_pipeline is not None and self._open_pipeline.conn is c:
            pipeline, self._open_pipeline = self._open_pipeline.pipeline, None
            c.execute("COMMIT")
            pipeline.close()

    def _complete_and_claim(
        self, finishes: Sequence[Finish], owner: str, owner_pid: int, stamp: str, limit: int
    ) -> tuple[list[bool], list[Job]]:
        """Completions only, no limits: one autocommit statement with the claim from the first
        queue of the claim order (:func:`.finish.complete_and_claim_sql`); the other queues, if
        that one had nothing, one statement each, as :meth:`claim`."""
        params = completion_params(finishes, owner, stamp, self.done_channel)
        order = self.claim_order() if limit >= 1 else []
        with self.conn.cursor(row_factory=tuple_row) as cur:
            if not order:
                matched = {r[0] for r in cur.execute(COMPLETE_MANY, params).fetchall()}
                return recognised_after(self.conn, finishes, matched, owner), []
            params.update(pid=owner_pid, limit=limit, queue=order[0])
            rows = cur.execute(_COMPLETE_AND_CLAIM[order[0] is not None], params).fetchall()
        matched = {r[0] for r in rows if r[0] is not None}
        got = [r[2:] for r in rows if r[0] is None]
        claim = {"owner": owner, "pid": owner_pid, "now": stamp, "limit": limit}
        if not got and len(order) > 1:
            with self.conn.cursor(row_factory=tuple_row) as cur:
                got = first_claimed(
                    order[1:],
                    lambda q: cur.execute(
                        _CLAIM if q is None else _CLAIM_QUEUE,
                        claim if q is None else {**claim, "queue": q},
                    ).fetchall(),
                )
        if len(got) < limit and any(r[0] is not None and r[1] for r in rows):
            # a completed parent may have made children pending: claim them now, as the
            # worker that released them, rather than after an idle worker's wake-up
            got += self._claim_rows(self.conn, {**claim, "limit": limit - len(got)})
        done = recognised_after(self.conn, finishes, matched, owner)
        return done, in_claim_order(Job.from_values(r) for r in got)

    def release_unstarted(self, owner: str, job_ids: Sequence[str], now: float) -> int:
        """Give back claimed, never started jobs: pending, due now, their attempt returned."""
        if not job_ids:
            return 0
        return self.conn.execute(
            _UNCLAIM,
            {"now": iso(now), "ids": list(job_ids), "owner": owner, "channel": self.channel},
        ).fetchone()["n"]

    def analyze_if_stale(self, fraction: float = 0.1, floor: int = 500) -> bool:
        """``ANALYZE jobs`` when more than ``fraction`` of it (and ``floor`` rows) changed since
        the last analysis (see :mod:`.upkeep`); whether it ran. ANALYZE blocks no reader or
        writer."""
        row = self.conn.execute(
            "SELECT n_mod_since_analyze AS m, n_live_tup AS n FROM pg_stat_user_tables "
            "WHERE relid = %s::regclass",
            (self.table,),
        ).fetchone()
        if row is None or row["m"] <= max(floor, fraction * row["n"]):
            return False
        self.conn.execute("ANALYZE jobs")
        return True

    def fold_counts(self) -> None:
        """Fold the appended count deltas into ``job_counts`` (upkeep; safe to run anywhere)."""
        self.conn.execute(FOLD_COUNTS)
