"""Workflows written once: enqueueing jobs that wait for other jobs, and reading a
job's parents (the operators' reads of a graph are in shared.ops.flows).

A child names its parents in ``job_deps`` (child, parent, pos: the order given, done). Its status
at insert follows its parents' as they are then (read under a row lock where the engine locks
rows, so a parent that ends concurrently either sees the child's edges or is seen ended):
``waiting`` while one it needs has not ended, ``pending`` when none is left, ``cancelled`` when
one failed or was cancelled and its policy says so. Once written, the schema's triggers settle
it in the very statement that ends each parent (see the engines' ``FLOWS`` migrations).
"""

from __future__ import annotations

from typing import Any, Sequence

from shared.runtime.clock import iso
from shared.model.flows import FlowError
from shared.model.job import NewJob
from .base import SqlBase
from .uniquescope import free_keys

_EDGE_ROWS = 200  # edges per INSERT statement (4 parameters a row: under every SQLite's limit)

_INSERT = """
INSERT INTO {s}jobs (id, type, status, payload, attempts, max_attempts, priority, run_at,
                    created_at, updated_at, key, trace, after_failure, waiting_on, error,
                    completed_at, flow_depth, queue, limit_key)
VALUES (:id, :type, :status, :payload, 0, :max_attempts, :priority, :run_at, :now, :now, :key, :trace,
        :after_failure, :waiting_on, :error, :completed_at, :flow_depth, :queue, :limit_key)
ON CONFLICT (key) WHERE key IS NOT NULL DO NOTHING RETURNING id
"""
_BY_KEY = "SELECT id, type, status, flow_depth FROM {s}jobs WHERE key = :key"
# The longest chain of parents a job may have: a failure cancels a chain's dependants through the
# schema's trigger, nested once per link, and the databases bound that nesting (SQLite at 1,000
# trigger levels, PostgreSQL by its stack: about 500 links at the default max_stack_depth).
MAX_FLOW_DEPTH = 200
MARK_PARENTS = "UPDATE {s}jobs SET has_children = 1 WHERE {ids} AND has_children = 0"
# A graph without idempotency keys in a fixed number of statements (arrays or a JSON text of rows,
# see Dialect.row_set), not one or two per job: every row's state is known before it is written.
_JOB_COLUMNS = (
    ("id", "id"),
    ("type", "text"),
    ("status", "text"),
    ("payload", "json"),
    ("max_attempts", "integer"),
    ("priority", "integer"),
    ("run_at", "time"),
    ("trace", "text"),
    ("after_failure", "text"),
    ("waiting_on", "integer"),
    ("error", "text"),
    ("completed_at", "time"),
    ("flow_depth", "integer"),
    ("queue", "text"),
    ("limit_key", "text"),
    ("has_children", "integer"),
)
EDGE_COLUMNS = (("child", "id"), ("parent", "id"), ("pos", "integer"), ("done", "integer"))
_INSERT_ROWS = """
INSERT INTO {s}jobs (id, type, status, payload, attempts, max_attempts, priority, run_at,
                    created_at, updated_at, trace, after_failure, waiting_on, error, completed_at,
                    flow_depth, queue, limit_key, has_children)
SELECT r.id, r.type, r.status, r.payload, 0, r.max_attempts, r.priority, r.run_at, :now, :now, r.trace,
       r.after_failure, r.waiting_on, r.error, r.completed_at, r.flow_depth, r.queue, r.limit_key,
       r.has_children
FROM {rows}
"""
# Also how jobq copy writes edges and marks parents (shared.engines.sql.transfer).
INSERT_EDGES = (
    "INSERT INTO {s}job_deps (child, parent, pos, done) "
    "SELECT e.child, e.parent, e.pos, e.done "
    "FROM {rows} WHERE true ON CONFLICT (child, parent) DO NOTHING"
)  # (WHERE: SQLite's parse)
_PARENTS = """
SELECT d.parent AS id, j.type, j.status, j.result, j.error, d.done
FROM job_deps d LEFT JOIN jobs j ON j.id = d.parent WHERE d.child = :id ORDER BY d.pos
"""


