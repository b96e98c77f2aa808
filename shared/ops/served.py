"""The job types the running supervisors serve, as they recorded them in the database.

A supervisor imports its handler modules at boot (and again at a reload that changes them) and
records what they serve: a ``control`` row ``served:<owner token>`` holding the module names and,
per job type, the queue its handler names (``@handler(queue=)``, or None). A producer reads
these rows to check the types it enqueues without importing any handler module itself
(:mod:`shared.producer.typecheck`): only rows of supervisors that still have a process row count, so
a supervisor that stopped or died serves nothing. Each row is replaced whole by its supervisor;
the rows of supervisors that are gone are dropped at the next record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from shared.engines.contract import OpsStore

PREFIX = "served:"  # control row of a supervisor's served types: PREFIX + its owner token
_UPSERT = (
    "INSERT INTO control (name, value) VALUES (:name, :value) "
    "ON CONFLICT (name) DO UPDATE SET value = excluded.value"
)
_LIVE = (
    f"SELECT c.value FROM control c "
    f"JOIN processes p ON p.id = substr(c.name, {len(PREFIX) + 1}) "
    f"WHERE c.name LIKE '{PREFIX}%' AND p.kind = 'supervisor' ORDER BY c.name"
)
_GONE = (
    f"DELETE FROM control WHERE name LIKE '{PREFIX}%' "
    f"AND substr(name, {len(PREFIX) + 1}) NOT IN (SELECT id FROM processes)"
)


@dataclass
class Served:
    """What the running supervisors serve: their handler modules, and each job type's queue
    (None: its handler names none)."""

    modules: list[str] = field(default_factory=list)
    queues: dict[str, str | None] = field(default_factory=dict)


def record_served(
    store: OpsStore,
    supervisor: str,
    modules: list[str] | tuple[str, ...],
    queues: Mapping[str, str | None],
) -> None:
    """Record what supervisor ``supervisor`` (its owner token) serves: its handler ``modules``
    and ``queues`` (job type -> its handler's queue or None). One short transaction, which also
    drops the rows of supervisors that no longer have a process row."""
    value = json.dumps({"modules": list(modules), "types": dict(queues)}, sort_keys=True)

    def tx(run: Any) -> None:
        run(_UPSERT, {"name": PREFIX + supervisor, "value": value})
        run(_GONE)

    store.transaction(tx)


def served_types(store: OpsStore) -> Served | None:
    """What the running supervisors serve, together (one read); None when none has recorded
    anything (no supervisor runs on this database yet). A row that is not jobq's JSON is
    skipped."""
    rows = store.read(_LIVE)
    if not rows:
        return None
    out = Served()
    for row in rows:
        try:
            data = json.loads(row["value"])
            modules, types = list(data["modules"]), dict(data["types"])
        except (ValueError, KeyError, TypeError):
            continue
        out.modules += [m for m in modules if m not in out.modules]
        for jtype, queue in types.items():
            if out.queues.get(jtype) is None:
                out.queues[jtype] = queue
    return out
