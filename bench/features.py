"""Each feature (tasks, workflows, keys, async) measured beside a plain baseline in the same run:
``python -m bench --only features [--database postgresql://...]``, or alone
``python -m bench.features [--smoke | --quick] [--database URL]``.

- **enqueue**: a typed task's ``.enqueue(1, b=2)`` against ``q.enqueue(type, payload)``, called
  in turns (:func:`bench.waits.enqueue_overhead`): microseconds per call and the ratio of rates.
- **wait**: one job at a time into idle workers (a short random pause before each), from just
  before ``.enqueue()`` to ``handle.wait()`` returning the result here, beside the same jobs'
  enqueue-to-finish (the worker's ``completed_at``): p50/p99 of both and what waiting adds.
- **deps**: the same number of no-op jobs written in one ``enqueue_many`` as independent jobs,
  as fan-in graphs (a root, ``fan`` jobs after it, a join after all of them) and as chains
  (each job after the one before), drained by the running workers; jobs/s from the first start
  to the last completion, the three taking turns (median of the rounds), and the ratio of
  each graph's rate to the independent jobs'.
- **fair**: claim + completion of one job at a time through the store (what a worker does,
  :mod:`bench.keys`' cycle) on a database of due jobs of a fair keyed type (``fair = true``,
  ``concurrency_per_key = 2``) and on one of a plain type, in turns: claims/s and the ratio.
- **async**: ``jobs`` async jobs that each ``await asyncio.sleep(ms)`` on the running ``W``
  workers of ``async_concurrency`` ``c`` (the handler of :mod:`bench.asyncbench`): the drain's
  window against the ideal ``jobs * ms / (W * c)``. Unlike ``bench.asyncbench`` the workers are
  already up, so the figure leaves their launch out.

Every measurement runs on one fresh database (a SQLite file or a PostgreSQL schema, dropped
after) with one supervisor; a failed one is recorded as ``{"error": ...}`` and the others go on.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Iterator

import tomli_w

from jobq import JobQueue, task
from shared.runtime.clock import parse_iso

from .db import Db
from .procs import Tree, python, wait_for
from .stats import latency_ms

AIO_TYPE = "bench:aio_sleep"  # bench.handlers' async handler (bench.asyncbench's type)
FAIR_TYPE = "bench:fair"  # bench.keys' fair keyed type


@task(name="bench:feat_done")
def done() -> float:
    """The moment the task ended in its worker."""
    return time.time()


@dataclass(frozen=True)
class Sizes:
    workers: int
    enqueue_calls: int  # calls of each API
    waits: int  # jobs waited on, one at a time
    gap_ms: tuple[int, int]  # idle pause before each of them
    graph_jobs: int  # jobs per dependency round, of each shape
    cost_jobs: int  # the same for the one-process cost of each shape
    fan: int  # jobs between a fan-in graph's root and its join
    chain: int  # jobs per chain
    rounds: int  # dependency and fairness rounds
    fair_pending: int  # due jobs in each fairness database
    fair_keys: int
    fair_cycles: int  # claim + completion cycles per round
    aio_jobs: int
    aio_ms: float
    aio_concurrency: int


SMOKE = Sizes(
    workers=2,
    enqueue_calls=100,
    waits=10,
    gap_ms=(5, 20),
    graph_jobs=100,
    cost_jobs=100,
    fan=18,
    chain=5,
    rounds=1,
    fair_pending=300,
    fair_keys=30,
    fair_cycles=50,
    aio_jobs=100,
    aio_ms=50,
    aio_concurrency=10,
)
QUICK = Sizes(
    workers=8,
    enqueue_calls=1000,
    waits=100,
    gap_ms=(20, 60),
    graph_jobs=2000,
    cost_jobs=200,
    fan=48,
    chain=10,
    rounds=3,
    fair_pending=2000,
    fair_keys=200,
    fair_cycles=100,
    aio_jobs=2000,
    aio_ms=100,
    aio_concurrency=25,
)
FULL = Sizes(
    workers=8,
    enqueue_calls=5000,
    waits=300,
    gap_ms=(50, 200),
    graph_jobs=10_000,
    cost_jobs=2000,
    fan=98,
    chain=10,
    rounds=5,
    fair_pending=30_000,
    fair_keys=3000,
    fair_cycles=500,
    aio_jobs=5000,
    aio_ms=200,
    aio_concurrency=50,
)


def run(url: str | None, sizes: Sizes, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every measurement, on a fresh database of this engine (``url``: PostgreSQL, else SQLite)."""
    from .waits import enqueue_overhead, fresh_db

    out: dict[str, Any] = {"sizes": asdict(sizes)}
    with fresh_db(url) as db:
        out["engine"] = db.engine
        enqueue_overhead(
            db, 20
        )  # warm-up: the first calls of each path (imports, caches) are not the cost
        out["enqueue"] = guarded(log, "enqueue", lambda: enqueue_overhead(db, sizes.enqueue_calls))
        with session(db, sizes) as q:
            out["wait"] = guarded(log, "wait", lambda: wait_results(q, db, sizes))
            out["deps"] = guarded(log, "deps", lambda: dependencies(q, db, sizes))
            out["async"] = guarded(log, "async", lambda: async_drain(q, db, sizes))
    out["deps_cost"] = guarded(log, "deps_cost", lambda: dependency_cost(url, sizes))
    out["fair"] = guarded(log, "fair", lambda: fairness(url, sizes))
    return out


