"""The operators' writes to jobs: retry, cancel and purge, by id or in bulk.

By id: one statement (or one short transaction) for the ids given; the ids done come back in the
order given. In bulk (``retry_failed``, ``purge``): batches by id, each its own short
transaction paced by the engine (``OpsStore.batches``: where the database has one write lock it
is left free between two batches so workers' writes get in; where it locks rows, each batch
locks its rows and checks them again), so no transaction grows with the table.
"""
from __future__ import annotations

from typing import Any, Sequence

from ..clock import iso
from ..contract import OpsStore
from ..job import TERMINAL
from .fragments import FINISHED, one_of, storable

BATCH = 1000  # rows per statement of a bulk write, to start with
RETRYABLE = ("failed", "cancelled")

_RETRY = ("UPDATE jobs SET status = 'pending', attempts = 0, run_at = :now, completed_at = NULL, updated_at = :now, "
          "cancel_requested_at = NULL, progress = NULL ")


def retry_jobs(store: OpsStore, ids: Sequence[str], now: float) -> list[str]:
    """Put failed or cancelled jobs back to pending, due now, with their attempts reset. One
    statement; the ids retried, in the order given (others were missing or in another state)."""
    done = _by_ids(store, _RETRY + "WHERE {ids} AND status IN ('failed', 'cancelled') RETURNING id",
                   {"now": iso(now)}, ids)
    if done:
        store.wake_idle()
    return done


def retry_failed(store: OpsStore, now: float, job_type: str | None = None) -> int:
    """Retry every failed job (of ``job_type``), ``BATCH`` per transaction. Returns how many."""
    cond = f"{FINISHED} AND status = 'failed'" + ("" if job_type is None else " AND type = :type")
    n = store.batches(_RETRY + f"WHERE {_next(store, cond)} RETURNING id",
                      {"now": iso(now), "type": job_type}, BATCH)
    if n:
        store.wake_idle()
    return n


_CANCEL = ("UPDATE jobs SET status = 'cancelled', completed_at = :now, updated_at = :now "
           "WHERE {ids} AND status IN ('pending', 'waiting') RETURNING id")
# A running job: the request is marked; its worker sees it at its next check-in (a few times a
# second) and stops the handler, the supervisor kills it after cancel_grace.
_REQUEST = ("UPDATE jobs SET cancel_requested_at = coalesce(cancel_requested_at, :now) "
            "WHERE {ids} AND status = 'running' RETURNING id")


def cancel_jobs(store: OpsStore, ids: Sequence[str], now: float) -> list[str]:
    """Cancel the named jobs: a pending or waiting one ends ``cancelled`` at once (its waiting
    dependants settled in the same statement by the schema's trigger), a running one gets a
    cancel request (it ends ``cancelled`` when its worker stops it, unless it completes first:
    each guarded write decides). One short transaction; the ids acted on, in the order given."""
    wanted = storable(store, dict.fromkeys(ids))
    if not wanted:
        return []
    cond, more = one_of(store, "id", wanted)
    params = {"now": iso(now), **more}

    def tx(run: Any) -> set[str]:
        done = {r["id"] for r in run(_CANCEL.format(ids=cond), params)}
        return done | {r["id"] for r in run(_REQUEST.format(ids=cond), params)}
    done = store.transaction(tx)
    return [i for i in wanted if i in done]


def purge_jobs(store: OpsStore, ids: Sequence[str]) -> list[str]:
    """Delete the named jobs that are finished (completed, failed or cancelled), with their
    attempt history (trigger). One statement; the ids deleted, in the order given."""
    return _by_ids(store, f"DELETE FROM jobs WHERE {{ids}} AND {FINISHED} RETURNING id", {}, ids)


def purge(store: OpsStore, status: str, before: float, *, dry_run: bool = False) -> int:
    """Delete jobs of a terminal ``status`` that finished before ``before`` (a job without
    ``completed_at`` counts from ``updated_at``), ``BATCH`` per transaction; their attempt history
    goes with them (trigger). With ``dry_run``, count only. Returns how many."""
    if status not in TERMINAL:
        raise ValueError(f"purge: status must be one of {', '.join(TERMINAL)}, got {status!r}")
    cond = f"{FINISHED} AND status = :status AND coalesce(completed_at, updated_at) < :before"
    params = {"status": status, "before": iso(before)}
    if dry_run:
        return int(store.read(f"SELECT count(*) AS n FROM jobs WHERE {cond}", params)[0]["n"])
    return store.batches(f"DELETE FROM jobs WHERE {_next(store, cond)} RETURNING id", params, BATCH)


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
