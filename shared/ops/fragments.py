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

TOP = "\U0010ffff"  # above every character: ``id >= p AND id < p || TOP`` is the prefix range of p


def storable(store: OpsStore, items: Iterable[str]) -> list[str]:
    """``items`` without those the engine's text cannot hold (a NUL where text has none: no row
    has one, and the driver would refuse the statement)."""
    if store.dialect.nul_text:
        return list(items)
    return [i for i in items if "\x00" not in i]


def one_of(
    store: OpsStore, col: str, items: Sequence[str], name: str = "ids"
) -> tuple[str, dict[str, Any]]:
    """The condition "``col`` is one of ``items``" as one parameter ``name``, and its params (one
    item, the commonest, as a plain equality: no list to build or unpack)."""
    if len(items) == 1:
        return f"{col} = :{name}", {name: items[0]}
    return store.dialect.any_of.format(col=col, param=f":{name}"), {
        name: store.dialect.list_param(items)
    }
