"""Running the raw ceiling (:mod:`bench.raw`): W worker processes over a pre-filled table."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any

from . import raw
from .jobq_runs import burn_window, unfinished
from .procs import REPO, child_env, python
from .stats import rate


def db_path(folder: str) -> str:
    return os.path.join(folder, "jobq.db")  # the same file name jobq_runs reads


def fill(path: str, n: int) -> None:
    conn = raw.connect(path, "off", create=True)
    try:
        raw.enqueue_batched(conn, n, 10_000)
    finally:
        conn.close()


def burn(folder: str, sync: str, workers: int, n: int, mode: str = "one") -> dict[str, Any]:
    """``workers`` processes of ``python -m bench.raw`` burn ``n`` pre-enqueued jobs."""
    path = db_path(folder)
    fill(path, n)
    argv = [python(), "-m", "bench.raw", "--db", path, "--sync", sync, "--mode", mode]
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
    if bad or unfinished(folder):
        raise RuntimeError(f"raw workers failed (exit codes {bad}); {unfinished(folder)} jobs left")
    return {**burn_window(folder), "workers": workers, "mode": mode}


def enqueue(folder: str, sync: str, single: int, batched: int) -> dict[str, Any]:
    """Single-row autocommit inserts, and ``executemany`` in transactions of 1,000 rows."""
    conn = raw.connect(db_path(folder), sync, create=True)
    try:
        t0 = time.perf_counter()
        raw.enqueue_single(conn, single)
        t1 = time.perf_counter()
        raw.enqueue_batched(conn, batched)
        t2 = time.perf_counter()
    finally:
        conn.close()
    return {"single": rate(single, t1 - t0), "batched": rate(batched, t2 - t1)}
