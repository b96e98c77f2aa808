"""Writers during a big purge: ``python -m bench.purge``.

Fills a database with ``--rows`` completed jobs that finished 30 days ago (each with one attempt
row, as real jobs have), starts the real supervisor with ``--workers`` workers, and feeds it
``--rate`` ``bench:stamp`` jobs per second from one producer. After a few seconds of baseline it
runs the purge -- ``jobq purge --older-than 7d`` (``--what cli``) or the built-in
``cleanup:old-data`` job (``--what cleanup``) -- and reports, for jobs enqueued before and during
it: enqueue-to-completion p50/p99/max (the workers' ``completed_at`` minus ``created_at``), the
longest ``enqueue`` call and its p99 (a writer's wait for the lock), and enqueues that failed
(``database is locked``: a wait past ``busy_timeout``). ``--load N`` keeps N busy CPU loops
running meanwhile (a loaded machine). ``--database postgresql://...``: the same on a fresh
schema of that server (dropped after), else a SQLite file. One JSON object on stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Iterator

from shared.runtime.clock import iso, parse_iso
from shared.model.errors import StoreError

from .db import Db, place
from .jobq_runs import query, queue, start, unfinished
from .procs import child_env, python, wait_for, REPO
from .stats import percentile

OLD = 30 * 86400.0


# Completed jobs that finished 30 days ago, ids sorting before any new job's, on both engines:
_OLD_JOBS = (
    "INSERT INTO jobs (id, type, status, payload, attempts, run_at, started_at, completed_at, "
    "created_at, updated_at) SELECT {id}, 'bench:old', 'completed', 'null', 1, ?, ?, ?, ?, ? FROM {n}"
)
_OLD_ATTEMPTS = (
    "INSERT INTO job_attempts (job_id, type, attempt, outcome, due_at, started_at, ended_at) "
    "SELECT id, type, 1, 'completed', run_at, started_at, completed_at FROM jobs"
)


def fill_old(db: Db, rows: int) -> None:
    """``rows`` completed jobs (and their attempt rows) that finished 30 days ago, in one
    transaction, through the engine's own counts (its triggers)."""
    with queue(db):
        pass  # creates the schema
    stamp = (iso(time.time() - OLD),) * 5
    if db.engine == "postgresql":
        from .pg import connect

        with connect(db.database, db.schema, autocommit=False) as c:
            c.execute(
                _OLD_JOBS.format(
                    id="lpad(to_hex(i), 32, '0')::uuid", n="generate_series(1, %s) i"
                ).replace("?", "%s"),
                (*stamp, rows),
            )
            c.execute(_OLD_ATTEMPTS)
        return
    c = sqlite3.connect(db.database, isolation_level=None)
    try:
        c.execute("BEGIN IMMEDIATE")
        c.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
            + _OLD_JOBS.format(id="printf('0000%028x', i)", n="n"),
            (rows, *stamp),
        )
        c.execute(_OLD_ATTEMPTS)
        c.execute("COMMIT")
    finally:
        c.close()


class Producer(threading.Thread):
    """Enqueues ``rate`` jobs per second; records (enqueue start, call seconds, id or error)."""

    def __init__(self, db: Db, rate: float) -> None:
        super().__init__(daemon=True)
        self.db, self.period = db, 1.0 / rate
        self.stop = threading.Event()
        self.calls: list[tuple[float, float, str | None, str | None]] = []

    def run(self) -> None:
        with queue(self.db) as q:
            nxt = time.monotonic()
            while not self.stop.is_set():
                t0, w0 = time.perf_counter(), time.time()
                try:
                    jid, err = q.enqueue("bench:stamp", None), None
                except (sqlite3.Error, StoreError) as exc:
                    jid, err = None, str(exc)
                self.calls.append((w0, time.perf_counter() - t0, jid, err))
                nxt += self.period
                self.stop.wait(max(nxt - time.monotonic(), 0))


@contextlib.contextmanager
def cpu_load(n: int) -> Iterator[None]:
    """``n`` processes spinning on the CPU for the duration (stopped on the way out)."""
    procs = [subprocess.Popen([python(), "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def run_purge(db: Db, what: str, cfg: str) -> tuple[float, float, str]:
    """Run the purge; (wall start, wall end, its output)."""
    t0 = time.time()
    if what == "cli":
        out = subprocess.run(
            [python(), "-m", "supervisor", "purge", "--config", cfg, "--older-than", "7d"],
            cwd=REPO,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=1800,
        )
        text = out.stdout + out.stderr
    else:
        with queue(db) as q:
            jid = q.enqueue("cleanup:old-data", None)
        wait_for(
            lambda: (
                query(db, f"SELECT status FROM jobs WHERE id = '{jid}'")[0][0]
                in ("completed", "failed")
            ),
            1800,
            "the cleanup job",
            interval=0.1,
        )
        text = query(db, f"SELECT status, result, error FROM jobs WHERE id = '{jid}'")[0]
        text = json.dumps(text)
    return t0, time.time(), text


def summary(latencies: list[float], calls: list[float], errors: int) -> dict[str, Any]:
    ms = [x * 1000 for x in latencies]
    return {
        "jobs": len(ms),
        "p50_ms": round(percentile(ms, 50), 1),
        "p99_ms": round(percentile(ms, 99), 1),
        "max_ms": round(max(ms), 1) if ms else None,
        "enqueue_call_p99_ms": round(percentile([c * 1000 for c in calls], 99), 1)
        if calls
        else None,
        "enqueue_call_max_ms": round(max(calls) * 1000, 1) if calls else None,
        "enqueue_errors": errors,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.purge", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=500_000)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--rate", type=float, default=50.0, help="jobs per second enqueued meanwhile")
    p.add_argument("--what", choices=("cli", "cleanup"), default="cli")
    p.add_argument("--baseline", type=float, default=3.0, help="seconds before the purge")
    p.add_argument("--load", type=int, default=0, help="busy CPU loops running meanwhile")
    p.add_argument(
        "--database", help="postgresql://... : a fresh schema on this server (default: SQLite)"
    )
    args = p.parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="jobq-bench-purge-") as folder,
        place(folder, args.database, "purge") as db,
    ):
        fill_old(db, args.rows)
        with start(db, "normal", args.workers), cpu_load(args.load):
            prod = Producer(db, args.rate)
            prod.start()
            time.sleep(args.baseline)
            t0, t1, text = run_purge(db, args.what, os.path.join(folder, "jobq.toml"))
            prod.stop.set()
            prod.join()
            wait_for(lambda: unfinished(db) == 0, 120, "the producer's jobs to finish")
        done = dict(query(db, "SELECT id, completed_at FROM jobs WHERE type = 'bench:stamp'"))
        left = query(db, "SELECT count(*) FROM jobs WHERE type = 'bench:old'")[0][0]
    phases: dict[str, Any] = {}
    for name, keep in (("before", lambda w: w < t0), ("during", lambda w: t0 <= w < t1)):
        calls = [c for c in prod.calls if keep(c[0])]
        lat = [parse_iso(done[jid]) - w for w, _, jid, _ in calls if jid in done]
        phases[name] = summary(lat, [c[1] for c in calls], sum(1 for c in calls if c[3]))
    print(
        json.dumps(
            {
                "engine": "postgresql" if args.database else "sqlite",
                "what": args.what,
                "rows": args.rows,
                "workers": args.workers,
                "rate": args.rate,
                "load": args.load,
                "loadavg": [round(x, 2) for x in os.getloadavg()],
                "purge_s": round(t1 - t0, 2),
                "old_rows_left": left,
                "purge_output": text.strip()[-300:],
                **phases,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
