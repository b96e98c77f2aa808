"""Claim cost with many ``waiting`` jobs: a workflow's children wait outside the claim
index, so a claim should cost the same with 100,000 of them as with none.

    python -m bench.flowclaim                                  # SQLite, 100,000 waiting jobs
    python -m bench.flowclaim --database postgresql:///test    # a fresh schema, dropped after

One process enqueues ``--jobs`` plain jobs and claims and completes them one at a time through
the store (the SQL a worker runs), on a database with no waiting job and on one with
``--waiting`` children of one parent that stays scheduled far ahead, in turns; the median of
``--rounds`` rounds of each:

    flowclaim: sqlite waiting=0 claim+complete=93 us   waiting=100000 claim+complete=95 us   ratio=1.02
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from bench.db import Db
from shared.engines import open_store
from shared.model.job import Finish, NewJob, new_id, new_ids

BATCH = 5000


def add_waiting(store, n: int) -> None:
    """``n`` children waiting for one parent scheduled ten years ahead (never claimed here)."""
    now = time.time()
    parent = NewJob(new_id(), "bench:parent", "null", 0, now + 10 * 365 * 86400, None, None)
    store.enqueue([parent], now)
    for i in range(0, n, BATCH):
        store.enqueue_flow(
            [
                NewJob(j, "bench:child", "null", 0, now, None, None, after=(parent.id,))
                for j in new_ids(min(BATCH, n - i))
            ],
            now,
        )


def round_us(store, jobs: int) -> float:
    """Microseconds per claim and completion of ``jobs`` fresh plain jobs, one at a time."""
    now = time.time()
    store.enqueue(
        [NewJob(j, "bench:plain", "null", 0, now, None, None) for j in new_ids(jobs)], now
    )
    owner, pid = f"bench:{os.getpid()}:1", os.getpid()
    t0 = time.perf_counter()
    for _ in range(jobs):
        [job] = store.claim(owner, pid, time.time())
        store.finish(Finish("completed", job.id, job.attempts, None), owner, time.time())
    return (time.perf_counter() - t0) / jobs * 1e6


def measure(
    dbs: tuple[Db, Db],
    waiting: int,
    jobs: int,
    rounds: int,
    settle: Callable[[], None] | None = None,
) -> tuple[float, float]:
    """Rounds on the empty database and the one with ``waiting`` jobs taken in turn (so a
    machine's passing load weighs on both alike); the median of each. ``settle``: run after the
    waiting jobs are written (PostgreSQL: VACUUM ANALYZE of that database only, what autovacuum
    does soon after a bulk write; without it the rounds on 100,000 fresh rows measured about
    1.2x, with it 1.0x. The empty database is left alone: ANALYZEd while empty, its claims of
    the rounds' jobs ran 3x slower)."""
    with open_store(dbs[0].config()) as none, open_store(dbs[1].config()) as many:
        add_waiting(many, waiting)
        if settle is not None:
            settle()
        times: tuple[list[float], list[float]] = ([], [])
        for store in (none, many):
            round_us(store, 200)  # warm up
        for _ in range(rounds):
            for store, out in ((none, times[0]), (many, times[1])):
                out.append(round_us(store, jobs))
    return statistics.median(times[0]), statistics.median(times[1])


def _vacuum(url: str, schemas: tuple[str, ...]) -> None:
    """VACUUM ANALYZE the jobs tables of ``schemas`` (outside a transaction, as VACUUM must be)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as c:
        for schema in schemas:
            c.execute(f'SET search_path TO "{schema}"')
            c.execute("VACUUM ANALYZE jobs")
            c.execute("VACUUM ANALYZE job_deps")


def run(folder: Path, url: str | None, args: argparse.Namespace) -> tuple[float, float]:
    if url is None:
        return measure(
            (Db.sqlite(str(folder), name="none.db"), Db.sqlite(str(folder), name="many.db")),
            args.waiting,
            args.jobs,
            args.rounds,
        )
    from bench import pg

    with (
        pg.fresh_schema(url, "flowclaim", create=False) as a,
        pg.fresh_schema(url, "flowclaim", create=False) as b,
    ):
        dbs = (Db.postgres(str(folder), url, a), Db.postgres(str(folder), url, b))
        try:
            return measure(
                dbs,
                args.waiting,
                args.jobs,
                args.rounds,
                None if args.fresh else lambda: _vacuum(url, (b,)),
            )
        finally:
            for db in dbs:
                db.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.flowclaim", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--waiting", type=int, default=100_000)
    p.add_argument("--jobs", type=int, default=2000, help="jobs claimed per round")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument(
        "--database", default=None, help="postgresql://... (default: SQLite files in a temp folder)"
    )
    p.add_argument(
        "--fresh",
        action="store_true",
        help="PostgreSQL: measure right after the bulk write, "
        "before VACUUM ANALYZE (what autovacuum soon does)",
    )
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="jobq-flowclaim-") as tmp:
        none, many = run(Path(tmp), args.database, args)
    engine = "sqlite" if args.database is None else "postgresql"
    print(
        f"flowclaim: {engine} waiting=0 claim+complete={none:.0f} us   waiting={args.waiting} "
        f"claim+complete={many:.0f} us   ratio={many / none:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
