"""Running the raw PostgreSQL ceiling (:mod:`bench.raw_pg`) in a schema of its own."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any

from . import pg, raw_pg
from .procs import REPO, Tree, child_env, python, wait_for
from .stats import rate


def _window(conn) -> dict[str, Any]:
    n, secs = conn.execute(
        "SELECT count(*), extract(epoch FROM max(completed_at) - min(started_at)) "
        "FROM jobs WHERE status = 'completed'"
    ).fetchone()
    if not n:
        raise RuntimeError("no raw job completed")
    return rate(n, float(secs))


def burn(url: str, workers: int, n: int, batch: int) -> dict[str, Any]:
    """``workers`` processes of ``python -m bench.raw_pg work`` burn ``n`` pre-filled jobs,
    claiming ``batch`` per transaction. jobs/s from the first claim to the last completion."""
    with pg.fresh_schema(url, "raw") as schema, pg.connect(url, schema) as conn:
        raw_pg.create(conn)
        raw_pg.fill(conn, n)
        argv = [
            python(),
            "-m",
            "bench.raw_pg",
            "work",
            "--url",
            url,
            "--schema",
            schema,
            "--batch",
            str(batch),
        ]
        procs = [subprocess.Popen(argv, cwd=REPO, env=child_env()) for _ in range(workers)]
        try:
            deadline = time.monotonic() + 60 + n / 100
            for p in procs:
                p.wait(max(deadline - time.monotonic(), 0.1))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait(10)
        bad = [p.returncode for p in procs if p.returncode != 0]
        left = conn.execute("SELECT count(*) FROM jobs WHERE status <> 'completed'").fetchone()[0]
        if bad or left:
            raise RuntimeError(f"raw workers failed (exit codes {bad}); {left} jobs left")
        return {**_window(conn), "workers": workers, "batch": batch}


def enqueue(url: str, single: int, batched: int) -> dict[str, Any]:
    """One-job enqueues three ways (see :func:`bench.raw_pg.enqueue_single`), then batches."""
    out: dict[str, Any] = {}
    with pg.fresh_schema(url, "raw") as schema, pg.connect(url, schema) as conn:
        raw_pg.create(conn)
        for how in ("notify", "insert", "tx"):
            t0 = time.perf_counter()
            raw_pg.enqueue_single(conn, single, how)
            out[{"notify": "single", "insert": "single_insert", "tx": "single_tx"}[how]] = rate(
                single, time.perf_counter() - t0
            )
        t0 = time.perf_counter()
        raw_pg.enqueue_batched(conn, batched)
        out["batched"] = rate(batched, time.perf_counter() - t0)
    return out


class Session:
    """``workers`` raw listeners (LISTEN/NOTIFY) with a producer, for :mod:`bench.latency`."""

    def __init__(self, folder: str, url: str, workers: int) -> None:
        self.url = url
        self._schema_cm = pg.fresh_schema(url, "raw")
        self.schema = self._schema_cm.__enter__()
        try:
            self.conn = pg.connect(url, self.schema)
            raw_pg.create(self.conn)
            self.appname = pg.new_appname("raw")
            argv = [
                python(),
                "-m",
                "bench.fanout",
                str(workers),
                "--",
                python(),
                "-m",
                "bench.raw_pg",
                "listen",
                "--url",
                url,
                "--schema",
                self.schema,
            ]
            self.proc_tree = Tree(
                argv, os.path.join(folder, "raw.log"), env=pg.child_env(self.appname)
            )
            self.tree = pg.WithBackends(self.proc_tree, url, self.appname)
            wait_for(lambda: self._listening() >= workers, 60, f"{workers} raw listeners")
        except BaseException:
            self.close()
            raise

    def _listening(self) -> int:
        if not self.proc_tree.alive():
            raise RuntimeError(f"raw listeners exited: {self.proc_tree.output()}")
        return len(pg.backends(self.url, self.appname))

    def submit(self, due: float | None) -> int:
        if due is None:
            return self.conn.execute(raw_pg.INSERT_NOTIFY, ("bench:noop", "null")).fetchone()[0]
        return self.conn.execute(raw_pg.INSERT_DELAYED, ("bench:noop", "null", due)).fetchone()[0]

    def drained(self) -> bool:
        return (
            self.conn.execute("SELECT count(*) FROM jobs WHERE status <> 'completed'").fetchone()[0]
            == 0
        )

    def collect(self) -> dict[int, tuple[float, float | None]]:
        rows = self.conn.execute(
            "SELECT id, t_start, extract(epoch FROM completed_at)::float8 FROM jobs "
            "WHERE status = 'completed'"
        ).fetchall()
        return {i: (t, done) for i, t, done in rows}

    def close(self) -> None:
        if getattr(self, "proc_tree", None) is not None:
            self.proc_tree.close()
        if getattr(self, "conn", None) is not None:
            self.conn.close()
        self._schema_cm.__exit__(None, None, None)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
