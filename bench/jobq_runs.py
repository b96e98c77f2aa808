"""jobq under test: the real supervisor (``python -m supervisor run``) on a temporary database,
fed through ``JobQueue``; times read back from the ``jobs`` table."""
from __future__ import annotations

import json
import os
import sqlite3
import time
from typing import Any

import tomli_w

from shared.api import JobQueue
from shared.clock import parse_iso
from shared.config import Config, SqliteConfig

from .procs import Tree, python, wait_for
from .stats import rate

BATCH = 1000


def write_config(folder: str, sync: str, workers: int, log_level: str = "warning") -> str:
    """The supervisor's config: defaults, except the bench handlers, ``synchronous`` and (unless
    asked otherwise) quiet logs."""
    path = os.path.join(folder, "jobq.toml")
    data = {"database": "jobq.db", "handlers": ["bench.handlers"], "sqlite": {"synchronous": sync},
            "log_level": log_level, "supervisor": {"workers": workers}}
    with open(path, "wb") as f:
        tomli_w.dump(data, f)
    return path


def queue(folder: str, sync: str) -> JobQueue:
    return JobQueue(os.path.join(folder, "jobq.db"), config=Config(sqlite=SqliteConfig(synchronous=sync)))


def query(folder: str, sql: str) -> list[tuple]:
    """Run one read on a short-lived connection (never holding a snapshot open)."""
    c = sqlite3.connect(os.path.join(folder, "jobq.db"), timeout=5.0)
    try:
        return c.execute(sql).fetchall()
    finally:
        c.close()


def unfinished(folder: str) -> int:
    return query(folder, "SELECT count(*) FROM jobs WHERE status IN ('pending', 'running')")[0][0]


def burn_window(folder: str) -> dict[str, Any]:
    """jobs/s from the first claim (min started_at) to the last completion (max completed_at)."""
    n, first, last = query(folder, "SELECT count(*), min(started_at), max(completed_at) FROM jobs "
                                   "WHERE status = 'completed'")[0]
    if not n:
        raise RuntimeError("no job completed")
    return rate(n, parse_iso(last) - parse_iso(first))


def start(folder: str, sync: str, workers: int, log_level: str = "warning") -> Tree:
    """``python -m supervisor run --config <tmp toml> --workers W``; returns once W workers
    have registered."""
    cfg = write_config(folder, sync, workers, log_level)
    tree = Tree([python(), "-m", "supervisor", "run", "--config", cfg, "--workers", str(workers)],
                os.path.join(folder, "supervisor.log"), stop_timeout=30)
    try:
        wait_for(lambda: _workers_up(folder, tree) >= workers, 60, f"{workers} jobq workers")
    except BaseException:
        tree.close()
        raise
    return tree


def _workers_up(folder: str, tree: Tree) -> int:
    if not tree.alive():
        raise RuntimeError(f"supervisor exited with {tree.proc.returncode}: {tree.output()}")
    try:
        return query(folder, "SELECT count(*) FROM processes WHERE kind = 'worker'")[0][0]
    except sqlite3.OperationalError:
        return 0  # not created yet


def fill(q: JobQueue, n: int, job_type: str = "bench:noop") -> None:
    for i in range(0, n, BATCH):
        q.enqueue_many([(job_type, None)] * min(BATCH, n - i))


def burn(folder: str, sync: str, workers: int, n: int, log_level: str = "warning") -> dict[str, Any]:
    """Burn-down: ``n`` no-op jobs pre-enqueued, then the supervisor with ``workers`` workers."""
    with queue(folder, sync) as q:
        fill(q, n)
    with start(folder, sync, workers, log_level):
        wait_for(lambda: unfinished(folder) == 0, 60 + n / 100, "the burn-down", interval=0.1)
    out = burn_window(folder)
    out["workers"] = workers
    return out


def enqueue(folder: str, sync: str, single: int, batched: int) -> dict[str, Any]:
    """``JobQueue.enqueue`` calls one by one, and ``enqueue_many`` in batches of 1,000."""
    with queue(folder, sync) as q:
        t0 = time.perf_counter()
        for _ in range(single):
            q.enqueue("bench:noop", None)
        t1 = time.perf_counter()
        fill(q, batched)
        t2 = time.perf_counter()
    return {"single": rate(single, t1 - t0), "batched": rate(batched, t2 - t1)}


class Session:
    """A running supervisor with a producer (see :mod:`bench.latency`)."""

    def __init__(self, folder: str, sync: str, workers: int) -> None:
        self.folder = folder
        self.q = queue(folder, sync)
        try:
            self.tree = start(folder, sync, workers)
        except BaseException:
            self.q.close()
            raise

    def submit(self, due: float | None) -> str:
        return self.q.enqueue("bench:stamp", None, run_at=due)

    def drained(self) -> bool:
        return unfinished(self.folder) == 0

    def collect(self) -> dict[str, tuple[float, float | None]]:
        rows = query(self.folder, "SELECT id, result, completed_at FROM jobs WHERE status = 'completed'")
        return {i: (json.loads(r)["t"], parse_iso(done)) for i, r, done in rows}

    def close(self) -> None:
        self.tree.close()
        self.q.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
