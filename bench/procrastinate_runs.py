"""Procrastinate 3.10 (its worker, LISTEN/NOTIFY on) under jobq's workloads, in a schema of its
own. Concurrency matched two ways: one worker process with ``concurrency=W`` ("1xW") and W
processes of concurrency 1 ("Wx1")."""

from __future__ import annotations

import datetime as dt
import itertools
import os
import subprocess
import time
from typing import Any

from . import pg
from .huey_app import read_records
from .procrastinate_app import apply_schema, make_app
from .procs import REPO, Tree, child_env, python, wait_for
from .stats import rate

BATCH = 1000
LAYOUTS = ("1xW", "Wx1")


def _argv(url: str, schema: str, workers: int, layout: str, *extra: str) -> list[str]:
    """The worker command line: one process of concurrency W, or W processes of 1 (fanned out)."""
    procs, conc = (1, workers) if layout == "1xW" else (workers, 1)
    worker = [
        python(),
        "-m",
        "bench.procrastinate_app",
        "--url",
        url,
        "--schema",
        schema,
        "--concurrency",
        str(conc),
        *extra,
    ]
    return worker if procs == 1 else [python(), "-m", "bench.fanout", str(procs), "--", *worker]


def _fill(task: Any, n: int) -> None:
    for i in range(0, n, BATCH):
        task.batch_defer(*({"k": k} for k in range(i, min(i + BATCH, n))))


def burn(folder: str, url: str, workers: int, n: int, layout: str) -> dict[str, Any]:
    """``n`` pre-deferred no-op jobs; the worker(s) with ``wait=False`` run until the queue is
    empty. jobs/s from the first 'started' event to the last 'succeeded' (server clock)."""
    with pg.fresh_schema(url, "procrastinate") as schema:
        apply_schema(url, schema)
        app, task = make_app(url, schema, sync=True)
        with app.open():
            _fill(task, n)
        log = open(os.path.join(folder, "procrastinate.log"), "wb")
        proc = subprocess.Popen(
            _argv(url, schema, workers, layout, "--until-empty"),
            cwd=REPO,
            env=child_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            proc.wait(60 + n / 50)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
            log.close()
        with pg.connect(url, schema) as conn:
            left = conn.execute(
                "SELECT count(*) FROM procrastinate_jobs WHERE status <> 'succeeded'"
            ).fetchone()[0]
            done, secs = conn.execute(
                "SELECT count(*) FILTER (WHERE type = 'succeeded'), extract(epoch FROM "
                "max(at) FILTER (WHERE type = 'succeeded') - min(at) FILTER (WHERE type = 'started')) "
                "FROM procrastinate_events"
            ).fetchone()
    if proc.returncode != 0 or left:
        raise RuntimeError(f"procrastinate worker exited with {proc.returncode}; {left} jobs left")
    return {**rate(done, float(secs)), "workers": workers, "layout": layout}


def enqueue(url: str, single: int, batched: int) -> dict[str, Any]:
    """``task.defer()`` one by one, and ``task.batch_defer()`` of 1,000 (synchronous connector)."""
    with pg.fresh_schema(url, "procrastinate") as schema:
        apply_schema(url, schema)
        app, task = make_app(url, schema, sync=True)
        with app.open():
            t0 = time.perf_counter()
            for k in range(single):
                task.defer(k=k)
            t1 = time.perf_counter()
            _fill(task, batched)
            t2 = time.perf_counter()
    return {"single": rate(single, t1 - t0), "batched": rate(batched, t2 - t1)}


class Session:
    """Running worker(s) with a producer (see :mod:`bench.latency`)."""

    def __init__(self, folder: str, url: str, workers: int, layout: str) -> None:
        self.out = os.path.join(folder, "records")
        os.makedirs(self.out, exist_ok=True)
        self._schema_cm = pg.fresh_schema(url, "procrastinate")
        self.schema = self._schema_cm.__enter__()
        self.app = self.proc_tree = None
        try:
            apply_schema(url, self.schema)
            self.app, self.task = make_app(url, self.schema, sync=True)
            self.app.open()
            self.keys = itertools.count()
            self.appname = pg.new_appname("procrastinate")
            self.proc_tree = Tree(
                _argv(url, self.schema, workers, layout, "--out", self.out),
                os.path.join(folder, "procrastinate.log"),
                env=pg.child_env(self.appname),
            )
            self.tree = pg.WithBackends(self.proc_tree, url, self.appname)
            procs = 1 if layout == "1xW" else workers
            self.conn = pg.connect(url, self.schema)
            wait_for(lambda: self._up() >= procs, 60, f"{procs} procrastinate workers")
        except BaseException:
            self.close()
            raise

    def _up(self) -> int:
        if not self.proc_tree.alive():
            raise RuntimeError(f"procrastinate worker exited: {self.proc_tree.output()}")
        return self.conn.execute("SELECT count(*) FROM procrastinate_workers").fetchone()[0]

    def submit(self, due: float | None) -> int:
        k = next(self.keys)
        if due is None:
            self.task.defer(k=k)
        else:
            at = dt.datetime.fromtimestamp(due, dt.timezone.utc)
            self.task.configure(schedule_at=at).defer(k=k)
        return k

    def drained(self) -> bool:
        return (
            self.conn.execute(
                "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"
            ).fetchone()[0]
            == 0
        )

    def collect(self) -> dict[int, tuple[float, float]]:
        return read_records(self.out)

    def close(self) -> None:
        if self.proc_tree is not None:
            self.proc_tree.close()
        if getattr(self, "conn", None) is not None:
            self.conn.close()
        if self.app is not None:
            self.app.close()
        self._schema_cm.__exit__(None, None, None)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
