"""The PostgreSQL engine's outcome statements: a running job completed, retried, failed or cancelled, each
guarded by id, ``running``, attempt and owner, and writing the attempt it ends into
``job_attempts`` in the same statement (a batch's completions: one ``UPDATE`` of the batch's ids).

Each outcome writes its run's own start and end (``shared.model.job.Finish``: a batch's jobs share
one claim and one commit, not their run times). When the guard matches nothing, the outcome's own
history row is looked for: an outcome re-sent after an error that left its commit unknown (the
connection dropped after ``COMMIT``, or between the single-job path's finish and claim) finds
the row it wrote, and is reported recorded instead of lost, never applied twice.
"""

from __future__ import annotations

from typing import Any, Sequence

from psycopg.rows import tuple_row
from psycopg.types.json import Jsonb

from shared.runtime.clock import IsoTimes
from shared.model.job import Finish, finish_times
from ..sql import JOB_COLUMNS, RELEASE
from ..sql.finish import outcome_params, recognise
from .connection import notify_done
from .dialect import DIALECT, pg_json, pg_text, uuid_text

Channels = tuple[str, str]  # (the channel of new due jobs, the channel of ended jobs)

_GUARD = (
    "WHERE jobs.id = %(id)s AND jobs.status = 'running' AND jobs.attempts = %(attempt)s "
    "AND jobs.owner = %(owner)s"
)

# An attempt that ended is recorded by the statement that ends it (``job_attempts``, see the
# schema): ``u`` is that UPDATE's RETURNING (id, type, attempts, was_run_at, created_at,
# started_at, ended_at: the run's own start and end, which the outcome wrote), the attempt's due
# time being the later of its run_at before the update and its creation. (A statement trigger
# would need a join of its old and new rows, which PL/pgSQL plans once, for the first
# statement's row counts: quadratic for a later batch of 500.)
_ENDED = (
    "a AS (INSERT INTO job_attempts (job_id, type, attempt, outcome, due_at, started_at, ended_at, "
    "owner, error) SELECT id, type, attempts, {outcome}, greatest(was_run_at, created_at), started_at, "
    "ended_at, %(owner)s, {error} FROM u)"
)
_RETURNED = (
    " RETURNING jobs.id, jobs.type, jobs.attempts, {was} AS was_run_at, jobs.created_at, "
    "jobs.started_at, jobs.ended_at, jobs.has_children"
)
# The run's own start (kept when the outcome has none) and end; a finished job ended then. And
# the handler's last progress report (the check-in's may be older; none: the stored one).
_RAN = (
    "started_at = coalesce({started}, jobs.started_at), ended_at = {ended}, "
    "progress = coalesce({progress}, jobs.progress), "
)
_RAN_ONE = _RAN.format(
    started="%(started)s::timestamptz", ended="%(ended)s", progress="%(progress)s::jsonb"
)

# Jobs ended: one notification on the done channel with the transaction, if anyone waits
# (waiters LISTEN there, shared.engines.postgres.donewatch, and say so: connection.WAITERS; the
# server folds repeats within a transaction into one).
_DONE = " SELECT id FROM u, " + notify_done()

_FINISH_SQL = {
    "completed": "WITH u AS (UPDATE jobs SET status = 'completed', result = %(text)s, "
    + _RAN_ONE
    + "completed_at = %(ended)s, updated_at = %(now)s, "
    + RELEASE
    + _GUARD
    + _RETURNED.format(was="jobs.run_at")
    + "), "
    + _ENDED.format(outcome="'completed'", error="NULL")
    + _DONE,
    # a retry makes the job pending again: notify, so idle workers learn when it is due
    # (and may store the trace context its next attempt links to; None: the stored one stays)
    "retry": "WITH u AS (UPDATE jobs SET status = 'pending', error = %(text)s, run_at = %(run_at)s, "
    + _RAN_ONE
    + "trace = coalesce(%(trace)s::text, jobs.trace), max_attempts = coalesce(max_attempts, %(max)s), updated_at = %(now)s, "
    + RELEASE
    + "FROM (SELECT run_at AS was FROM jobs WHERE id = %(id)s) o "
    + _GUARD
    + _RETURNED.format(was="o.was")
    + "), "
    + _ENDED.format(outcome="'retry'", error="%(text)s")
    + " SELECT id FROM u, pg_notify(%(channel)s, '')",
    "failed": "WITH u AS (UPDATE jobs SET status = 'failed', error = %(text)s, "
    + _RAN_ONE
    + "completed_at = %(ended)s, updated_at = %(now)s, max_attempts = coalesce(max_attempts, %(max)s), "
    + RELEASE
    + _GUARD
    + _RETURNED.format(was="jobs.run_at")
    + "), "
    + _ENDED.format(outcome="'failed'", error="%(text)s")
    + _DONE,
    "cancelled": "WITH u AS (UPDATE jobs SET status = 'cancelled', error = %(text)s, "
    + _RAN_ONE
    + "completed_at = %(ended)s, updated_at = %(now)s, "
    + RELEASE
    + _GUARD
    + _RETURNED.format(was="jobs.run_at")
    + "), "
    + _ENDED.format(outcome="'cancelled'", error="%(text)s")
    + _DONE,
}
# A batch's completions: one guarded statement (and their attempts); it returns the ids of the
# jobs whose guard matched. Each job's own values (attempt, result, run start and end, last
# progress) are read from one jsonb object keyed by id, not joined from unnest()ed arrays: the
# rows are found by key (``id = ANY``) and nothing is joined, so the plan a worker's session
# keeps for every batch size (store.WORKER_SESSION) cannot become a nested loop over the batch
# (quadratic).
_F = "(%(done_map)s::jsonb -> jobs.id::text)"  # keyed by the uuid's own text (uuid_text)
_COMPLETED = (
    "u AS (UPDATE jobs SET status = 'completed', result = ("
    + _F
    + " ->> 1)::jsonb, "
    + _RAN.format(
        started=f"({_F} ->> 2)::timestamptz",
        ended=f"({_F} ->> 3)::timestamptz",
        progress=f"({_F} ->> 4)::jsonb",
    )
    + "completed_at = ("
    + _F
    + " ->> 3)::timestamptz, "
    "updated_at = %(now)s, "
    + RELEASE
    + "WHERE jobs.id = ANY(%(ids)s::uuid[]) AND jobs.status = 'running' "
    "AND jobs.attempts = ("
    + _F
    + " ->> 0)::int AND jobs.owner = %(owner)s"
    + _RETURNED.format(was="jobs.run_at")
    + "), "
    + _ENDED.format(outcome="'completed'", error="NULL")
)
COMPLETE_MANY = "WITH " + _COMPLETED + _DONE
_NO_JOB = ", ".join("NULL" for _ in JOB_COLUMNS.split(","))


