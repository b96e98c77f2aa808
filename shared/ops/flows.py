"""A job's place in its workflow, for ``jobq show`` and the dashboard's job page: its
parents (in the order given), its children, and the graph's progress (its jobs by status)."""

from __future__ import annotations

from typing import Any

from shared.engines.contract import OpsStore

_PARENTS = """
SELECT d.parent AS id, j.type, j.status, d.done FROM job_deps d LEFT JOIN jobs j ON j.id = d.parent
WHERE d.child = :id ORDER BY d.pos
"""
_CHILDREN = """
SELECT d.child AS id, j.type, j.status, j.after_failure FROM job_deps d JOIN jobs j ON j.id = d.child
WHERE d.parent = :id ORDER BY d.child
"""
# Every job connected to this one through edges in either direction (UNION: each once, so the
# walk ends), counted by status.
_GRAPH = """
WITH RECURSIVE g(id) AS (
    SELECT id FROM jobs WHERE id = :id
    UNION
    SELECT CASE WHEN d.child = g.id THEN d.parent ELSE d.child END
    FROM job_deps d JOIN g ON d.child = g.id OR d.parent = g.id
)
SELECT j.status, count(*) AS n FROM g JOIN jobs j ON j.id = g.id GROUP BY j.status
"""


def relatives(store: OpsStore, job_id: str) -> dict[str, Any]:
    """``parents`` and ``children`` (id, type, status; status None: deleted) and ``graph``
    (status -> jobs of the whole connected graph; {} for a job outside any workflow)."""
    params = {"id": store.dialect.lookup_id(job_id)}
    parents = store.read(_PARENTS, params)
    children = store.read(_CHILDREN, params)
    graph: dict[str, int] = {}
    if parents or children:
        graph = {r["status"]: int(r["n"]) for r in store.read(_GRAPH, params)}
    return {"parents": parents, "children": children, "graph": graph}


def relatives_text(rel: dict[str, Any]) -> str:
    """``jobq show``'s workflow lines ("" for a job outside any workflow)."""
    if not rel["parents"] and not rel["children"]:
        return ""
    lines = ["", "workflow: " + ", ".join(f"{n} {s}" for s, n in sorted(rel["graph"].items()))]
    for title, rows in (("parents", rel["parents"]), ("children", rel["children"])):
        if rows:
            lines.append(f"{title}:")
            lines += [f"  {r['id']}  {r['type'] or '-'}  {r['status'] or 'deleted'}" for r in rows]
    return "\n".join(lines)
