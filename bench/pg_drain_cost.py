"""CPU per job of jobq's PostgreSQL drain path, client and server apart.

    python -m bench.pg_drain_cost --database postgresql://127.0.0.1/test [--jobs 20000] [--batch 100]
                                  [--procs 1] [--rounds 3] [--raw]

Each process drains pre-filled no-op jobs through the store's own completion-and-claim path
(``finish_and_claim`` with every job of the last batch completed), as a worker on a drain does,
without running handlers. ``--raw`` runs :mod:`bench.raw_pg`'s 100-per-transaction loop instead.
Reports wall time, the client's CPU and its server backend's CPU per job (the backend's
``/proc/<pid>/stat``: the server must run on this machine). CPU per job is steadier than wall
time on a loaded machine; compare trees by alternating runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import uuid
from typing import Any

from . import pg, raw_pg


def _backend_cpu(conn: Any) -> float:
    """Seconds of CPU the server backend of ``conn`` has used (utime + stime)."""
    row = conn.execute("SELECT pg_backend_pid() AS pid").fetchone()
    pid = row["pid"] if isinstance(row, dict) else row[0]
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _fill_jobq(url: str, schema: str, n: int) -> None:
    from shared.model.job import NewJob

    store = _open(url, schema)
    try:
        t = time.time() - 1
        for start in range(0, n, 1000):
            store.enqueue(
                [
                    NewJob(
                        id=uuid.uuid4().hex,
                        type="bench:noop",
                        payload="null",
                        priority=0,
                        run_at=t,
                        max_attempts=None,
                        key=None,
                    )
                    for _ in range(start, min(n, start + 1000))
                ],
                t,
            )
        store.conn.execute("ANALYZE jobs")
    finally:
        store.close()


def _open(url: str, schema: str) -> Any:
    import dataclasses
    from shared.settings.config import Config
    from shared.engines import open_store

    cfg = Config().replace(database=url)
    return open_store(cfg.replace(postgres=dataclasses.replace(cfg.postgres, schema=schema)))


def _drain_jobq(url: str, schema: str, batch: int, out: Any) -> None:
    from shared.model.job import Finish
    from shared.engines.postgres.store import WORKER_SESSION

    store = _open(url, schema)
    store.conn.execute(WORKER_SESSION)
    owner = f"bench:{os.getpid()}:{uuid.uuid4().hex[:6]}"
    srv0, cpu0, t0 = _backend_cpu(store.conn), time.process_time(), time.perf_counter()
    n, jobs = 0, store.claim(owner, os.getpid(), time.time(), batch)
    while jobs:
        n += len(jobs)
        now = time.time()
        done = [Finish("completed", j.id, j.attempts, None, started=now, ended=now) for j in jobs]
        _, jobs = store.finish_and_claim(done, owner, os.getpid(), now, batch)
    out.put(
        (n, time.perf_counter() - t0, time.process_time() - cpu0, _backend_cpu(store.conn) - srv0)
    )
    store.close()


def _drain_raw(url: str, schema: str, batch: int, out: Any) -> None:
    conn = pg.connect(url, schema)
    srv0, cpu0, t0 = _backend_cpu(conn), time.process_time(), time.perf_counter()
    n = raw_pg.work(conn, f"raw:{os.getpid()}", batch)
    out.put((n, time.perf_counter() - t0, time.process_time() - cpu0, _backend_cpu(conn) - srv0))
    conn.close()


def one_round(url: str, jobs: int, batch: int, procs: int, raw: bool) -> dict[str, float]:
    """One drain of ``jobs`` by ``procs`` processes; per-job µs of client and server CPU."""
    with pg.fresh_schema(url, "cost", create=raw) as schema:
        if raw:
            with pg.connect(url, schema) as c:
                raw_pg.create(c)
                raw_pg.fill(c, jobs)
                c.execute("ANALYZE jobs")
        else:
            _fill_jobq(url, schema, jobs)
        drain = _drain_raw if raw else _drain_jobq
        got, wall = pg.forked_drain(drain, (url, schema, batch), procs, 600)
    n = sum(g[0] for g in got)
    return {
        "jobs": n,
        "jobs_per_s": n / wall,
        "client_us": 1e6 * sum(g[2] for g in got) / n,
        "server_us": 1e6 * sum(g[3] for g in got) / n,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m bench.pg_drain_cost", description=__doc__.split("\n\n")[1]
    )
    p.add_argument("--database", required=True)
    p.add_argument("--jobs", type=int, default=20000)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--procs", type=int, default=1)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--raw", action="store_true", help="bench.raw_pg's loop instead of jobq's store")
    args = p.parse_args(argv)
    rounds = [
        one_round(args.database, args.jobs, args.batch, args.procs, args.raw)
        for _ in range(args.rounds)
    ]
    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    print(
        json.dumps(
            {
                "system": "raw" if args.raw else "jobq",
                "batch": args.batch,
                "procs": args.procs,
                "load": os.getloadavg(),
                "median": med,
                "rounds": rounds,
            }
        )
    )


if __name__ == "__main__":
    main()