def complete_and_claim_sql(claim: str) -> str:
    """A batch's completions and the next claim (``claim``: an ``UPDATE ... RETURNING`` of
    :data:`JOB_COLUMNS`) as one autocommit statement: one round trip where ``BEGIN``, two
    statements and ``COMMIT`` took four (half a worker's time on a drain went to waiting for
    ``BEGIN`` and ``COMMIT``). The two updates touch disjoint rows (this owner's running jobs;
    pending ones). Rows: ``(done id, has_children, NULL...)`` per matched completion, then
    ``(NULL, NULL, job columns)`` per claimed job. The claim shares the statement's snapshot, so
    it cannot see the children the completions make pending (the schema's triggers settle them
    as the statement ends): ``has_children`` tells the caller a claim after it may find some."""
    return (
        "WITH "
        + _COMPLETED
        + ", c AS ("
        + claim
        + ") SELECT id AS done, has_children, "
        + _NO_JOB
        + " FROM u, "
        + notify_done()
        + " UNION ALL SELECT NULL, NULL, "
        + JOB_COLUMNS
        + " FROM c"
    )


def completion_params(
    finishes: Sequence[Finish], owner: str, stamp: str, done_channel: str
) -> dict[str, Any]:
    """The parameters of :data:`COMPLETE_MANY` (and of :func:`complete_and_claim_sql`)."""
    text = IsoTimes()  # a batch's run times share their seconds: each second's text made once
    done_map = {
        uuid_text(f.job_id): [
            f.attempt,
            pg_json(f.text),
            *finish_times(f, stamp, text),
            pg_json(f.progress),
        ]
        for f in finishes
    }
    return {
        "now": stamp,
        "owner": owner,
        "done": done_channel,
        "ids": list(done_map),
        "done_map": Jsonb(done_map),
    }


def recognised_after(
    c: Any, finishes: Sequence[Finish], matched: set[str], owner: str
) -> list[bool]:
    """Per finish, whether its guard matched (``matched`` ids) or it had committed before."""
    return recognise(DIALECT, c, finishes, [f.job_id in matched for f in finishes], owner)


def finish_one(c: Any, f: Finish, owner: str, stamp: str, channels: Channels) -> bool:
    """One outcome in one guarded autocommit statement (the single-job path); whether it is
    recorded (matched, or had committed before)."""
    if _finish_one(c, f, owner, stamp, channels):
        return True
    return recognise(DIALECT, c, [f], [False], owner)[0]


def record_finishes(
    c: Any, finishes: Sequence[Finish], owner: str, stamp: str, channels: Channels
) -> list[bool]:
    """The guarded updates of ``finishes`` (completions in one statement); per finish, matched
    or committed before."""
    completed = [f for f in finishes if f.kind == "completed"]
    matched: set[str] = set()
    if completed:
        params = completion_params(completed, owner, stamp, channels[1])
        with c.cursor(row_factory=tuple_row) as cur:
            matched = {r[0] for r in cur.execute(COMPLETE_MANY, params).fetchall()}
    done = [
        f.job_id in matched if f.kind == "completed" else _finish_one(c, f, owner, stamp, channels)
        for f in finishes
    ]
    # an outcome re-sent after an unknown commit finds its own history row
    # (shared.model.job.recognised)
    return recognise(DIALECT, c, finishes, done, owner)


def _finish_one(c: Any, f: Finish, owner: str, stamp: str, channels: Channels) -> bool:
    """One guarded outcome statement; whether it matched (RETURNING: its notification)."""
    params = {
        **outcome_params(f, owner, stamp, pg_text, pg_json),
        "channel": channels[0],
        "done": channels[1],
    }
    return len(c.execute(_FINISH_SQL[f.kind], params).fetchall()) == 1
