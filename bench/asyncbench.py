"""Async throughput: jobs that each await ``asyncio.sleep(ms)`` (an I/O-bound call),
many at once per worker process, on jobq beside arq and Procrastinate's async worker in the
same run, with the same numbers of processes and of jobs at once per process.

    python -m bench.asyncbench                     # 1,000 jobs of 1 s, 2 processes x 100
    python -m bench.asyncbench --jobs 5000 --ms 100 --workers 2 --concurrency 100 --json out.json

Each system gets the whole queue filled first, then its workers start; the figure is the wall
time from the workers' start to the last job done (so it includes starting them: about half a
second for each). The floor is ``jobs / (workers x concurrency) x ms``. jobq runs on SQLite and
on PostgreSQL (``--database``, default the local socket's ``test``); arq on Redis (``--redis``;
skipped when ``arq`` or the server is missing); Procrastinate on the same PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from .procs import Tree, python

TYPE = "bench:aio_sleep"


def _wait(done: Callable[[], int], n: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while done() < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{done()} of {n} jobs done after {timeout:g} s")
        time.sleep(0.02)


def _figure(name: str, n: int, seconds: float, args: Any) -> dict[str, Any]:
    floor = n / (args.workers * args.concurrency) * args.ms / 1000
    return {
        "system": name,
        "jobs": n,
        "seconds": round(seconds, 3),
        "jobs_per_s": round(n / seconds, 1),
        "floor_seconds": round(floor, 3),
        "workers": args.workers,
        "concurrency": args.concurrency,
    }


def run_jobq(folder: Path, where: dict[str, Any], args: Any) -> dict[str, Any]:
    """jobq's supervisor with ``workers`` processes, ``async_concurrency`` = ``concurrency``;
    ``where``: the config's ``database`` (and ``[postgres]``)."""
    import tomli_w
    from shared import JobQueue
    from shared.settings.config import load

    cfg = folder / "jobq.toml"
    cfg.write_text(
        tomli_w.dumps(
            {
                **where,
                "handlers": ["bench.handlers"],
                "log_level": "warning",
                "supervisor": {"workers": args.workers},
                "types": {TYPE: {"async_concurrency": args.concurrency}},
            }
        )
    )
    with JobQueue(config=load(cfg)) as q:
        q.enqueue_many([(TYPE, {"ms": args.ms}, {}) for _ in range(args.jobs)])
        t0 = time.perf_counter()
        tree = Tree(
            [python(), "-m", "supervisor", "run", "--config", str(cfg)], str(folder / "jobq.log")
        )
        try:
            _wait(lambda: q.counts().get("completed", 0), args.jobs, args.timeout)
            seconds = time.perf_counter() - t0
        finally:
            tree.close()
    return _figure(
        "jobq " + ("postgresql" if "postgres" in where else "sqlite"), args.jobs, seconds, args
    )


def run_arq(folder: Path, args: Any) -> dict[str, Any] | None:
    """arq: ``workers`` worker processes of ``max_jobs`` = ``concurrency``."""
    try:
        import asyncio

        from arq import create_pool
        from arq.connections import RedisSettings
        import redis
    except ImportError:
        return None
    from .arq_app import DONE_KEY

    queue = f"bench-aio-{os.getpid()}"
    r = redis.Redis.from_url(args.redis)
    try:
        r.ping()
    except redis.RedisError:
        return None

    async def fill() -> None:
        pool = await create_pool(RedisSettings.from_dsn(args.redis))
        for i in range(0, args.jobs, 500):
            await asyncio.gather(
                *(
                    pool.enqueue_job("aio_sleep", args.ms, queue, _queue_name=queue)
                    for _ in range(i, min(i + 500, args.jobs))
                )
            )
        await pool.aclose()

    asyncio.run(fill())
    worker = [
        python(),
        "-m",
        "bench.arq_app",
        "--redis",
        args.redis,
        "--queue",
        queue,
        "--concurrency",
        str(args.concurrency),
    ]
    t0 = time.perf_counter()
    tree = Tree(
        [python(), "-m", "bench.fanout", str(args.workers), "--", *worker], str(folder / "arq.log")
    )
    try:
        _wait(lambda: int(r.get(DONE_KEY.format(queue=queue)) or 0), args.jobs, args.timeout)
        seconds = time.perf_counter() - t0
    finally:
        tree.close()
        r.delete(DONE_KEY.format(queue=queue), queue)
    return _figure("arq", args.jobs, seconds, args)


def run_procrastinate(folder: Path, args: Any) -> dict[str, Any]:
    """Procrastinate's async worker: ``workers`` processes of ``concurrency``."""
    from . import pg
    from .procrastinate_app import apply_schema, make_app

    with pg.fresh_schema(args.database, "procrastinate") as schema:
        apply_schema(args.database, schema)
        app, _ = make_app(args.database, schema, sync=True)
        with app.open():
            task = app.bench_aio_sleep
            for i in range(0, args.jobs, 1000):
                task.batch_defer(*({"ms": args.ms} for _ in range(i, min(i + 1000, args.jobs))))
        worker = [
            python(),
            "-m",
            "bench.procrastinate_app",
            "--url",
            args.database,
            "--schema",
            schema,
            "--concurrency",
            str(args.concurrency),
        ]
        t0 = time.perf_counter()
        tree = Tree(
            [python(), "-m", "bench.fanout", str(args.workers), "--", *worker],
            str(folder / "procrastinate.log"),
        )
        try:
            with pg.connect(args.database, schema) as conn:
                _wait(
                    lambda: conn.execute(
                        "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
                    ).fetchone()[0],
                    args.jobs,
                    args.timeout,
                )
            seconds = time.perf_counter() - t0
        finally:
            tree.close()
    return _figure("procrastinate", args.jobs, seconds, args)


def run_all(folder: Path, args: Any) -> list[dict[str, Any]]:
    from . import pg

    (folder / "sqlite").mkdir()
    (folder / "pg").mkdir()
    out = [run_jobq(folder / "sqlite", {"database": "q.db"}, args)]
    with pg.fresh_schema(args.database, "aio", create=False) as schema:
        out.append(
            run_jobq(
                folder / "pg", {"database": args.database, "postgres": {"schema": schema}}, args
            )
        )
    arq = run_arq(folder, args)
    if arq is not None:
        out.append(arq)
    out.append(run_procrastinate(folder, args))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.asyncbench", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument(
        "--ms", type=float, default=1000.0, help="how long each job awaits asyncio.sleep"
    )
    p.add_argument("--workers", type=int, default=2, help="worker processes of each system")
    p.add_argument("--concurrency", type=int, default=100, help="jobs at once per process")
    p.add_argument(
        "--database", default="postgresql:///test", help="PostgreSQL for jobq and Procrastinate"
    )
    p.add_argument("--redis", default="redis://127.0.0.1:6379/0", help="Redis for arq")
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--json", default=None, help="also write the figures here")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="jobq-aio-") as tmp:
        rows = run_all(Path(tmp), args)
    for r in rows:
        print(
            f"{r['system']:>16}: {r['jobs']} jobs in {r['seconds']:.2f} s = {r['jobs_per_s']:.0f} jobs/s "
            f"(floor {r['floor_seconds']:.2f} s; {r['workers']} processes x {r['concurrency']})",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
