"""The operators' writes to jobs: retry, cancel and purge, by id or in bulk.

By id: one statement (or one short transaction) for the ids given; the ids done come back in the
order given (a cancel of many ids: one short transaction per ``BATCH`` of them). In bulk
(``retry_failed``, ``cancel_pending``, ``purge``): batches by id, each its own short
transaction paced by the engine (``OpsStore.batches``: where the database has one write lock it
is left free between two batches so workers' writes get in; where it locks rows, each batch
locks its rows and checks them again), so no transaction grows with the table. The bulk writes
take ``progress``, called with the count so far after each batch (``jobq``'s progress line).

No delete takes a finished job that a job waiting on it still needs (``UNNEEDED``: the child
reads its parents' results when it runs), as retention keeps them; ``kept_parents`` counts them.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from shared.runtime.clock import iso
from shared.engines.contract import OpsStore
from shared.model.job import TERMINAL
from .fragments import FINISHED, UNNEEDED, one_of, storable

BATCH = 1000  # rows per statement of a bulk write, to start with
Progress = Callable[[int], None]  # called with how many rows were done so far
RETRYABLE = ("failed", "cancelled")

_RETRY = (
    "UPDATE jobs SET status = 'pending', attempts = 0, run_at = :now, completed_at = NULL, updated_at = :now, "
    "cancel_requested_at = NULL, progress = NULL "
)


def retry_jobs(store: OpsStore, ids: Sequence[str], now: float) -> list[str]:
    """Put failed or cancelled jobs back to pending, due now, with their attempts reset. One
    statement; the ids retried, in the order given (others were missing or in another state)."""
    done = _by_ids(
        store,
        _RETRY + "WHERE {ids} AND status IN ('failed', 'cancelled') RETURNING id",
        {"now": iso(now)},
        ids,
    )
    if done:
        store.wake_idle()
    return done


def retry_failed(
    store: OpsStore, now: float, job_type: str | None = None, progress: Progress | None = None
) -> int:
    """Retry every failed job (of ``job_type``), ``BATCH`` per transaction. Returns how many."""
    n = store.batches(
        _RETRY + f"WHERE {_next(store, _failed(job_type))} RETURNING id",
        {"now": iso(now), "type": job_type},
        BATCH,
        progress,
    )
    if n:
        store.wake_idle()
    return n


def count_failed(store: OpsStore, job_type: str | None = None) -> int:
    """How many failed jobs (of ``job_type``) ``retry_failed`` would retry now."""
    return _count(store, _failed(job_type), {"type": job_type})


def _failed(job_type: str | None) -> str:
    return f"{FINISHED} AND status = 'failed'" + ("" if job_type is None else " AND type = :type")


_CANCEL = (
    "UPDATE jobs SET status = 'cancelled', completed_at = :now, updated_at = :now "
    "WHERE {ids} AND status IN ('pending', 'waiting') RETURNING id"
)
# A running job: the request is marked and the supervisors are notified (notify_controls); the
# worker's next check-in reads it and stops the handler, the supervisor kills it after cancel_grace.
_REQUEST = (
    "UPDATE jobs SET cancel_requested_at = coalesce(cancel_requested_at, :now) "
    "WHERE {ids} AND status = 'running' RETURNING id"
)


def cancel_jobs(store: OpsStore, ids: Sequence[str], now: float) -> list[str]:
    """Cancel the named jobs (:func:`cancel_each`); the ids acted on, ended or asked to stop."""
    return list(cancel_each(store, ids, now))


def cancel_each(
    store: OpsStore, ids: Sequence[str], now: float, progress: Progress | None = None
) -> dict[str, str]:
    """Cancel the named jobs: a pending or waiting one ends ``cancelled`` at once (its waiting
    dependants settled in the same statement by the schema's trigger), a running one gets a
    cancel request (it ends ``cancelled`` when its worker stops it, unless it completes first:
    each guarded write decides). One short transaction per ``BATCH`` ids. ``{id: "cancelled"
    or "requested"}`` for the ids acted on, in the order given."""
    wanted, done = storable(store, dict.fromkeys(ids)), {}
    for at in range(0, len(wanted), BATCH):
        cond, more = one_of(store, "id", wanted[at : at + BATCH])
        params = {"now": iso(now), **more}

        def tx(run: Any) -> dict[str, str]:
            ended = {r["id"]: "cancelled" for r in run(_CANCEL.format(ids=cond), params)}
            asked = {r["id"]: "requested" for r in run(_REQUEST.format(ids=cond), params)}
            return {**ended, **asked}

        done.update(store.transaction(tx))
        if progress is not None:
            progress(min(at + BATCH, len(wanted)))
    if "requested" in done.values():  # after the commit: the supervisors tell their workers
        store.notify_controls("cancel")
    return {i: done[i] for i in wanted if i in done}


def cancel_pending(
    store: OpsStore, now: float, job_type: str | None = None, progress: Progress | None = None
) -> int:
    """Cancel every pending or waiting job (of ``job_type``), ``BATCH`` per transaction, each
    with its waiting dependants (the schema's trigger). Running jobs are left alone (cancel
    them by id: they are asked to stop). Returns how many ended ``cancelled``."""
    sql = _CANCEL.format(ids=_next(store, _unstarted(job_type)))
    return store.batches(sql, {"now": iso(now), "type": job_type}, BATCH, progress)


def count_unstarted(store: OpsStore, job_type: str | None = None) -> int:
    """How many pending or waiting jobs (of ``job_type``) ``cancel_pending`` would cancel now."""
    return _count(store, _unstarted(job_type), {"type": job_type})


def _unstarted(job_type: str | None) -> str:
    return "status IN ('pending', 'waiting')" + ("" if job_type is None else " AND type = :type")


def purge_jobs(store: OpsStore, ids: Sequence[str]) -> list[str]:
    """Delete the named jobs that are finished (completed, failed or cancelled) and that no job
    waiting on them still needs, with their attempt history (trigger). One statement; the ids
    deleted, in the order given."""
    sql = f"DELETE FROM jobs WHERE {{ids}} AND {FINISHED} AND {UNNEEDED} RETURNING id"
    return _by_ids(store, sql, {}, ids)


def purge(
    store: OpsStore,
    status: str,
    before: float,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> int:
    """Delete jobs of a terminal ``status`` that finished before ``before`` (a job without
    ``completed_at`` counts from ``updated_at``), ``BATCH`` per transaction; their attempt history
    goes with them (trigger). A job a waiting job still needs is kept (:func:`kept_parents`).
    With ``dry_run``, count only. Returns how many."""
    cond, params = _purgeable(status, before)
    if dry_run:
        return _count(store, f"{cond} AND {UNNEEDED}", params)
    rows = _next(store, f"{cond} AND {UNNEEDED}")
    return store.batches(f"DELETE FROM jobs WHERE {rows} RETURNING id", params, BATCH, progress)


def kept_parents(store: OpsStore, status: str, before: float) -> int:
    """How many jobs :func:`purge` keeps (would keep) for the jobs waiting on them."""
    cond, params = _purgeable(status, before)
    return _count(store, f"{cond} AND has_children <> 0 AND NOT {UNNEEDED}", params)


def _purgeable(status: str, before: float) -> tuple[str, dict[str, Any]]:
    if status not in TERMINAL:
        raise ValueError(f"purge: status must be one of {', '.join(TERMINAL)}, got {status!r}")
    cond = f"{FINISHED} AND status = :status AND coalesce(completed_at, updated_at) < :before"
    return cond, {"status": status, "before": iso(before)}


def _count(store: OpsStore, cond: str, params: dict[str, Any]) -> int:
    return int(store.read(f"SELECT count(*) AS n FROM jobs WHERE {cond}", params)[0]["n"])


def _next(store: OpsStore, cond: str) -> str:
    """The condition "``id`` is one of the next rows of a batched write": by id after the last
    one done, so each row is looked at once however many that do not qualify lie before; locked
    and checked again where the engine locks rows (a row changed meanwhile is passed over, and
    the batch still fills)."""
    rows = f"SELECT id FROM jobs WHERE id > :after AND {cond} ORDER BY id LIMIT :batch{store.dialect.lock}"
    return store.dialect.in_rows.format(col="id", rows=rows)


def _by_ids(store: OpsStore, sql: str, params: dict[str, Any], ids: Sequence[str]) -> list[str]:
    """Run ``sql`` (``{ids}``: where the condition on the ids goes; ``... RETURNING id``) for
    ``ids``; the ids it touched, in the order given, each once."""
    wanted = storable(store, dict.fromkeys(ids))
    if not wanted:
        return []
    cond, more = one_of(store, "id", wanted)
    done = {r["id"] for r in store.write(sql.format(ids=cond), {**params, **more})}
    return [i for i in wanted if i in done]