def _values(row: Any) -> tuple:
    """A row as a tuple, whether the connection gives dicts (the store's) or tuples (``conn=``)."""
    return tuple(row.values()) if isinstance(row, dict) else tuple(row)


def child_state(job: NewJob, parents: Sequence[tuple]) -> tuple[str, int, list[int], str | None]:
    """What ``job`` is when written after ``parents`` ((id, type, status) in its order): its
    status, how many it still waits for, each edge's ``done`` and, if cancelled, why."""
    policy, done, why = job.after_failure or "cancel", [], None
    for pid, ptype, status, *_ in parents:
        ended_badly = status in ("failed", "cancelled")
        if (
            ended_badly
            and why is None
            and (policy == "cancel" or (policy == "hold" and status == "cancelled"))
        ):
            why = f"parent job {pid} ({ptype}) {status}"
        done.append(1 if status == "completed" or (ended_badly and policy == "run") else 0)
    if why is not None:
        return "cancelled", 0, done, why
    waiting = done.count(0)
    return ("waiting" if waiting else "pending"), waiting, done, None


def _depths(jobs: Sequence[NewJob], known: dict[str, tuple]) -> dict[str, int]:
    """Each job's ``flow_depth`` (its longest chain of parents); FlowError past MAX_FLOW_DEPTH,
    before anything is written."""
    depths: dict[str, int] = {}
    for j in jobs:
        depth = 1 + max((depths[p] if p in depths else known[p][3] for p in j.after), default=-1)
        if depth > MAX_FLOW_DEPTH:
            raise FlowError(
                f"job {j.id} ({j.type}): its chain of parents would be {depth} jobs long, above "
                f"the limit of {MAX_FLOW_DEPTH} (a failure cancels a chain's dependants one "
                f"nested trigger per link)"
            )
        depths[j.id] = depth
    return depths


def _job_row(j: NewJob, state: tuple, stamp: str, now: float, dialect: Any) -> list[Any]:
    """``j`` as a row of :data:`_JOB_COLUMNS`, in its ``state`` (status, waiting_on, error,
    flow_depth); ``has_children`` is 0 until the graph is known. The payload as ``dialect``
    stores JSON."""
    status, waiting, why, depth = state
    return [
        j.id,
        j.type,
        status,
        dialect.json_value(j.payload),
        j.max_attempts,
        j.priority,
        stamp if j.run_at == now else iso(j.run_at),
        j.trace,
        (j.after_failure or "cancel") if j.after else None,
        waiting,
        why,
        stamp if status == "cancelled" else None,
        depth,
        j.queue,
        j.limit_key,
        0,
    ]