def guarded(
    log: Callable[[str], None], name: str, fn: Callable[[], dict[str, Any]]
) -> dict[str, Any]:
    """``fn()``, or ``{"error": ...}`` if it failed: one failed figure must not lose the others."""
    try:
        value = fn()
    except Exception as exc:  # noqa: BLE001 - recorded and logged
        log(f"features/{name}: FAILED\n{traceback.format_exc()}")
        return {"error": f"{type(exc).__name__}: {exc}"}
    log(f"features/{name}: {json.dumps(value)[:300]}")
    return value


@contextlib.contextmanager
def session(db: Db, sizes: Sizes) -> Iterator[JobQueue]:
    """The real supervisor with ``sizes.workers`` workers on ``db`` (once all have registered),
    and a producer's queue."""
    cfg = os.path.join(db.folder, "jobq.toml")
    with open(cfg, "wb") as f:
        tomli_w.dump(
            {
                **db.toml(),
                "handlers": ["bench.handlers", "bench.features"],
                "log_level": "warning",
                "supervisor": {"workers": sizes.workers},
                "types": {AIO_TYPE: {"async_concurrency": sizes.aio_concurrency}},
            },
            f,
        )
    with Tree(
        [python(), "-m", "supervisor", "run", "--config", cfg],
        os.path.join(db.folder, "sup.log"),
        stop_timeout=30,
    ) as tree:

        def up() -> bool:
            if not tree.alive():
                raise RuntimeError(f"the supervisor exited: {tree.output()}")
            return (
                db.query("SELECT count(*) FROM processes WHERE kind = 'worker'")[0][0]
                >= sizes.workers
            )

        with JobQueue(config=db.config()) as q:
            done.using(queue=q).enqueue().wait(timeout=60)  # the schema is there, a worker runs
            wait_for(up, 60, f"{sizes.workers} workers")
            yield q


def wait_results(q: JobQueue, db: Db, sizes: Sizes) -> dict[str, Any]:
    """Enqueue-to-result-in-hand through ``handle.wait()``, beside enqueue-to-finish of the same
    jobs (``completed_at``, stored to the millisecond) and the task's end to the wait's return."""
    rng, bound, marks = random.Random(30), done.using(queue=q), {}
    lo = id_floor()
    for _ in range(sizes.waits):
        time.sleep(rng.uniform(*sizes.gap_ms) / 1000)  # the workers go idle between jobs
        t0 = time.time()
        handle = bound.enqueue()
        ended = handle.wait(timeout=30)
        marks[handle.id] = (t0, ended, time.time())
    rows = dict(
        db.query(
            "SELECT id, completed_at FROM jobs WHERE type = 'bench:feat_done' AND id >= ?", (lo,)
        )
    )
    finish = [parse_iso(rows[i]) - t0 for i, (t0, _, _) in marks.items() if rows.get(i)]
    in_hand = [t2 - t0 for t0, _, t2 in marks.values()]
    added = [t2 - parse_iso(rows[i]) for i, (_, _, t2) in marks.items() if rows.get(i)]
    return {
        "jobs": sizes.waits,
        "in_hand_ms": latency_ms(in_hand, expected=sizes.waits),
        "finish_ms": latency_ms(finish, expected=sizes.waits),
        "added_ms": latency_ms(added, expected=sizes.waits),
        "end_to_hand_ms": latency_ms(
            [t2 - t1 for _, t1, t2 in marks.values()], expected=sizes.waits
        ),
    }


