"""``python -m bench.aio_enqueue [--database postgresql://...] [--calls N] [--smoke]``: what an
async enqueue costs the event loop, on PostgreSQL.

- **loop busy time per call**: the event loop thread's CPU time (``time.thread_time``: the loop
  is idle, not busy, while it waits for the server) over ``N`` awaited calls one after another,
  for ``await q.enqueue_async(type, payload)`` and, in the same run and alternating rounds, for
  a raw psycopg ``AsyncConnection`` inserting the same row (the same columns and values jobq
  writes) with ``pg_notify`` in one prepared statement. Target: jobq <= 1.5x the raw call.
- **throughput**: 1,000 enqueues started at once (``asyncio.gather`` of ``enqueue_async``) on
  one loop, against 1,000 sync ``q.enqueue`` calls one after another, and from 8 threads.

Each system writes into a fresh schema of its own, dropped afterwards. Prints JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg

from jobq import JobQueue
from shared.model.job import new_id
from shared.runtime.clock import iso
from shared.settings.config import Config

from .pg import fresh_schema

DEFAULT_URL = "postgresql://127.0.0.1:5432/test"
RAW = (
    "WITH ins AS (INSERT INTO {schema}.jobs (id, type, status, payload, attempts, max_attempts, "
    "priority, run_at, created_at, updated_at, key, trace, queue, limit_key) VALUES "
    "(%s, %s, 'pending', %s, 0, NULL, 0, %s, %s, %s, NULL, NULL, 'default', NULL)) "
    "SELECT pg_notify(%s, '')"
)


def queue_on(url: str, schema: str) -> JobQueue:
    cfg = Config(database=url)
    return JobQueue(config=cfg.replace(postgres=dataclasses.replace(cfg.postgres, schema=schema)))


async def busy(url: str, schema: str, calls: int, rounds: int) -> dict[str, Any]:
    """Loop CPU per call, jobq against the raw insert, in alternating rounds."""
    q = queue_on(url, schema)
    raw = await psycopg.AsyncConnection.connect(url, autocommit=True)
    sql = RAW.format(schema=schema)
    payload = {"user": 42, "email": "a@example.com"}
    text = json.dumps(payload, separators=(",", ":"))
    await q.enqueue_async("bench:welcome", payload)  # connects, checks the type once
    await raw.execute(sql, (new_id(), "bench:welcome", text, "x", "x", "x", "c"), prepare=True)
    spent = {"jobq": 0.0, "raw": 0.0}
    for _ in range(rounds):
        t = time.thread_time()
        for _ in range(calls):
            await q.enqueue_async("bench:welcome", payload)
        spent["jobq"] += time.thread_time() - t
        t = time.thread_time()
        for _ in range(calls):
            now = iso(time.time())
            await raw.execute(
                sql,
                (new_id(), "bench:welcome", json.dumps(payload), now, now, now, f"jobq_{schema}"),
                prepare=True,
            )
        spent["raw"] += time.thread_time() - t
    await raw.close()
    q.close()
    n = calls * rounds
    out = {k: round(v / n * 1e6, 1) for k, v in spent.items()}
    return {"us_per_call": out, "ratio": round(spent["jobq"] / spent["raw"], 2), "calls": n}


async def concurrent(q: JobQueue, n: int) -> float:
    t = time.perf_counter()
    await asyncio.gather(*[q.enqueue_async("bench:welcome", {"n": i}) for i in range(n)])
    return n / (time.perf_counter() - t)


def throughput(url: str, schema: str, n: int) -> dict[str, float]:
    """Jobs per second: n async enqueues at once, n sync ones in a row, n from 8 threads."""
    q = queue_on(url, schema)
    q.enqueue("bench:welcome", {})  # connected, type checked
    out = {"async_gather": asyncio.run(concurrent(q, n))}
    t = time.perf_counter()
    for i in range(n):
        q.enqueue("bench:welcome", {"n": i})
    out["sync_sequential"] = n / (time.perf_counter() - t)
    with ThreadPoolExecutor(8) as pool:
        t = time.perf_counter()
        list(pool.map(lambda i: q.enqueue("bench:welcome", {"n": i}), range(n)))
        out["sync_8_threads"] = n / (time.perf_counter() - t)
    q.close()
    return {k: round(v) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.aio_enqueue", description=__doc__)
    p.add_argument("--database", default=DEFAULT_URL, help="postgresql://...")
    p.add_argument("--calls", type=int, default=2000, help="calls per round (busy time)")
    p.add_argument("--smoke", action="store_true", help="tiny sizes, a few seconds")
    args = p.parse_args(argv)
    calls, rounds, n = (50, 2, 100) if args.smoke else (args.calls, 5, 1000)
    with fresh_schema(args.database, "aio", create=False) as schema:
        result = {
            "loop_busy": asyncio.run(busy(args.database, schema, calls, rounds)),
            "throughput_per_s": throughput(args.database, schema, n),
        }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
