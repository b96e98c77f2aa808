"""Pieces of SQL the read layer's statements share (engine-neutral, ``:name`` parameters)."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from shared.engines.contract import OpsStore

# The partial indexes jobs_finished / jobs_dead serve a query only if their own condition
# appears literally (on some engines) or is implied (on others): statements spell it out.
FINISHED = "status IN ('completed', 'failed', 'cancelled')"
DEAD = "status IN ('failed', 'cancelled')"

# A finished job no other job still needs: none of its children has yet to run (a child reads
# its parents' results when it runs; workflows). Every delete of finished jobs keeps the others,
# as retention does: KEPT says why.
UNNEEDED = (
    "(has_children = 0 OR NOT EXISTS (SELECT 1 FROM job_deps d JOIN jobs c "
    "ON c.id = d.child WHERE d.parent = jobs.id "
    "AND c.status IN ('waiting', 'pending', 'running')))"
)
KEPT = "kept: a job waiting on it has yet to run and reads its result"
KEPT_WHY = "jobs waiting on them have yet to run and read their results"

# A job row as the listings show it (``list_jobs``).
JOB_ROW = (
    "id, type, status, attempts, max_attempts, priority, run_at, started_at, completed_at, "
    "created_at, updated_at, key, owner_pid, error"
)


def storable(store: OpsStore, items: Iterable[str]) -> list[str]:
    """The job ids among ``items`` that can exist: without those the engine's ids cannot hold
    (a NUL where text has none, anything but 32 hex digits where ids are uuids: no row has one,
    and the driver or the server would refuse the statement)."""
    is_id = store.dialect.is_id
    if store.dialect.nul_text:
        return [i for i in items if is_id(i)]
    return [i for i in items if "\x00" not in i and is_id(i)]


def id_range(prefix: str) -> tuple[str, str]:
    """The ids that start with ``prefix`` (any case) as a range ``lo <= id <= hi`` over the
    primary key, for jobq's ids (32 hex digits, whatever the column's type). Where no id can
    start so (not hex, or too long), an empty range (``lo > hi``) that every engine can read."""
    if len(prefix) > 32 or any(ch not in "0123456789abcdefABCDEF" for ch in prefix):
        return "f" * 32, "0" * 32
    return prefix.lower().ljust(32, "0"), prefix.lower().ljust(32, "f")


def one_of(
    store: OpsStore, col: str, items: Sequence[str], name: str = "ids"
) -> tuple[str, dict[str, Any]]:
    """The condition "``col`` (a job id column) is one of ``items``" as one parameter ``name``,
    and its params (one item, the commonest, as a plain equality: no list to build or unpack)."""
    if len(items) == 1:
        return f"{col} = :{name}", {name: items[0]}
    param = f":{name}" if store.dialect.json_lists else f":{name}::{store.dialect.id_type}[]"
    return store.dialect.any_of.format(col=col, param=param), {
        name: store.dialect.list_param(items)
    }
