"""jobq under test: the real supervisor (``python -m supervisor run``) on a temporary database,
fed through ``JobQueue``; times read back from the ``jobs`` table.

Every function takes ``where``: a folder (a SQLite file ``jobq.db`` in it, with the ``sync``
given) or a :class:`bench.db.Db` (a SQLite file or a PostgreSQL schema; ``sync`` is then unused).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import tomli_w

from shared.producer.api import JobQueue
from shared.runtime.clock import parse_iso

from .db import Db, Missing
from .procs import Tree, python, wait_for
from .stats import rate

BATCH = 1000


def as_db(where: "str | Db", sync: str = "normal") -> Db:
    return where if isinstance(where, Db) else Db.sqlite(where, sync)


def write_config(where: "str | Db", sync: str, workers: int, log_level: str = "warning") -> str:
    """The supervisor's config: defaults, except the bench handlers, the database (SQLite's
    ``synchronous``, or PostgreSQL's schema) and (unless asked otherwise) quiet logs."""
    db = as_db(where, sync)
    path = os.path.join(db.folder, "jobq.toml")
    data = {
        **db.toml(),
        "handlers": ["bench.handlers"],
        "log_level": log_level,
        "supervisor": {"workers": workers},
    }
    with open(path, "wb") as f:
        tomli_w.dump(data, f)
    return path


def queue(where: "str | Db", sync: str = "normal") -> JobQueue:
    return JobQueue(config=as_db(where, sync).config())


def query(where: "str | Db", sql: str) -> list[tuple]:
    """Run one read (see :meth:`bench.db.Db.query`)."""
    return as_db(where).query(sql)


def unfinished(where: "str | Db") -> int:
    return query(where, "SELECT count(*) FROM jobs WHERE status IN ('pending', 'running')")[0][0]


def burn_window(folder: str) -> dict[str, Any]:
    """jobs/s from the first claim (min started_at) to the last completion (max completed_at)."""
    n, first, last = query(
        folder,
        "SELECT count(*), min(started_at), max(completed_at) FROM jobs WHERE status = 'completed'",
    )[0]
    if not n:
        raise RuntimeError("no job completed")
    return rate(n, parse_iso(last) - parse_iso(first))


def start(
    where: "str | Db",
    sync: str,
    workers: int,
    log_level: str = "warning",
    env: dict[str, str] | None = None,
) -> Tree:
    """``python -m supervisor run --config <tmp toml> --workers W``; returns once W workers
    have registered. ``env``: extra environment of the supervisor."""
    db = as_db(where, sync)
    cfg = write_config(db, sync, workers, log_level)
    tree = Tree(
        [python(), "-m", "supervisor", "run", "--config", cfg, "--workers", str(workers)],
        os.path.join(db.folder, "supervisor.log"),
        stop_timeout=30,
        env=env,
    )
    try:
        wait_for(lambda: _workers_up(db, tree) >= workers, 60, f"{workers} jobq workers")
    except BaseException:
        tree.close()
        raise
    return tree


def _workers_up(db: Db, tree: Tree) -> int:
    if not tree.alive():
        raise RuntimeError(f"supervisor exited with {tree.proc.returncode}: {tree.output()}")
    try:
        return db.query("SELECT count(*) FROM processes WHERE kind = 'worker'")[0][0]
    except Missing:
        return 0  # not created yet


def fill(q: JobQueue, n: int, job_type: str = "bench:noop") -> None:
    for i in range(0, n, BATCH):
        q.enqueue_many([(job_type, None)] * min(BATCH, n - i))


def burn(
    where: "str | Db", sync: str, workers: int, n: int, log_level: str = "warning"
) -> dict[str, Any]:
    """Burn-down: ``n`` no-op jobs pre-enqueued, then the supervisor with ``workers`` workers."""
    db = as_db(where, sync)
    with queue(db) as q:
        fill(q, n)
    with start(db, sync, workers, log_level):
        wait_for(lambda: unfinished(db) == 0, 60 + n / 100, "the burn-down", interval=0.1)
    out = burn_window(db)
    out["workers"] = workers
    return out


def enqueue(where: "str | Db", sync: str, single: int, batched: int) -> dict[str, Any]:
    """``JobQueue.enqueue`` calls one by one, and ``enqueue_many`` in batches of 1,000."""
    with queue(where, sync) as q:
        t0 = time.perf_counter()
        for _ in range(single):
            q.enqueue("bench:noop", None)
        t1 = time.perf_counter()
        fill(q, batched)
        t2 = time.perf_counter()
    return {"single": rate(single, t1 - t0), "batched": rate(batched, t2 - t1)}


class Session:
    """A running supervisor with a producer (see :mod:`bench.latency`)."""

    def __init__(
        self, where: "str | Db", sync: str, workers: int, env: dict[str, str] | None = None
    ) -> None:
        self.folder = as_db(where, sync)
        self.q = queue(self.folder)
        try:
            self.tree = start(self.folder, sync, workers, env=env)
        except BaseException:
            self.q.close()
            raise

    def submit(self, due: float | None) -> str:
        return self.q.enqueue("bench:stamp", None, run_at=due)

    def drained(self) -> bool:
        return unfinished(self.folder) == 0

    def collect(self) -> dict[str, tuple[float, float | None]]:
        rows = query(
            self.folder, "SELECT id, result, completed_at FROM jobs WHERE status = 'completed'"
        )
        return {i: (json.loads(r)["t"], parse_iso(done)) for i, r, done in rows}

    def close(self) -> None:
        self.tree.close()
        self.q.close()
        self.folder.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
