"""Jobs by filter, by id prefix and by id, with their attempt history (``jobq list``, ``show``,
``retry``/``cancel``/``purge`` by id, the dashboard's job page). Every order follows an index.
"""

from __future__ import annotations

from typing import Any, Sequence

from shared.engines.contract import OpsStore
from shared.model.job import TERMINAL
from .fragments import FINISHED, JOB_ROW, id_range, one_of, storable

_LIST_ORDER = {
    None: "id DESC",  # newest first (ids are time-ordered)
    "pending": "priority DESC, run_at, created_at",  # claim order: what runs next first
    "running": "started_at",
}
# Finish time, newest first, along jobs_finished (a backward scan). A finished row without
# completed_at (jobq writes none; an old copied row may lack it) sorts where the engine's index
# has it: "NULLS LAST" would not follow PostgreSQL's index and sorts every finished job.
_FINISHED_ORDER = "completed_at DESC, id DESC"
_CHUNK = 500  # ids per statement of a lookup by id


def list_jobs(
    store: OpsStore, status: str | None = None, job_type: str | None = None, limit: int = 50
) -> list[dict[str, Any]]:
    """Jobs filtered by ``status`` and ``job_type``, at most ``limit``. Order: newest first; pending
    jobs in claim order; running by start; finished ones by finish time, newest first. Each
    order follows an index, so a listing costs the same in a big database."""
    where = []
    if status is not None:
        where.append(
            f"{FINISHED} AND status = :status" if status in TERMINAL else "status = :status"
        )
    if job_type is not None:
        where.append("type = :type")
    sql = f"SELECT {JOB_ROW} FROM jobs" + (" WHERE " + " AND ".join(where) if where else "")
    order = _LIST_ORDER.get(status, _FINISHED_ORDER)
    return store.read(
        f"{sql} ORDER BY {order} LIMIT :limit", {"status": status, "type": job_type, "limit": limit}
    )


def find_ids(store: OpsStore, prefix: str, limit: int = 2) -> list[str]:
    """Ids that start with ``prefix`` (a range over the primary key), at most ``limit``."""
    lo, hi = id_range(prefix)
    if lo > hi:
        return []  # no id of jobq's starts so
    rows = store.read(
        "SELECT id FROM jobs WHERE id >= :lo AND id <= :hi ORDER BY id LIMIT :limit",
        {"lo": lo, "hi": hi, "limit": limit},
    )
    return [r["id"] for r in rows]


def statuses(store: OpsStore, ids: Sequence[str]) -> dict[str, str]:
    """``{id: status}`` of the ids that exist."""
    wanted, out = storable(store, ids), {}
    for at in range(0, len(wanted), _CHUNK):
        cond, params = one_of(store, "id", wanted[at : at + _CHUNK])
        for r in store.read(f"SELECT id, status FROM jobs WHERE {cond}", params):
            out[r["id"]] = r["status"]
    return out


def attempt_history(store: OpsStore, job_id: str) -> list[dict[str, Any]]:
    """The ended attempts of one job, oldest first (``job_attempts``, written by the triggers)."""
    return store.read(
        "SELECT seq, attempt, outcome, due_at, started_at, ended_at, owner, error FROM job_attempts "
        "WHERE job_id = :id ORDER BY seq",
        {"id": store.dialect.lookup_id(job_id)},
    )


def job_texts(store: OpsStore, job_id: str) -> dict[str, Any] | None:
    """``{payload, result}``: the stored JSON text of a job (None for a result not set), or None
    when no job has that id."""
    rows = store.read(
        "SELECT payload, result FROM jobs WHERE id = :id", {"id": store.dialect.lookup_id(job_id)}
    )
    return rows[0] if rows else None
