"""What one single enqueue costs on PostgreSQL, jobq's ``JobQueue.enqueue`` (no option) against
the raw one-statement ``INSERT ... ; pg_notify`` (:data:`bench.raw_pg.INSERT_NOTIFY`), each on a
fresh schema of its own, in alternating rounds:

    python -m bench.pg_enqueue_cost --url postgresql://127.0.0.1:5432/test [--n 3000] [--rounds 3]

Per enqueue: wall time, the client's CPU (``time.process_time``), the server backend's CPU (its
``/proc/<pid>/schedstat``: the server must run on this machine), the WAL written (the least
``pg_current_wal_lsn`` step over 100 single calls: other sessions' WAL only adds), and per row:
the index entries (each index's predicate counted over the table) and the rows in each table
of the schema (jobq's count deltas: nothing folds them, no supervisor runs). On a loaded machine the times swing; the WAL and the entries do not. Client
instructions, repeatable under load: a script making N calls run under ``valgrind
--tool=callgrind``, less the same script making none, over N.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from typing import Any, Callable, Iterator

from shared.producer.api import JobQueue
from shared.settings.config import Config, PostgresConfig

from . import pg, raw_pg

WARM = 300  # calls before measuring: prepared statements made, caches warm


@contextlib.contextmanager
def side(url: str, who: str) -> Iterator[tuple[Callable[[], Any], Any, str]]:
    """(one enqueue, the connection it runs on, the schema) of ``who``: "jobq" or "raw"."""
    with pg.fresh_schema(url, who, create=who == "raw") as schema:
        if who == "raw":
            with pg.connect(url, schema) as conn:
                raw_pg.create(conn)
                yield (
                    (lambda: conn.execute(raw_pg.INSERT_NOTIFY, ("bench:noop", "null")).fetchone()),
                    conn,
                    schema,
                )
            return
        q = JobQueue(config=Config(database=url, postgres=PostgresConfig(schema=schema)))
        try:
            q.enqueue("bench:noop", None)  # (the store connects)
            yield (lambda: q.enqueue("bench:noop", None)), q.store.conn, schema
        finally:
            q.close()


def backend_cpu(pid: int) -> float:
    """Seconds of CPU the server process ``pid`` has run."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e9


def timed(one: Callable[[], Any], pid: int, n: int) -> dict[str, float]:
    """Microseconds per call of ``n`` calls: wall, client CPU, server CPU."""
    s0, w0, c0 = backend_cpu(pid), time.perf_counter(), time.process_time()
    for _ in range(n):
        one()
    s1, w1, c1 = backend_cpu(pid), time.perf_counter(), time.process_time()
    return {
        "wall_us": (w1 - w0) / n * 1e6,
        "client_us": (c1 - c0) / n * 1e6,
        "server_us": (s1 - s0) / n * 1e6,
    }


def wal_bytes(mon: Any, one: Callable[[], Any]) -> int:
    """The least WAL one call wrote, over 100 calls."""
    steps = []
    for _ in range(100):
        a = mon.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
        one()
        steps.append(
            mon.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", (a,)).fetchone()[0]
        )
    return int(min(steps))


def per_row(mon: Any, schema: str) -> dict[str, Any]:
    """Index entries per row of the jobs table (by index) and rows inserted per job (by table)."""
    table = f'"{schema}".jobs'
    rows = mon.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    indexes = mon.execute(
        "SELECT indexrelid::regclass::text, pg_get_expr(indpred, indrelid) FROM pg_index "
        "WHERE indrelid = %s::regclass ORDER BY 1",
        (table,),
    ).fetchall()
    entries = {
        name.split(".")[-1]: mon.execute(
            f"SELECT count(*) FROM {table} WHERE {pred or 'true'}"
        ).fetchone()[0]
        / rows
        for name, pred in indexes
    }
    names = mon.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", (schema,)
    ).fetchall()
    counts = {
        t: mon.execute(f'SELECT count(*) FROM "{schema}"."{t}"').fetchone()[0] for (t,) in names
    }
    return {
        "index_entries": entries,
        "rows_per_job": {t: n / rows for t, n in counts.items() if n >= rows / 100},
    }


def measure(url: str, who: str, n: int) -> dict[str, Any]:
    """One round of ``who``: the timed calls, the WAL per call, the entries per row."""
    with side(url, who) as (one, conn, schema), pg.connect(url) as mon:
        for _ in range(WARM):
            one()
        out: dict[str, Any] = timed(one, conn.info.backend_pid, n)
        out["wal_bytes"] = wal_bytes(mon, one)
        return {**out, **per_row(mon, schema)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.pg_enqueue_cost", description=__doc__)
    p.add_argument("--url", required=True)
    p.add_argument("--n", type=int, default=3000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    runs: dict[str, list[dict[str, Any]]] = {"jobq": [], "raw": []}
    for _ in range(args.rounds):
        for who in runs:
            runs[who].append(measure(args.url, who, args.n))
    for who, rs in runs.items():
        print(f"{who}: load {os.getloadavg()[0]:.2f}")
        for k in ("wall_us", "client_us", "server_us", "wal_bytes"):
            got = [r[k] for r in rs]
            print(f"  {k:10s} median {statistics.median(got):8.1f}  runs {[round(x) for x in got]}")
        print(f"  index entries per row {rs[-1]['index_entries']}")
        print(f"  rows written per job {rs[-1]['rows_per_job']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