class FlowsSql(SqlBase):
    """Enqueue a graph in one transaction; a job's parents."""

    def enqueue_flow(self, jobs: Sequence[NewJob], now: float, conn: Any = None) -> list[str]:
        """Insert ``jobs`` (each naming its parents in ``after``: ids of existing jobs or of jobs
        earlier in ``jobs``) in one transaction (with ``conn``: the caller's, nothing committed
        here); their ids in order (a kept job's id where a ``key`` is taken). An unknown parent,
        or one not written before its child (a cycle), raises :class:`FlowError` before anything
        is written."""
        write = self._write_rows if all(j.key is None for j in jobs) else self._write_flow
        if conn is not None:
            cur = self._app_cursor(conn)  # (the parents' ids read as jobq's, whatever their type)
            try:
                return write(cur, jobs, now)
            finally:
                cur.close()
        return self._tx(lambda c: write(c, jobs, now))

    def _write_rows(self, c: Any, jobs: Sequence[NewJob], now: float) -> list[str]:
        """A graph without keys (no job can turn out to be another one): each job's state worked
        out here from its parents', then every job in one statement (waking idle workers if one
        is pending), every edge in another, and the parents outside the graph marked in a third;
        with the read of those parents, at most four statements whatever the graph's size."""
        known = self._existing_parents(c, jobs)
        depths = _depths(jobs, known)
        stamp, rows, edges, inside, woke = iso(now), [], [], set(), False
        ids = {j.id for j in jobs}
        for j in jobs:
            parents = [known[p] for p in j.after]
            status, waiting, done, why = child_state(j, parents)
            known[j.id] = (j.id, j.type, status, depths[j.id])
            inside.update(p for p in j.after if p in ids)
            edges += [(j.id, p[0], pos, d) for pos, (p, d) in enumerate(zip(parents, done))]
            woke = woke or status == "pending"
            rows.append(_job_row(j, (status, waiting, why, depths[j.id]), stamp, now, self.dialect))
        for row in rows:
            row[-1] = 1 if row[0] in inside else 0
        self._insert_job_rows(c, rows, stamp, woke)
        if edges:
            edge_rows = self.dialect.row_set("e", EDGE_COLUMNS)
            self._run(
                c,
                INSERT_EDGES.format(s=self.qualifier, rows=edge_rows),
                self.dialect.row_params("e", EDGE_COLUMNS, edges),
            )
        self._mark_parents(c, sorted({p for j in jobs for p in j.after} - inside))
        return [j.id for j in jobs]

    def _insert_job_rows(self, c: Any, rows: list[list[Any]], stamp: str, woke: bool) -> None:
        """Every job of a graph without keys in one statement (:data:`_JOB_COLUMNS` per row),
        waking idle workers where the engine notifies if one is pending (``woke``)."""
        insert = _INSERT_ROWS.format(s=self.qualifier, rows=self.dialect.row_set("r", _JOB_COLUMNS))
        params = {"now": stamp, **self.dialect.row_params("r", _JOB_COLUMNS, rows)}
        if woke and self.dialect.notify:
            insert, params["channel"] = self.dialect.waking(insert), self.channel
        self._run(c, insert, params)

    def _read_parents(self, c: Any, ids: list[str]) -> list[Any]:
        """The rows (id, type, status, flow_depth) of the jobs ``ids`` that exist, locked where
        the engine locks rows. A text that cannot be an id (``dialect.is_id``) finds none."""
        ids = [p for p in ids if self.dialect.is_id(p)]
        if not ids:
            return []
        cond, params = self.dialect.member("id", "ids", ids, kind="id")
        return self._run(
            c,
            f"SELECT id, type, status, flow_depth FROM {self.qualifier}jobs "
            f"WHERE {cond} ORDER BY id{self.dialect.lock}",
            params,
        ).fetchall()

    def _mark_parents(self, c: Any, parents: list[str]) -> None:
        """Mark the jobs ``parents`` as having children (nothing when there are none)."""
        if parents:
            cond, params = self.dialect.member("id", "ids", parents, kind="id")
            self._run(c, MARK_PARENTS.format(s=self.qualifier, ids=cond), params)

    def _write_flow(self, c: Any, jobs: Sequence[NewJob], now: float) -> list[str]:
        known = self._existing_parents(c, jobs)
        depths = _depths(jobs, known)
        stamp, alias, out, used, woke = iso(now), {}, [], set(), False
        for j in jobs:
            parents = [known[alias.get(p, p)] for p in j.after]
            status, waiting, done, why = child_state(j, parents)
            job_id = self._insert_flow_job(c, j, stamp, now, (status, waiting, why, depths[j.id]))
            alias[j.id] = job_id
            if job_id != j.id:  # an idempotency key already taken: that job stands in, as it is
                by_key = _BY_KEY.format(s=self.qualifier) + self.dialect.lock
                known[job_id] = _values(self._run(c, by_key, {"key": j.key}).fetchone())
                continue
            known[job_id] = (job_id, j.type, status, depths[j.id])
            self._insert_edges(c, job_id, [p[0] for p in parents], done)
            used.update(p[0] for p in parents)
            woke = woke or status == "pending"
            out.append(job_id)
        self._mark_parents(c, sorted(used))
        if woke and self.dialect.notify:
            self._run(c, self.dialect.notify, {"channel": self.channel})
        return [alias[j.id] for j in jobs]

    def _existing_parents(self, c: Any, jobs: Sequence[NewJob]) -> dict[str, tuple]:
        """The parents outside ``jobs`` as (id, type, status, flow_depth), locked where rows are locked (in
        id order: two graphs sharing parents never deadlock); FlowError for one missing or
        named before it is written."""
        seen: set[str] = set()
        outside: set[str] = set()
        later = {j.id for j in jobs}
        for j in jobs:
            for p in j.after:
                if p == j.id or (p in later and p not in seen):
                    raise FlowError(
                        f"job {j.id} ({j.type}): parent {p} is not written before it "
                        f"(a job cannot wait for itself or a later job: that is a cycle)"
                    )
                if p not in seen:
                    outside.add(p)
            seen.add(j.id)
        if not outside:
            return {}
        found = {r[0]: r for r in map(_values, self._read_parents(c, sorted(outside)))}
        for j in jobs:
            for p in j.after:
                if p in outside and p not in found:
                    raise FlowError(
                        f"job {j.id} ({j.type}): parent job {p} not found (it must exist, or "
                        f"be enqueued in the same call or transaction)"
                    )
        return found

    def _insert_flow_job(self, c: Any, j: NewJob, stamp: str, now: float, state: tuple) -> str:
        status, waiting, why, depth = state
        params = {
            "flow_depth": depth,
            "id": j.id,
            "type": j.type,
            "status": status,
            "payload": j.payload,
            "max_attempts": j.max_attempts,
            "priority": j.priority,
            "run_at": stamp if j.run_at == now else iso(j.run_at),
            "now": stamp,
            "key": j.key,
            "trace": j.trace,
            "queue": j.queue,
            "limit_key": j.limit_key,
            "after_failure": (j.after_failure or "cancel") if j.after else None,
            "waiting_on": waiting,
            "error": why,
            "completed_at": stamp if status == "cancelled" else None,
        }
        # a key held outside the job's uniqueness scope is freed first (.uniquescope)
        free_keys(lambda q, p: self._run(c, q, p), f"{self.qualifier}jobs", (j,), now)
        row = self._run(c, _INSERT.format(s=self.qualifier), params).fetchone()
        if row is not None:
            return str(_values(row)[0])
        kept = self._run(c, _BY_KEY.format(s=self.qualifier), {"key": j.key}).fetchone()
        return str(_values(kept)[0])

    def _insert_edges(self, c: Any, child: str, parents: list[str], done: list[int]) -> None:
        rows = list(zip(parents, range(len(parents)), done))
        for i in range(0, len(rows), _EDGE_ROWS):
            chunk, params = rows[i : i + _EDGE_ROWS], {"child": child}
            values = []
            for k, (parent, pos, d) in enumerate(chunk):
                params.update({f"p{k}": parent, f"n{k}": pos, f"d{k}": d})
                values.append(f"(:child, :p{k}, :n{k}, :d{k})")
            self._run(
                c,
                f"INSERT INTO {self.qualifier}job_deps (child, parent, pos, done) VALUES "
                + ", ".join(values)
                + " ON CONFLICT (child, parent) DO NOTHING",
                params,
            )

    # -- reads ------------------------------------------------------------------------------------

    def parents(self, job_id: str) -> list[dict[str, Any]]:
        """The parents of ``job_id`` in the order given: id, type, status (None: deleted),
        result (JSON text), error, done."""
        return self._rows(_PARENTS, {"id": job_id})
