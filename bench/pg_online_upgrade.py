"""The online native-type upgrade (``jobq db upgrade``) on a big live queue, measured.

    python -m bench.pg_online_upgrade [--database postgresql:///test?host=/var/run/postgresql]
        [--rows 1000000] [--batch 5000] [--writers 2] [--baseline 10] [--keep]

A scratch schema is created by the current migrations (a store opened on it), then filled with
``--rows`` jobs of the old (text) form by ``generate_series`` (1 in 100 pending, the rest
completed with a result; a quarter of those with an attempt row). ``--writers`` processes run a
loop of enqueue + claim + complete through the store, each statement timed, for ``--baseline``
seconds, then while :func:`shared.engines.postgres.online.prepare` runs over
:data:`~shared.engines.postgres.native.NATIVE_COLUMNS`; then they stop (as a deploy stops the old
workers) and :func:`~shared.engines.postgres.online.finish` runs (``after`` None, the version
kept). Reports prepare's time, the writers' p50/p99/max per operation before and during it (the
longest is the longest any claim or outcome took, waiting on a lock or on the machine), their
rate, the writers' statements seen waiting on a lock during prepare (``pg_stat_activity``
sampled every 20 ms: how many, the longest wait and its statement), and finish's time and lock
time. The schema is dropped unless ``--keep``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import threading
import time
import uuid
from typing import Any

DEFAULT = "postgresql:///test?host=/var/run/postgresql"
ISO = """to_char((timestamptz '2026-01-01' + (i + {d}) * interval '10 ms') AT TIME ZONE 'UTC',
'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')"""
FILL = f"""
INSERT INTO jobs (id, type, status, payload, result, attempts, priority, run_at, started_at,
                  completed_at, created_at, updated_at, ended_at, queue, tally)
SELECT md5(i::text), 'bench:old', CASE WHEN i % 100 = 0 THEN 'pending' ELSE 'completed' END,
       '{{"i": ' || i || ', "note": "an old job''s payload of a typical length"}}',
       CASE WHEN i % 100 = 0 THEN NULL ELSE '{{"ok": true, "n": ' || i || '}}' END,
       CASE WHEN i % 100 = 0 THEN 0 ELSE 1 END, 0, {ISO.format(d=0)},
       CASE WHEN i % 100 = 0 THEN NULL ELSE {ISO.format(d=1)} END,
       CASE WHEN i % 100 = 0 THEN NULL ELSE {ISO.format(d=2)} END,
       {ISO.format(d=0)}, {ISO.format(d=2)},
       CASE WHEN i % 100 = 0 THEN NULL ELSE {ISO.format(d=2)} END, 'default', 1
FROM generate_series(1, {{rows}}) i;
INSERT INTO job_attempts (job_id, type, attempt, outcome, due_at, started_at, ended_at, owner)
SELECT id, type, 1, 'completed', run_at, started_at, ended_at, 'old:1:1' FROM jobs
WHERE status = 'completed' AND right(id, 1) IN ('0', '1', '2', '3');
INSERT INTO job_counts (type, status, n) SELECT type, status, count(*) FROM jobs GROUP BY 1, 2;
"""


def _config(url: str, schema: str) -> Any:
    from shared.settings.config import Config

    cfg = Config().replace(database=url)
    return cfg.replace(postgres=dataclasses.replace(cfg.postgres, schema=schema))


def _create(url: str, schema: str, rows: int) -> None:
    """The schema at today's version (the current migrations), filled with old-form rows."""
    import psycopg

    from shared.engines import open_store

    open_store(_config(url, schema)).close()
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f'SET search_path = "{schema}"')
        with c.transaction():
            for statement in FILL.replace("{rows}", str(int(rows))).split(";\n"):
                if statement.strip():
                    c.execute(statement)
        c.execute("VACUUM ANALYZE jobs")
        c.execute("VACUUM ANALYZE job_attempts")
    print(f"filled {rows:,} jobs in {time.perf_counter() - started:.1f} s", flush=True)


def _writer(url: str, schema: str, stop: Any, out: Any) -> None:
    """enqueue + claim + complete, each timed (wall start, operation, seconds), until ``stop``."""
    from shared.engines import open_store
    from shared.model.job import Finish, NewJob

    store = open_store(_config(_named(url), schema))
    owner, times = f"bench:{os.getpid()}:1", []
    try:
        while not stop.is_set():
            now = time.time()
            job = NewJob(uuid.uuid4().hex, "bench:new", '{"n": 1}', 0, now, None, None)
            t0 = time.perf_counter()
            store.enqueue([job], now)
            t1 = time.perf_counter()
            got = store.claim(owner, os.getpid(), time.time(), 1)
            t2 = time.perf_counter()
            times += [(now, "enqueue", t1 - t0), (now, "claim", t2 - t1)]
            if got:
                j = got[0]
                store.finish_and_claim(
                    [Finish("completed", j.id, j.attempts, '"ok"')],
                    owner,
                    os.getpid(),
                    time.time(),
                    0,
                )
                times.append((now, "complete", time.perf_counter() - t2))
    finally:
        store.close()
        out.put(times)