def id_floor() -> str:
    """An id below every job id made from now on and above every one made before the last
    millisecond (ids begin with their milliseconds: shared.model.job.new_ids)."""
    return "%012x" % (int(time.time() * 1000) & 0xFFFFFFFFFFFF) + "0" * 20


def shapes(sizes: Sizes) -> dict[str, list[Any]]:
    """``enqueue_many`` items of each shape, ``graph_jobs`` jobs each (``int`` in ``after``: an
    earlier item of the same call)."""
    n, fan, chain = sizes.graph_jobs, sizes.fan, sizes.chain
    fanin: list[Any] = []
    while len(fanin) + fan + 2 <= n:
        root = len(fanin)
        fanin.append(("bench:noop", None))
        fanin += [("bench:noop", None, {"after": [root]}) for _ in range(fan)]
        fanin.append(("bench:noop", None, {"after": list(range(root + 1, root + 1 + fan))}))
    chains = [
        ("bench:noop", None, {"after": [i - 1]}) if i % chain else ("bench:noop", None)
        for i in range(n // chain * chain)
    ]
    return {"independent": [("bench:noop", None)] * n, "fanin": fanin, "chain": chains}


def drain(q: JobQueue, db: Db, items: list[Any]) -> dict[str, Any]:
    """Write ``items`` in one transaction into the running workers; jobs/s from the first start
    to the last completion once none is left."""
    lo = id_floor()
    q.enqueue_many(items)
    wait_for(
        lambda: not any(q.counts().get(s) for s in ("waiting", "pending", "running")),
        60 + len(items) / 50,
        f"{len(items)} jobs to drain",
        interval=0.02,
    )
    n, first, last = db.query(
        "SELECT count(*), min(started_at), max(completed_at) FROM jobs "
        "WHERE status = 'completed' AND id >= ?",
        (lo,),
    )[0]
    if n != len(items):
        raise RuntimeError(f"{n} of {len(items)} jobs completed")
    seconds = parse_iso(last) - parse_iso(first)
    return {"jobs": n, "seconds": round(seconds, 4), "per_s": round(n / max(seconds, 1e-3), 1)}


def dependencies(q: JobQueue, db: Db, sizes: Sizes) -> dict[str, Any]:
    """Each shape drained ``rounds`` times, the shapes in turns; the median round of each."""
    plan = shapes(sizes)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in plan}
    for _ in range(sizes.rounds):
        for name, items in plan.items():
            runs[name].append(drain(q, db, items))
    out: dict[str, Any] = {}
    for name, rs in runs.items():
        middle = sorted(rs, key=lambda r: r["per_s"])[(len(rs) - 1) // 2]  # the median round, whole
        out[name] = {**middle, "runs": [r["per_s"] for r in rs]}
    for name in ("fanin", "chain"):
        out[name]["vs_independent"] = round(out[name]["per_s"] / out["independent"]["per_s"], 3)
    out["fan"], out["chain_length"] = sizes.fan, sizes.chain
    return out


def dependency_cost(url: str | None, sizes: Sizes) -> dict[str, Any]:
    """What each shape costs per job in one process with no worker: written by ``enqueue_many``,
    then claimed and completed one at a time through the store (a worker's statements, without
    the waits between a graph's levels that the drain has); µs per job, the shapes in turns,
    the median round; and each graph's rate against the independent jobs'."""
    from .keys import OWNER, PID
    from .waits import fresh_db
    from shared.model.job import Finish

    plan = shapes(replace(sizes, graph_jobs=sizes.cost_jobs))
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in plan}
    with fresh_db(url) as db, JobQueue(config=db.config()) as q:
        for _ in range(sizes.rounds):
            for name, items in plan.items():
                t0 = time.perf_counter()
                q.enqueue_many(items)
                t1, n = time.perf_counter(), 0
                while jobs := q.store.claim(OWNER, PID, time.time(), 1):
                    q.store.finish_and_claim(
                        [Finish("completed", jobs[0].id, jobs[0].attempts, None)],
                        OWNER,
                        PID,
                        time.time(),
                        0,
                    )
                    n += 1
                if n != len(items):
                    raise RuntimeError(f"{name}: {n} of {len(items)} jobs claimed")
                runs[name].append(((t1 - t0) * 1e6 / n, (time.perf_counter() - t1) * 1e6 / n))
    out: dict[str, Any] = {}
    for name, rs in runs.items():
        enq, cycle = statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs)
        out[name] = {
            "jobs": len(plan[name]),
            "enqueue_us": round(enq, 1),
            "claim_complete_us": round(cycle, 1),
            "us_per_job": round(enq + cycle, 1),
        }
    for name in ("fanin", "chain"):
        out[name]["vs_independent"] = round(
            out["independent"]["us_per_job"] / out[name]["us_per_job"], 3
        )
    return out


