"""``python -m bench.waits [--smoke] [--database postgresql://...]``: the targets for tasks.

- **wait latency**: a task run by a real supervisor's worker returns ``time.time()`` as its last
  act; this process (the producer, another process) measures from that moment to ``wait()``
  returning: the outcome's commit plus the waiter's wake-up. Target p50 <= 5 ms on SQLite,
  <= 10 ms on PostgreSQL.
- **idle waiters**: a child process runs 100 threads, each waiting on its own job that is not
  due for an hour, beside the running supervisor; its CPU over a window, in % of one core.
  Target < 1%.
- **enqueue overhead**: ``task.enqueue(1, b=2)`` against ``q.enqueue(type, {"args": [1],
  "kwargs": {"b": 2}})`` on the same queue, in alternating rounds. Target <= 15% more.

This module is also the supervisor's handler module (``handlers = ["bench.waits"]``) and the
waiter child (``--waiters``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from typing import Any, Iterator

import tomli_w

from jobq import JobQueue, task
from shared.engines import engine_name

from .db import Db
from .procs import Tree, cpu_percent_of_core, python, wait_for
from .stats import latency_ms


@task(name="bench:stamp")
def stamp() -> float:
    """The moment the task ended (just before its worker commits the outcome)."""
    return time.time()


@task(name="bench:add")
def add(a: int, b: int = 0) -> int:
    return a + b


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.waits", description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true", help="tiny sizes, a few seconds")
    p.add_argument("--database", help="postgresql://... (default: a SQLite file)")
    p.add_argument("--waiters", type=int, help=argparse.SUPPRESS)  # the waiter child
    p.add_argument("--config", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.waiters:
        return waiter_child(args.config, args.waiters)
    out = run(args.database, smoke=args.smoke)
    print(report(out))
    print(json.dumps(out))
    return 0


def run(url: str | None, *, smoke: bool = False) -> dict[str, Any]:
    """All three measurements on one fresh database; the figures as a dict."""
    with fresh_db(url) as db:
        cfg = write_config(db)
        with Tree(
            [python(), "-m", "supervisor", "run", "--config", cfg],
            os.path.join(db.folder, "sup.log"),
            stop_timeout=30,
        ):
            q = JobQueue(config=db.config())
            try:
                stamp.using(queue=q).enqueue().wait(timeout=60)  # the workers are up
                latency = wait_latency(q, 20 if smoke else 300)
                idle = idle_waiters(cfg, db.folder, 100, 1.0 if smoke else 10.0)
            finally:
                q.close()
        overhead = enqueue_overhead(db, 200 if smoke else 5000)
    return {
        "engine": db.engine,
        "wait_latency_ms": latency,
        "idle_waiters": idle,
        "enqueue": overhead,
    }


@contextlib.contextmanager
def fresh_db(url: str | None) -> Iterator[Db]:
    with tempfile.TemporaryDirectory(prefix="jobq-bench-waits-") as folder:
        if not url:
            yield Db.sqlite(folder)
            return
        from .pg import fresh_schema

        with fresh_schema(url, "waits", create=False) as schema:
            yield Db.postgres(folder, url, schema)


def write_config(db: Db) -> str:
    path = os.path.join(db.folder, "jobq.toml")
    with open(path, "wb") as f:
        tomli_w.dump(
            {
                **db.toml(),
                "handlers": ["bench.waits"],
                "log_level": "warning",
                "supervisor": {"workers": 2},
            },
            f,
        )
    return path


def wait_latency(q: JobQueue, n: int) -> dict[str, Any]:
    """From each task's end (in a worker) to ``wait()`` returning here, one job at a time."""
    lags = []
    for _ in range(n):
        ended = stamp.using(queue=q).enqueue().wait(timeout=30)
        lags.append(time.time() - ended)
    return latency_ms(lags, expected=n)