WRITER = "bench_online_writer"  # the writers' application_name, for the lock watch
WATCH = """SELECT pid, query_start, extract(epoch FROM clock_timestamp() - query_start), query
FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'"""


def _named(url: str) -> str:
    return url + ("&" if "?" in url else "?") + f"application_name={WRITER}"


def _watch(url: str, stop: Any, found: dict[Any, tuple[float, str]]) -> None:
    """Every 20 ms, the writers' statements waiting on a lock, by (pid, start): the longest
    wait seen and the statement (the wait of each, within 20 ms)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as c:
        while not stop.wait(0.02):
            for pid, start, waited, query in c.execute(WATCH, (WRITER,)).fetchall():
                if waited > found.get((pid, start), (0.0, ""))[0]:
                    found[(pid, start)] = (float(waited), " ".join(query.split())[:60])


def _stats(times: list[tuple[float, str, float]], since: float, until: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for op in ("enqueue", "claim", "complete"):
        xs = sorted(d for t, o, d in times if o == op and since <= t < until)
        if xs:
            out[op] = {
                "n": len(xs),
                "per_s": round(len(xs) / max(until - since, 1e-9), 1),
                "p50_ms": round(1000 * xs[len(xs) // 2], 2),
                "p99_ms": round(1000 * xs[min(len(xs) - 1, int(len(xs) * 0.99))], 2),
                "max_ms": round(1000 * xs[-1], 1),
            }
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    import psycopg

    from shared.engines.postgres import online
    from shared.engines.postgres import schema as schema_mod
    from shared.engines.postgres.native import NATIVE_COLUMNS

    schema = f"jobq_bench_online_{uuid.uuid4().hex[:8]}"
    _create(args.database, schema, args.rows)
    ctx = multiprocessing.get_context("spawn")  # nothing crosses fork()
    stop, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(args.database, schema, stop, out))
        for _ in range(args.writers)
    ]
    try:
        for p in procs:
            p.start()
        time.sleep(1 + args.baseline)  # a bench: the writers' baseline is a span of time
        lines: list[str] = []
        waits: dict[Any, tuple[float, str]] = {}
        watching = threading.Event()
        watch = threading.Thread(target=_watch, args=(args.database, watching, waits))
        with psycopg.connect(args.database, autocommit=True) as c:
            t0 = time.time()
            watch.start()
            online.prepare(
                c, schema, NATIVE_COLUMNS, batch=args.batch, progress=_printer(lines, t0)
            )
            t1 = time.time()
            watching.set()
            watch.join()
            stop.set()
            times = [t for _ in procs for t in out.get()]
            for p in procs:
                p.join()
            done = online.finish(c, schema, NATIVE_COLUMNS, version=schema_mod.VERSION)
        return {
            "rows": args.rows,
            "batch": args.batch,
            "writers": args.writers,
            "prepare_s": round(t1 - t0, 1),
            "finish_s": round(done.seconds, 3),
            "finish_lock_ms": round(1000 * done.lock_seconds, 1),
            "before": _stats(times, t0 - args.baseline, t0),
            "during_prepare": _stats(times, t0, t1),
            "lock_waits_seen": len(waits),
            "longest_lock_wait": _longest(waits),
        }
    finally:
        stop.set()
        for p in procs:
            p.join(timeout=30)
        if not args.keep:
            with psycopg.connect(args.database, autocommit=True) as c:
                c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _longest(waits: dict[Any, tuple[float, str]]) -> dict[str, Any] | None:
    if not waits:
        return None
    seconds, query = max(waits.values())
    return {"ms": round(1000 * seconds, 1), "statement": query}


def _printer(lines: list[str], t0: float) -> Any:
    last = [0.0]

    def say(text: str, batch_line: bool) -> None:
        now = time.time()
        if not batch_line or now - last[0] >= 5:
            last[0] = now
            print(f"  +{now - t0:6.1f} s  {text}", flush=True)

    return say


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.pg_online_upgrade")
    p.add_argument("--database", default=os.environ.get("JOBQ_TEST_POSTGRES") or DEFAULT)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--batch", type=int, default=5_000)
    p.add_argument("--writers", type=int, default=2)
    p.add_argument("--baseline", type=float, default=10.0, help="seconds of writes before")
    p.add_argument("--keep", action="store_true", help="keep the schema afterwards")
    print(json.dumps(run(p.parse_args(argv)), indent=2))


if __name__ == "__main__":
    main()
