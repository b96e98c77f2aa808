"""Claim cost with per-key fairness: ``python -m bench.keys --pending 1000000 --keys
10000 [--database postgresql:///test]``.

Fills a fresh database with ``--pending`` due jobs of one type spread over ``--keys`` limit keys
(``[types] concurrency_per_key = 2, fair = true``) plus as many of a plain type on a named queue,
then times, one process, one job at a time: the fair limited claim (the turn over keys, the
counts per key) followed by its job's completion; and the plain claim of one named queue
(``queue = ?`` on its own index) with the other queue deep. Prints p50/p99 per claim in ms.
The fair claim is timed whole, as a worker makes it: its transaction, lock and commit included.
On PostgreSQL it also counts, from libpq's protocol trace of a few claims, the round trips and
statements per fair claim: figures that do not swing with the machine's load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

from shared.settings.config import from_dict
from shared.engines import open_store
from shared.model.job import Finish, NewJob, new_id
from shared.model.limits import type_limits

OWNER, PID = f"bench:{os.getpid()}:1", os.getpid()


def fill(store, n: int, keys: int, now: float, chunk: int = 20_000) -> list[str]:
    """Enqueue; the ids of the first ``2 * keys`` jobs (two of each key, key i at i and i + keys)."""
    first: list[str] = []
    for start in range(0, n, chunk):
        jobs = [
            NewJob(
                new_id(), "bench:fair", "{}", 0, now - 1, None, None, limit_key=f"k{i % keys:05d}"
            )
            for i in range(start, min(start + chunk, n))
        ]
        store.enqueue(jobs, now)
        first += [j.id for j in jobs][: max(0, 2 * keys - len(first))]
    return first


def hold_full_keys(store, first: list[str], keys: int, every: int, upto: int, limits) -> int:
    """Claim (and keep running) both first jobs of every key below ``upto`` but one in ``every``:
    those keys are at their limit (``concurrency_per_key = 2``), so each fair claim steps over
    ``every - 1`` of them. Returns how many keys are held full."""
    ids = [first[i + d] for i in range(min(upto, keys)) if i % every for d in (0, keys)]
    for at in range(0, len(ids), 500):
        store.claim_limited("bench:holder:1", PID, time.time(), limits, 500, ids=ids[at : at + 500])
    return int(store.read("SELECT count(*) AS n FROM jobs WHERE status = 'running'")[0]["n"]) // 2


def fill_reports(store, n: int, now: float, chunk: int = 20_000) -> None:
    for start in range(0, n, chunk):
        store.enqueue(
            [
                NewJob(new_id(), "bench:plain", "{}", 0, now - 1, None, None, queue="reports")
                for _ in range(start, min(start + chunk, n))
            ],
            now,
        )


def round_trips(store, fn, n: int = 20) -> tuple[float, float]:
    """Round trips (the client sends, then waits for answers) and statements per call of
    ``fn``, over ``n`` calls, from libpq's trace of the store's connection (PostgreSQL)."""
    fd, path = tempfile.mkstemp()
    store.conn.pgconn.trace(fd)
    try:
        for _ in range(n):
            fn()
    finally:
        store.conn.pgconn.untrace()
        os.close(fd)
    with open(path) as f:
        sides = [(line.split("\t") + ["", "", ""])[1:4:2] for line in f]
    os.unlink(path)
    trips = sum(1 for (a, _), (b, _) in zip(sides, sides[1:]) if a == "F" and b == "B")
    return trips / n, sum(
        1 for side, msg in sides if side == "F" and msg in ("Execute", "Query")
    ) / n


def cpu_ms(store, fn, n: int = 100) -> tuple[float, float]:
    """CPU per call of ``fn`` in ms, over ``n`` calls: this process's, and its PostgreSQL
    backend's (from /proc: the server runs on this host in the bench). Unlike wall time, CPU
    does not grow while a process waits for a core on a loaded machine."""
    tick = os.sysconf("SC_CLK_TCK")

    def server() -> float:
        with open(f"/proc/{store.conn.info.backend_pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    c0, s0 = time.process_time(), server()
    for _ in range(n):
        fn()
    return (time.process_time() - c0) * 1000 / n, (server() - s0) * 1000 / n


def timed(fn, rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return sorted(out)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--pending", type=int, default=100_000)
    p.add_argument("--keys", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=300)
    p.add_argument(
        "--full-every",
        type=int,
        default=0,
        help="hold every key at its limit but one in N "
        "(each fair claim then steps over N-1 full keys)",
    )
    p.add_argument("--database", default=None, help="default: a SQLite file in a temporary folder")
    p.add_argument("--keep", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    database = a.database or os.path.join(tempfile.mkdtemp(), "keys.db")
    cfg = from_dict(
        {
            "database": database,
            "postgres": {"schema": f"bench_keys_{os.getpid()}"},
            "types": {"bench:fair": {"concurrency_per_key": 2, "fair": True}},
        }
    )
    store = open_store(cfg)
    now = time.time()
    t0 = time.perf_counter()
    first = fill(store, a.pending, a.keys, now)
    if hasattr(store, "analyze_if_stale"):
        store.analyze_if_stale(0, 0)
    print(
        f"filled {a.pending:,} fair jobs over {a.keys:,} keys "
        f"in {time.perf_counter() - t0:.0f} s ({database.split('?')[0]})"
    )
    limits = type_limits(cfg)
    if a.full_every > 1:
        held = hold_full_keys(
            store, first, a.keys, a.full_every, a.rounds * a.full_every + 1, limits
        )
        print(f"{held:,} keys held at their limit: each fair claim steps over {a.full_every - 1}")

    claims: list[float] = []

    def fair_cycle() -> None:
        t = time.perf_counter()
        (j,) = store.claim_limited(OWNER, PID, time.time(), limits, 1)
        claims.append((time.perf_counter() - t) * 1000)
        store.finish_and_claim(
            [Finish("completed", j.id, j.attempts, None)], OWNER, PID, time.time(), 0
        )

    ms = timed(fair_cycle, a.rounds)
    claims.sort()
    print(
        f"fair claim alone: p50 {statistics.median(claims):.2f} ms, p99 {claims[int(len(claims) * 0.99) - 1]:.2f} ms"
    )
    print(
        f"fair claim + complete: p50 {statistics.median(ms):.2f} ms, p99 {ms[int(len(ms) * 0.99) - 1]:.2f} ms"
    )
    if database.startswith("postgres"):
        trips, statements = round_trips(
            store, lambda: store.claim_limited(OWNER, PID, time.time(), limits, 1)
        )
        print(f"fair claim: {trips:.1f} round trips, {statements:.1f} statements (libpq trace)")
        client, server = cpu_ms(
            store, lambda: store.claim_limited(OWNER, PID, time.time(), limits, 1)
        )
        print(
            f"fair claim CPU: client {client:.3f} ms, server {server:.3f} ms (per claim, 100 claims)"
        )
    fill_reports(store, a.pending, now)
    if hasattr(store, "analyze_if_stale"):
        store.analyze_if_stale(0, 0)
    store.serve((("emails", 1),))
    store.enqueue(
        [
            NewJob(new_id(), "bench:plain", "{}", 0, now, None, None, queue="emails")
            for _ in range(a.rounds)
        ],
        now,
    )
    ms = timed(lambda: store.claim(OWNER, PID, time.time(), 1), a.rounds)
    print(
        f"claim of queue emails beside {a.pending:,} on reports: p50 {statistics.median(ms):.2f} ms, "
        f"p99 {ms[int(len(ms) * 0.99) - 1]:.2f} ms"
    )
    if a.keep:
        return
    if database.startswith("postgres"):
        store.write(f"DROP SCHEMA {cfg.postgres.schema} CASCADE")  # the bench's own, made above
    store.close()
    if a.database is None:  # the temporary folder made above (1,000,000 jobs: about 800 MB)
        shutil.rmtree(os.path.dirname(database), ignore_errors=True)


if __name__ == "__main__":
    main()
