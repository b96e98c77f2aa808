"""The raw SQLite ceiling: a bare Python claim/complete loop on jobq's own ``jobs`` table.

``python -m bench.raw --db PATH --sync normal --mode one`` runs one worker process until the
queue is empty. Modes:
- ``one``: a guarded ``UPDATE ... RETURNING`` claim of one job, then a guarded completion
  (two commits per job): the one-claim-per-transaction ceiling.
- ``fold``: the completion of the previous job and the next claim share one transaction.
- ``batch10``: ten claims per transaction, their completions folded into the next claim.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import sys
import time

from shared.engines.sqlite import schema  # the raw ceiling runs on the SQLite engine's own tables
from shared.runtime.clock import iso
from shared.model.job import new_id

MODES = ("one", "fold", "batch10")

CLAIM = """
UPDATE jobs SET status = 'running', attempts = attempts + 1, owner = :owner, owner_pid = :pid,
       started_at = :now, heartbeat_at = :now, updated_at = :now
WHERE id IN (SELECT id FROM jobs WHERE status = 'pending' AND run_at <= :now
             ORDER BY priority DESC, run_at, created_at LIMIT :limit)
  AND status = 'pending'
RETURNING id, attempts
"""

COMPLETE = (
    "UPDATE jobs SET status = 'completed', completed_at = :now, updated_at = :now, "
    "owner = NULL, owner_pid = NULL, heartbeat_at = NULL "
    "WHERE id = :id AND status = 'running' AND attempts = :attempt AND owner = :owner"
)

INSERT = (
    "INSERT INTO jobs (id, type, status, payload, attempts, max_attempts, priority, run_at, "
    "created_at, updated_at, key) VALUES (?, ?, 'pending', ?, 0, NULL, 0, ?, ?, ?, NULL)"
)


def connect(path: str, sync: str, *, create: bool = False) -> sqlite3.Connection:
    """A WAL connection like jobq's own: autocommit, explicit transactions, 5 s busy timeout."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {sync.upper()}")
    if create:
        schema.migrate(conn)
    return conn


def claim(conn: sqlite3.Connection, owner: str, limit: int = 1) -> list[tuple[str, int]]:
    params = {"owner": owner, "pid": os.getpid(), "now": iso(time.time()), "limit": limit}
    return conn.execute(CLAIM, params).fetchall()


def complete(conn: sqlite3.Connection, owner: str, jobs: list[tuple[str, int]]) -> None:
    now = iso(time.time())
    conn.executemany(
        COMPLETE, [{"id": i, "attempt": a, "owner": owner, "now": now} for i, a in jobs]
    )


def retrying(fn, *args, attempts: int = 100):
    """Call ``fn(*args)``, retrying while SQLite stays locked past its busy timeout (writers are
    not served fairly: one process can starve). Each call must be safe to repeat."""
    for attempt in range(attempts):
        try:
            return fn(*args)
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(random.uniform(0.0005, 0.002))
    raise AssertionError("unreachable")


def _tx(conn: sqlite3.Connection, fn, *args):
    conn.execute("BEGIN IMMEDIATE")
    try:
        out = fn(conn, *args)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return out


def in_tx(conn: sqlite3.Connection, fn, *args):
    """Run ``fn(conn, *args)`` inside ``BEGIN IMMEDIATE`` ... ``COMMIT`` (retried while locked)."""
    return retrying(_tx, conn, fn, *args)


def complete_then_claim(
    conn: sqlite3.Connection, owner: str, done: list[tuple[str, int]], limit: int
) -> list[tuple[str, int]]:
    complete(conn, owner, done)
    return claim(conn, owner, limit)


def work(conn: sqlite3.Connection, owner: str, mode: str) -> int:
    """Claim and complete no-op jobs until none is due; return how many this process did."""
    n = 0
    if mode == "one":
        while jobs := retrying(claim, conn, owner):
            retrying(complete, conn, owner, jobs)
            n += 1
        return n
    limit = 10 if mode == "batch10" else 1
    jobs = in_tx(conn, claim, owner, limit)
    while jobs:
        n += len(jobs)
        jobs = in_tx(conn, complete_then_claim, owner, jobs, limit)
    return n


def insert_params(
    n: int, now: float, run_at: float | None = None, type_: str = "bench:noop"
) -> list[tuple]:
    """Rows for :data:`INSERT`, like jobq's (time-ordered ids, ISO times)."""
    stamp, due = iso(now), iso(now if run_at is None else run_at)
    return [(new_id(), type_, "null", due, stamp, stamp) for _ in range(n)]


def enqueue_single(conn: sqlite3.Connection, n: int) -> None:
    """``n`` single-row autocommit inserts."""
    for _ in range(n):
        conn.execute(INSERT, insert_params(1, time.time())[0])


def enqueue_batched(conn: sqlite3.Connection, n: int, batch: int = 1000) -> None:
    """``n`` rows in transactions of ``batch`` rows (executemany)."""
    for start in range(0, n, batch):
        rows = insert_params(min(batch, n - start), time.time())
        in_tx(conn, lambda c: c.executemany(INSERT, rows))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.raw", description="One raw claim/complete worker."
    )
    p.add_argument("--db", required=True)
    p.add_argument("--sync", choices=("normal", "full"), default="normal")
    p.add_argument("--mode", choices=MODES, default="one")
    args = p.parse_args(argv)
    conn = connect(args.db, args.sync)
    try:
        work(conn, f"raw:{os.getpid()}", args.mode)
    finally:
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
