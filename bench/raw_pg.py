"""The raw PostgreSQL ceiling: a bare psycopg claim/complete loop on a ``jobs`` table of its own.

    python -m bench.raw_pg work --url URL --schema S --batch 1|10|100     # until none is due
    python -m bench.raw_pg listen --url URL --schema S --batch 1          # idle: LISTEN, claim, stamp

The claim is the one postgres-facts.md measured::

    UPDATE jobs SET status='running', attempts=attempts+1, owner=$1, started_at=now()
    WHERE id IN (SELECT id FROM jobs WHERE status='pending' AND run_at<=now()
                 ORDER BY priority DESC, run_at, id LIMIT $n FOR UPDATE SKIP LOCKED)
    RETURNING id, attempts

- batch 1: the claim and the completion as two autocommit statements (two commits per job);
- batch n > 1: the completions of the last batch (one guarded ``UPDATE ... FROM unnest``) and
  the next claim in one transaction.

Enqueue: one autocommit ``INSERT`` with its ``pg_notify`` in the same statement; also a bare
``INSERT`` and ``BEGIN; INSERT; NOTIFY; COMMIT`` for reference; ``executemany`` of 1,000 rows
per transaction with one NOTIFY.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import psycopg

from .pg import connect

CHANNEL = "bench_raw"

DDL = """
CREATE TABLE jobs (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    type         text NOT NULL,
    status       text NOT NULL DEFAULT 'pending',
    payload      text NOT NULL DEFAULT 'null',
    attempts     integer NOT NULL DEFAULT 0,
    priority     integer NOT NULL DEFAULT 0,
    run_at       timestamptz NOT NULL DEFAULT now(),
    created_at   timestamptz NOT NULL DEFAULT now(),
    owner        text,
    started_at   timestamptz,
    completed_at timestamptz,
    t_start      double precision      -- the worker's time.time() at the claim (latency runs)
);
CREATE INDEX jobs_claim ON jobs (priority DESC, run_at, id) WHERE status = 'pending';
"""

CLAIM = """
UPDATE jobs SET status = 'running', attempts = attempts + 1, owner = %(owner)s, started_at = now()
WHERE id IN (SELECT id FROM jobs WHERE status = 'pending' AND run_at <= now()
             ORDER BY priority DESC, run_at, id LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
RETURNING id, attempts
"""

COMPLETE = """
UPDATE jobs SET status = 'completed', completed_at = now(), owner = NULL, t_start = d.t
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(ts)s::float8[]) AS d(id, attempt, t)
WHERE jobs.id = d.id AND jobs.status = 'running' AND jobs.attempts = d.attempt AND jobs.owner = %(owner)s
"""

INSERT = "INSERT INTO jobs (type, payload) VALUES (%s, %s)"
INSERT_DELAYED = (
    f"WITH j AS (INSERT INTO jobs (type, payload, run_at) VALUES (%s, %s, to_timestamp(%s)) "
    f"RETURNING id) SELECT id, pg_notify('{CHANNEL}', '') FROM j"
)
INSERT_NOTIFY = (
    f"WITH j AS (INSERT INTO jobs (type, payload) VALUES (%s, %s) RETURNING id) "
    f"SELECT id, pg_notify('{CHANNEL}', '') FROM j"
)


def create(conn: psycopg.Connection) -> None:
    conn.execute(DDL)


def claim(conn: psycopg.Connection, owner: str, limit: int) -> list[tuple[int, int]]:
    return conn.execute(CLAIM, {"owner": owner, "limit": limit}).fetchall()


def complete(conn: psycopg.Connection, owner: str, jobs: list[tuple[int, int]], t: float) -> None:
    conn.execute(
        COMPLETE,
        {
            "ids": [j[0] for j in jobs],
            "attempts": [j[1] for j in jobs],
            "ts": [t] * len(jobs),
            "owner": owner,
        },
    )


def complete_then_claim(
    conn: psycopg.Connection, owner: str, done: list[tuple[int, int]], t: float, limit: int
) -> list[tuple[int, int]]:
    with conn.transaction():
        complete(conn, owner, done, t)
        return claim(conn, owner, limit)


def work(conn: psycopg.Connection, owner: str, batch: int) -> int:
    """Claim and complete no-op jobs until none is due; how many this process did."""
    n = 0
    if batch == 1:
        while jobs := claim(conn, owner, 1):
            complete(conn, owner, jobs, time.time())
            n += 1
        return n
    jobs = claim(conn, owner, batch)
    while jobs:
        n += len(jobs)
        jobs = complete_then_claim(conn, owner, jobs, time.time(), batch)
    return n


def listen(conn: psycopg.Connection, owner: str, batch: int) -> None:
    """Idle worker: LISTEN; on each wake-up claim what is due, stamp and complete it. Delayed
    jobs are found by a poll at their due time (the earliest pending run_at), as a worker
    that knows the next due time would."""
    conn.execute(f"LISTEN {CHANNEL}")
    while True:
        jobs = claim(conn, owner, batch)
        if jobs:
            complete(conn, owner, jobs, time.time())
            continue
        row = conn.execute(
            "SELECT extract(epoch FROM min(run_at) - now()) FROM jobs WHERE status = 'pending'"
        ).fetchone()
        wait = 1.0 if row[0] is None else max(0.0, min(1.0, float(row[0])))
        for _ in conn.notifies(timeout=wait, stop_after=1):
            pass


def enqueue_single(conn: psycopg.Connection, n: int, how: str = "notify") -> None:
    """``n`` one-job enqueues: "notify" (INSERT and pg_notify in one statement), "insert"
    (bare INSERT), "tx" (BEGIN; INSERT; NOTIFY; COMMIT)."""
    for _ in range(n):
        if how == "notify":
            conn.execute(INSERT_NOTIFY, ("bench:noop", "null")).fetchone()
        elif how == "insert":
            conn.execute(INSERT, ("bench:noop", "null"))
        else:
            with conn.transaction():
                conn.execute(INSERT, ("bench:noop", "null"))
                conn.execute(f"NOTIFY {CHANNEL}")


def enqueue_batched(conn: psycopg.Connection, n: int, batch: int = 1000) -> None:
    """``n`` rows, ``executemany`` in transactions of ``batch`` rows, one NOTIFY each."""
    for start in range(0, n, batch):
        rows = [("bench:noop", "null")] * min(batch, n - start)
        with conn.transaction():
            with conn.cursor() as cur:
                cur.executemany(INSERT, rows)
            conn.execute(f"NOTIFY {CHANNEL}")


def fill(conn: psycopg.Connection, n: int, future: float = 0.0) -> None:
    """``n`` pending jobs generated in the server; a share ``future`` of them (every i with
    i % 10 < future*10) due a day from now, the rest due a second ago."""
    cut = round(future * 10)
    conn.execute(
        "INSERT INTO jobs (type, run_at) SELECT 'bench:noop', "
        "CASE WHEN i %% 10 < %s THEN now() + interval '1 day' ELSE now() - interval '1 second' END "
        "FROM generate_series(0, %s - 1) AS i",
        (cut, n),
    )
    conn.execute("ANALYZE jobs")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.raw_pg", description="One raw PostgreSQL worker."
    )
    p.add_argument("mode", choices=("work", "listen"))
    p.add_argument("--url", required=True)
    p.add_argument("--schema", required=True)
    p.add_argument("--batch", type=int, default=1)
    args = p.parse_args(argv)
    conn = connect(args.url, args.schema)
    owner = f"raw:{os.getpid()}"
    try:
        if args.mode == "work":
            work(conn, owner, args.batch)
        else:
            try:
                listen(conn, owner, args.batch)
            except KeyboardInterrupt:
                pass
    finally:
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
