"""Huey 3.5.4's PostgreSQL storage (PostgresHuey, process consumer) under jobq's workloads, its
tables in a schema of its own. Timing records as in :mod:`bench.huey_runs`."""

from __future__ import annotations

import itertools
import time
from typing import Any

from . import pg
from .huey_app import make_huey, read_records
from .huey_runs import paths, start
from .procs import wait_for
from .stats import rate

BATCH = 1000


def fill_by_hand(huey: Any, task: Any, url: str, schema: str, keys: range) -> None:
    """Enqueue ``task(k)`` for each key as Huey would (its serialized message in its task
    table), ``executemany`` in transactions of 1,000 rows: Huey has no batch enqueue."""
    with pg.connect(url, schema) as conn:
        for i in range(0, len(keys), BATCH):
            rows = [(huey.name, huey.serialize_task(task.s(k)), 0) for k in keys[i : i + BATCH]]
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO {huey.storage.table_task} (queue, data, priority) "
                    "VALUES (%s, %s, %s)",
                    rows,
                )
            conn.execute(f"SELECT pg_notify('{huey.storage.channel}', '')")


def burn(folder: str, url: str, workers: int, n: int, quiet: bool = True) -> dict[str, Any]:
    """Burn-down: ``n`` no-op tasks pre-enqueued; tasks/s from the first start to the last end."""
    _, out = paths(folder)
    with pg.fresh_schema(url, "huey") as schema:
        huey, task = make_huey(url, "default", pg_schema=schema)
        try:
            fill_by_hand(huey, task, url, schema, range(n))
            with start(folder, "default", workers, quiet=quiet, pg=(url, schema)) as tree:
                wait_for(
                    lambda: huey.pending_count() == 0,
                    60 + n / 50,
                    "the Huey PG burn-down",
                    interval=0.1,
                )
                time.sleep(0.2)
                tree.close()
        finally:
            huey.storage.close()
    records = read_records(out)
    if len(records) != n:
        raise RuntimeError(f"Huey PG ran {len(records)} of {n} tasks")
    first = min(t0 for t0, _ in records.values())
    last = max(t1 for _, t1 in records.values())
    return {**rate(n, last - first), "workers": workers}


def enqueue(url: str, single: int, batched: int) -> dict[str, Any]:
    """Task calls one by one (each is Huey's INSERT then ``SELECT pg_notify`` in one
    transaction), and the by-hand batches of :func:`fill_by_hand`."""
    with pg.fresh_schema(url, "huey") as schema:
        huey, task = make_huey(url, "default", pg_schema=schema)
        try:
            t0 = time.perf_counter()
            for k in range(single):
                task(k)
            t1 = time.perf_counter()
            fill_by_hand(huey, task, url, schema, range(single, single + batched))
            t2 = time.perf_counter()
        finally:
            huey.storage.close()
    return {"single": rate(single, t1 - t0), "batched": {**rate(batched, t2 - t1), "by_hand": True}}


class Session:
    """A running PostgresHuey consumer with a producer (see :mod:`bench.latency`)."""

    def __init__(self, folder: str, url: str, workers: int, quiet: bool = True) -> None:
        _, self.out = paths(folder)
        self.url = url
        self._schema_cm = pg.fresh_schema(url, "huey")
        schema = self._schema_cm.__enter__()
        self.huey = self.proc_tree = None
        try:
            self.huey, self.task = make_huey(url, "default", pg_schema=schema)
            self.keys = itertools.count()
            self.appname = pg.new_appname("huey")
            self.proc_tree = start(
                folder,
                "default",
                workers,
                each=True,
                quiet=quiet,
                pg=(url, schema),
                env=pg.child_env(self.appname),
            )
            self.tree = pg.WithBackends(self.proc_tree, url, self.appname)
        except BaseException:
            self.close()
            raise

    def submit(self, due: float | None) -> int:
        k = next(self.keys)
        if due is None:
            self.task(k)
        else:
            self.task.schedule(args=(k,), delay=max(due - time.time(), 0.0))
        return k

    def drained(self) -> bool:
        return self.huey.pending_count() == 0 and self.huey.scheduled_count() == 0

    def collect(self) -> dict[int, tuple[float, float]]:
        return read_records(self.out)

    def close(self) -> None:
        if self.proc_tree is not None:
            self.proc_tree.close()
        if self.huey is not None:
            self.huey.storage.close()
        self._schema_cm.__exit__(None, None, None)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