def idle_waiters(cfg: str, folder: str, n: int, seconds: float) -> dict[str, Any]:
    """CPU of a process whose ``n`` threads each wait on a job due in an hour."""
    ready = os.path.join(folder, "waiters-ready")
    with Tree(
        [python(), "-m", "bench.waits", "--waiters", str(n), "--config", cfg],
        os.path.join(folder, "waiters.log"),
        stop_timeout=5,
    ) as child:
        wait_for(lambda: os.path.exists(ready) or not child.alive(), 60, f"{n} waiters")
        if not child.alive():
            raise RuntimeError(f"the waiter child exited: {child.output()}")
        time.sleep(seconds)  # their back-off grows to its cap first (about 8 s): the idle state
        return {
            "waiters": n,
            "seconds": seconds,
            "cpu_percent_of_core": cpu_percent_of_core(child, seconds),
        }


def waiter_child(cfg: str, n: int) -> int:
    """``n`` waits on delayed jobs until killed: on SQLite ``n`` threads, each with its own
    queue; on PostgreSQL (a connection per waiter would take the server's) ``n`` coroutines
    of one event loop on one queue (``wait_async``)."""
    ready = os.path.join(os.path.dirname(cfg), "waiters-ready")
    with JobQueue.from_config(cfg) as q:
        if engine_name(q.config.database) == "postgresql":
            handles = [add.using(queue=q, delay=3600).enqueue(1) for _ in range(n)]

            async def all_wait() -> None:
                waits = [asyncio.ensure_future(h.wait_async(timeout=3600)) for h in handles]
                await asyncio.sleep(0)  # each made its first read
                open(ready, "w").close()
                await asyncio.gather(*waits)

            asyncio.run(all_wait())
            return 0
    started = threading.Barrier(n + 1, timeout=120)

    def wait_one() -> None:
        with JobQueue.from_config(cfg) as q:
            handle = add.using(queue=q, delay=3600).enqueue(1)
            started.wait()
            with contextlib.suppress(TimeoutError):
                handle.wait(timeout=3600)

    for _ in range(n):
        threading.Thread(target=wait_one, daemon=True).start()
    started.wait()
    open(ready, "w").close()
    threading.Event().wait()
    return 0


def enqueue_overhead(db: Db, n: int) -> dict[str, Any]:
    """Microseconds per call of each API on the same queue (no supervisor running), the two
    called in turn so that both meet the same file and load; and the task API's extra cost in %."""
    with JobQueue(config=db.config()) as q:
        bound = add.using(queue=q)
        spent = {"q.enqueue": 0.0, "task.enqueue": 0.0}
        clock = time.perf_counter
        for _ in range(n):
            t0 = clock()
            q.enqueue("bench:add", {"args": [1], "kwargs": {"b": 2}})
            t1 = clock()
            bound.enqueue(1, b=2)
            spent["task.enqueue"] += clock() - t1
            spent["q.enqueue"] += t1 - t0
    per = {k: v / n * 1e6 for k, v in spent.items()}
    extra = 100.0 * (per["task.enqueue"] / per["q.enqueue"] - 1)
    return {
        "us_per_call": {k: round(v, 1) for k, v in per.items()},
        "extra_percent": round(extra, 1),
    }


def report(out: dict[str, Any]) -> str:
    """The figures beside the targets, as a markdown table."""
    lat, idle, enq = out["wait_latency_ms"], out["idle_waiters"], out["enqueue"]
    goal = 5.0 if out["engine"] == "sqlite" else 10.0
    rows = [
        ("wait latency p50 (ms)", lat.get("p50"), f"<= {goal:g}", lat.get("p50", 1e9) <= goal),
        ("wait latency p99 (ms)", lat.get("p99"), "", None),
        (
            "100 idle waiters (% of a core)",
            idle["cpu_percent_of_core"],
            "< 1",
            idle["cpu_percent_of_core"] < 1,
        ),
        (
            "task.enqueue() extra cost (%)",
            enq["extra_percent"],
            "<= 15",
            enq["extra_percent"] <= 15,
        ),
        (
            "q.enqueue() / task.enqueue() (us)",
            f"{enq['us_per_call']['q.enqueue']} / {enq['us_per_call']['task.enqueue']}",
            "",
            None,
        ),
    ]
    lines = [
        f"tasks on {out['engine']}",
        "",
        "| measure | value | target | met |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {m} | {v} | {t} | {'' if ok is None else ('yes' if ok else 'NO')} |"
        for m, v, t, ok in rows
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
