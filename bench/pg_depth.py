"""Claim cost against queue depth on PostgreSQL: 1,000 to 1,000,000 jobs, all pending and due, 90%
scheduled a day ahead, or 90% finished long ago (a table full of completed jobs: dead weight for
the planner and the claim index's dead entries). One process claims and completes jobs one at a time through jobq's store
(opened by the engine factory from a config: the SQL its workers run) and through the raw loop
(:mod:`bench.raw_pg`), each on tables of its own filled in the server (``generate_series``).
Rounds as in :mod:`bench.depth`: depths and systems take turns, tables reset after each round,
the median round kept."""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any, Callable

from shared.runtime.clock import iso
from shared.engines import open_store
from shared.model.job import Finish

from . import pg, raw_pg
from .db import Db
from .depth import ROUNDS, WARMUP, _median

Loop = Callable[[int], tuple[int, float]]

# (times cast: the CASEs would type them text, which a timestamptz column refuses)
# Rows i with i % 10 < cut are scheduled a day ahead (finished: completed long ago, type
# bench:old, which the resets leave alone); the others are due.
_JOBQ_FILL = """
INSERT INTO jobs (id, type, status, payload, attempts, priority, run_at, created_at, updated_at, completed_at)
SELECT (lpad(to_hex(%(ms)s::bigint + i), 12, '0') || substr(md5(i::text), 1, 20))::uuid,
       CASE WHEN %(done)s AND i %% 10 < %(cut)s THEN 'bench:old' ELSE 'bench:noop' END,
       CASE WHEN %(done)s AND i %% 10 < %(cut)s THEN 'completed' ELSE 'pending' END,
       'null', 0, 0, CASE WHEN NOT %(done)s AND i %% 10 < %(cut)s THEN %(later)s::timestamptz ELSE %(due)s::timestamptz END, %(stamp)s::timestamptz, %(stamp)s::timestamptz,
       CASE WHEN %(done)s AND i %% 10 < %(cut)s THEN %(stamp)s::timestamptz END
FROM generate_series(0, %(n)s - 1) AS i
"""
_JOBQ_RESET = (
    "UPDATE jobs SET status = 'pending', attempts = 0, owner = NULL, owner_pid = NULL, started_at = NULL, "
    "completed_at = NULL, heartbeat_at = NULL, result = NULL WHERE status IN ('running', 'completed') "
    "AND type = 'bench:noop'"
)
_RAW_RESET = (
    "UPDATE jobs SET status = 'pending', attempts = 0, owner = NULL, started_at = NULL, "
    "completed_at = NULL WHERE status IN ('running', 'completed') AND type = 'bench:noop'"
)
_RAW_FINISHED = (
    "UPDATE jobs SET status = 'completed', type = 'bench:old', completed_at = now() - interval '1 day' "
    "WHERE id %% 10 < %s"
)


def build_jobq(db: Db, n: int, future: float, finished: float = 0.0) -> None:
    """jobq's schema (migrated by opening a store) with ``n`` jobs: a share ``future`` pending a
    day ahead, or a share ``finished`` completed long ago; the rest pending and due."""
    open_store(db.config()).close()
    now = time.time()
    with pg.connect(db.database, db.schema) as c:
        c.execute(
            _JOBQ_FILL,
            {
                "ms": int(now * 1000) - n,
                "cut": round((finished or future) * 10),
                "done": bool(finished),
                "later": iso(now + 86400),
                "due": iso(now - 1),
                "stamp": iso(now - 1),
                "n": n,
            },
        )
        c.execute("ANALYZE jobs")


def build_raw(url: str, schema: str, n: int, future: float, finished: float = 0.0) -> None:
    with pg.connect(url, schema) as c:
        raw_pg.create(c)
        raw_pg.fill(c, n, 0.0 if finished else future)
        if finished:
            c.execute(_RAW_FINISHED, (round(finished * 10),))
            c.execute("ANALYZE jobs")


def jobq_loop(db: Db) -> Loop:
    store = open_store(db.config(), migrate=False)
    owner, pid = f"bench:{os.getpid()}", os.getpid()

    def run(k: int) -> tuple[int, float]:
        done, claiming = 0, 0.0
        for _ in range(k):
            t0 = time.perf_counter()
            jobs = store.claim(owner, pid, time.time(), 1)
            claiming += time.perf_counter() - t0
            if not jobs:
                break
            store.finish(
                Finish("completed", jobs[0].id, jobs[0].attempts, None), owner, time.time()
            )
            done += 1
        return done, claiming

    run.close = store.close  # type: ignore[attr-defined]
    return run


def raw_loop(url: str, schema: str) -> Loop:
    conn = pg.connect(url, schema)
    owner = f"raw:{os.getpid()}"

    def run(k: int) -> tuple[int, float]:
        done, claiming = 0, 0.0
        for _ in range(k):
            t0 = time.perf_counter()
            jobs = raw_pg.claim(conn, owner, 1)
            claiming += time.perf_counter() - t0
            if not jobs:
                break
            raw_pg.complete(conn, owner, jobs, time.time())
            done += 1
        return done, claiming

    run.close = conn.close  # type: ignore[attr-defined]
    return run


def reset(url: str, schema: str, system: str) -> None:
    with pg.connect(url, schema) as c:
        c.execute(_JOBQ_RESET if system == "jobq" else _RAW_RESET)


def run_depth(
    url: str,
    folder: str,
    depths: list[int],
    future: float,
    claims: int,
    systems: list[str],
    log: Callable[[str], None],
    finished: float = 0.0,
) -> dict[str, dict[str, Any]]:
    """{depth: {system: {per_s, claim_ms, ...}}} for one kind (``future`` share scheduled ahead,
    or ``finished`` share completed)."""
    with contextlib.ExitStack() as stack:
        targets: dict[tuple[str, str], str] = {}
        due_counts = {}
        for d in depths:
            t0 = time.monotonic()
            for system in systems:
                schema = stack.enter_context(
                    pg.fresh_schema(url, f"depth_{system}", create=system != "jobq")
                )
                if system == "jobq":
                    build_jobq(Db.postgres(folder, url, schema), d, future, finished)
                else:
                    build_raw(url, schema, d, future, finished)
                targets[(str(d), system)] = schema
            due_counts[str(d)] = d - sum(
                1 for i in range(d) if i % 10 < round((finished or future) * 10)
            )
            log(
                f"depth pg: built {d:,} jobs (future {future:g}, finished {finished:g}) "
                f"in {time.monotonic() - t0:.1f}s"
            )
        size = max(1, min(min(due_counts.values()), claims // ROUNDS))
        loops = {
            k: (jobq_loop(Db.postgres(folder, url, s)) if k[1] == "jobq" else raw_loop(url, s))
            for k, s in targets.items()
        }
        rounds: dict[tuple[str, str], list[tuple[float, float]]] = {k: [] for k in loops}
        try:
            for k, run in loops.items():
                run(min(WARMUP, size))
                reset(url, targets[k], k[1])
            for _ in range(max(ROUNDS, -(-claims // size))):
                for k, run in loops.items():
                    t0 = time.perf_counter()
                    n, claiming = run(size)
                    spent = time.perf_counter() - t0
                    reset(url, targets[k], k[1])
                    if n != size:
                        raise RuntimeError(f"{k[1]} claimed {n} of {size} due jobs at depth {k[0]}")
                    rounds[k].append((spent, claiming))
        finally:
            for run in loops.values():
                run.close()  # type: ignore[attr-defined]
    out: dict[str, dict[str, Any]] = {str(d): {} for d in depths}
    for (d, system), rs in rounds.items():
        out[d][system] = _median(rs, size)
    return out
