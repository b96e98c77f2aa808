"""The SQLite engine's outcome statements: a running job completed, retried, failed or cancelled, each
guarded by id, ``running``, attempt and owner (a batch's completions: one ``UPDATE ... FROM
(VALUES ...)``). The ``jobs_attempt_ended`` trigger (see the schema) records the attempt each
one ends, with the run's own start and end that the outcome writes (``shared.model.job.Finish``: a
batch's jobs share one claim and one commit, not their run times).

When the guard matches nothing, the outcome's own history row is looked for: an outcome re-sent
after an error that left its commit unknown finds the row it wrote, and is reported recorded
instead of lost, never applied twice.
"""

from __future__ import annotations

import functools
import sqlite3
from typing import Any, Sequence

from shared.runtime.clock import IsoTimes
from shared.model.job import Finish
from ..sql import RELEASE
from ..sql.finish import outcome_params, recognise
from . import flowsettle, tally
from .dialect import DIALECT

_GUARD = "WHERE id = :id AND status = 'running' AND attempts = :attempt AND owner = :owner"

# An outcome writes its run's own start and end (``started_at`` kept when it has none; the
# attempt history's trigger reads them, see the schema) and, for a finished job, ends it then;
# and the handler's last progress report (the check-in's may be older; none: the stored one).
_RAN = (
    "started_at = coalesce(:started, started_at), ended_at = :ended, "
    "progress = coalesce(:progress, progress), "
)
_FINISH_SQL = {
    "completed": "UPDATE jobs SET status = 'completed', result = :text, "
    + _RAN
    + "completed_at = :ended, "
    "updated_at = :now, " + RELEASE + _GUARD,
    # a retry may store the trace context its next attempt links to (None: the stored one stays)
    "retry": "UPDATE jobs SET status = 'pending', error = :text, run_at = :run_at, "
    + _RAN
    + "trace = coalesce(:trace, trace), max_attempts = coalesce(max_attempts, :max), updated_at = :now, "
    + RELEASE
    + _GUARD,
    "failed": "UPDATE jobs SET status = 'failed', error = :text, "
    + _RAN
    + "completed_at = :ended, "
    "updated_at = :now, max_attempts = coalesce(max_attempts, :max), " + RELEASE + _GUARD,
    "cancelled": "UPDATE jobs SET status = 'cancelled', error = :text, "
    + _RAN
    + "completed_at = :ended, "
    "updated_at = :now, " + RELEASE + _GUARD,
}

# All of a batch's completions in one guarded statement (the hot path: one statement per commit
# instead of one per job). RETURNING names the jobs whose guard matched; the others lost their
# lease. ?1 is the time, ?2 the owner, then (id, attempt, result, started, ended, progress)
# per job, with '' for none (a result, progress or time is never empty text): Python's sqlite3
# binds None through its adapter lookup, several times the cost of a text, on every job's path.
_COMPLETE_MANY = (
    "UPDATE jobs SET status = 'completed', result = nullif(f.column3, ''), "
    "started_at = coalesce(nullif(f.column4, ''), jobs.started_at), ended_at = f.column5, "
    "progress = coalesce(nullif(f.column6, ''), jobs.progress), "
    "completed_at = f.column5, updated_at = ?1, " + RELEASE + "FROM (VALUES {rows}) AS f "
    "WHERE jobs.id = f.column1 AND jobs.status = 'running' AND jobs.attempts = f.column2 "
    "AND jobs.owner = ?2 RETURNING jobs.id, jobs.type, jobs.has_children"
)


@functools.lru_cache(maxsize=32)  # a pure function's memo: the dozen padded sizes' texts
def _complete_many_sql(n: int, counted: bool = False) -> str:
    sql = (
        _COMPLETE_MANY.replace("SET status", "SET " + tally.MARK + flowsettle.MARK + "status")
        if counted
        else _COMPLETE_MANY
    )
    return sql.format(
        rows=", ".join(
            [
                f"(?{i}, ?{i + 1}, ?{i + 2}, ?{i + 3}, ?{i + 4}, ?{i + 5})"
                for i in range(3, 6 * n + 3, 6)
            ]
        )
    )


# a row of padding: no job has an empty id, and a running job's attempt is at least 1
_PAD = ("", -1, "", "", "", "")


def _complete_many(n: int, counted: bool) -> tuple[str, int]:
    """The statement for ``n`` completions and how many rows it takes: the next power of two,
    the rest padded. A dozen texts, each prepared once and then found in the connection's
    statement cache, where one text per batch size had most commits prepare a new statement."""
    size = 1 << (n - 1).bit_length()
    return _complete_many_sql(size, counted), size


def fetch_rows(c: sqlite3.Connection, sql: str, params: Any) -> list[tuple]:
    """Run a statement (the job columns for a claim); plain tuples, fully fetched."""
    cur = c.cursor()
    cur.row_factory = None
    return cur.execute(sql, params).fetchall()


def completions(
    finishes: Sequence[Finish], owner: str, stamp: str, counted: bool = False
) -> tuple[str, list] | None:
    """The statement completing the completions of ``finishes`` at ``stamp``, and its parameters
    (None: there are none). Built before ``BEGIN IMMEDIATE`` where the caller can: 8 workers on
    2 cores held the write lock about 90% of a drain, and the per-job Python of these
    parameters, run with the lock held, was a seventh of the time it was held."""
    completed = [f for f in finishes if f.kind == "completed"]
    if not completed:
        return None
    params: list[Any] = [stamp, owner]
    text = IsoTimes()  # a batch's times share their seconds
    for f in completed:  # (finish_times's two times, written out: every job's path)
        s, e = f.started, f.ended
        params += (
            f.job_id,
            f.attempt,
            f.text or "",
            "" if s is None else text(s),
            stamp if e is None else text(e),
            f.progress or "",
        )
    sql, size = _complete_many(len(completed), counted)
    params += _PAD * (size - len(completed))
    return sql, params


def record_finishes(
    c: sqlite3.Connection,
    finishes: Sequence[Finish],
    owner: str,
    stamp: str,
    counted: bool = False,
    prepared: tuple[str, list] | None = None,
) -> list[bool]:
    """Run the guarded updates of ``finishes`` (completions together) at ``stamp``; per finish,
    is it recorded: did it match, or had it committed before. ``counted`` (inside a transaction
    only): the completions' counts are added here, per statement (``.tally``). ``prepared``:
    :func:`completions` of the same arguments, made by the caller before its transaction."""
    matched: set[str] = set()
    completion = prepared or completions(finishes, owner, stamp, counted)
    if completion is not None:
        rows = fetch_rows(c, *completion)
        matched = {r[0] for r in rows}
        if counted:
            tally.add(c, tally.moved((r[1] for r in rows), "running", "completed"))
            flowsettle.settle_completed(c, [r[0] for r in rows if r[2]], stamp)
    done = [
        f.job_id in matched
        if f.kind == "completed"
        else c.execute(_FINISH_SQL[f.kind], outcome_params(f, owner, stamp)).rowcount == 1
        for f in finishes
    ]
    # an outcome re-sent after an unknown commit finds its own history row
    return recognise(DIALECT, c, finishes, done, owner)