def async_drain(q: JobQueue, db: Db, sizes: Sizes) -> dict[str, Any]:
    """``aio_jobs`` async sleeps drained by the running workers; the window against the ideal."""
    r = drain(q, db, [(AIO_TYPE, {"ms": sizes.aio_ms})] * sizes.aio_jobs)
    ideal = sizes.aio_jobs * sizes.aio_ms / 1000 / (sizes.workers * sizes.aio_concurrency)
    return {
        **r,
        "ms": sizes.aio_ms,
        "workers": sizes.workers,
        "concurrency": sizes.aio_concurrency,
        "ideal_seconds": round(ideal, 4),
        "vs_ideal": round(r["seconds"] / ideal, 3),
    }


@contextlib.contextmanager
def two_dbs(url: str | None) -> Iterator[tuple[Db, Db]]:
    """Two fresh databases of this engine (SQLite files, or PostgreSQL schemas dropped after)."""
    with tempfile.TemporaryDirectory(prefix="jobq-bench-fair-") as folder:
        if not url:
            yield Db.sqlite(folder, name="fair.db"), Db.sqlite(folder, name="plain.db")
            return
        from .pg import fresh_schema

        with (
            fresh_schema(url, "fair", create=False) as a,
            fresh_schema(url, "plain", create=False) as b,
        ):
            dbs = (Db.postgres(folder, url, a), Db.postgres(folder, url, b))
            try:
                yield dbs
            finally:
                for d in dbs:
                    d.close()


def fairness(url: str | None, sizes: Sizes) -> dict[str, Any]:
    """Claim + completion, one job at a time through the store, of a fair keyed type (filled by
    :func:`bench.keys.fill`) and of a plain type, each on its own database, in turns."""
    from shared.settings.config import from_dict
    from shared.engines import open_store
    from shared.model.job import Finish, NewJob, new_ids
    from shared.model.limits import type_limits

    from .keys import OWNER, PID, fill, timed

    types = {FAIR_TYPE: {"concurrency_per_key": 2, "fair": True}}
    with (
        two_dbs(url) as (fair_db, plain_db),
        open_store(from_dict({**_where(fair_db), "types": types})) as fair,
        open_store(plain_db.config()) as plain,
    ):
        now = time.time()
        fill(fair, sizes.fair_pending, sizes.fair_keys, now)
        for i in range(0, sizes.fair_pending, 20_000):
            plain.enqueue(
                [
                    NewJob(j, "bench:plain", "{}", 0, now - 1, None, None)
                    for j in new_ids(min(20_000, sizes.fair_pending - i))
                ],
                now,
            )
        for store in (fair, plain):
            if hasattr(store, "analyze_if_stale"):
                store.analyze_if_stale(0, 0)  # as keys.py: statistics of the filled table
        limits = type_limits(from_dict({"types": types}))

        def complete(j: Any, store: Any) -> None:
            store.finish_and_claim(
                [Finish("completed", j.id, j.attempts, None)], OWNER, PID, time.time(), 0
            )

        cycles = {
            "fair": lambda: complete(
                fair.claim_limited(OWNER, PID, time.time(), limits, 1)[0], fair
            ),
            "plain": lambda: complete(plain.claim(OWNER, PID, time.time(), 1)[0], plain),
        }
        ms: dict[str, list[float]] = {"fair": [], "plain": []}
        for _ in range(sizes.rounds):
            for name, fn in cycles.items():
                ms[name] += timed(fn, sizes.fair_cycles)
    out: dict[str, Any] = {"pending": sizes.fair_pending, "keys": sizes.fair_keys}
    for name, xs in ms.items():
        xs.sort()
        out[name] = {
            "per_s": round(1000 * len(xs) / sum(xs), 1),
            "p50_ms": round(statistics.median(xs), 3),
            "p99_ms": round(xs[max(0, int(len(xs) * 0.99) - 1)], 3),
        }
    out["vs_plain"] = round(out["fair"]["per_s"] / out["plain"]["per_s"], 3)
    return out


def _where(db: Db) -> dict[str, Any]:
    """The config keys of ``db`` with the database's full path (``Db.toml`` gives it relative)."""
    return {**db.toml(), "database": db.database}


if __name__ == "__main__":
    from .features_report import main

    sys.exit(main())
