"""Huey (SqliteHuey, process consumer) under the same workloads as jobq."""

from __future__ import annotations

import itertools
import os
import signal
import time
from typing import Any

from .huey_app import make_huey, read_records
from .procs import Tree, python, wait_for
from .stats import rate


def available() -> bool:
    try:
        import huey  # noqa: F401
    except ImportError:
        return False
    return True


def paths(folder: str) -> tuple[str, str]:
    db, out = os.path.join(folder, "huey.db"), os.path.join(folder, "records")
    os.makedirs(out, exist_ok=True)
    return db, out


def start(
    folder: str,
    fsync: str,
    workers: int,
    *,
    each: bool = False,
    quiet: bool = False,
    pg: tuple[str, str] | None = None,
    env: dict[str, str] | None = None,
) -> Tree:
    """The consumer with ``-k process -w workers``; returns once its workers and scheduler run.
    ``each``: tasks write their timing records at once (readable while it runs); ``quiet``:
    Huey's ``-q`` (WARNING logging instead of INFO); ``pg``: (URL, schema) of a PostgresHuey
    instead of the SqliteHuey in ``folder``; ``env``: extra environment of the consumer."""
    db, out = paths(folder)
    where = ["--db", pg[0], "--pg-schema", pg[1]] if pg else ["--db", db, "--fsync", fsync]
    argv = [
        python(),
        "-m",
        "bench.huey_consumer",
        *where,
        "--out",
        out,
        "-w",
        str(workers),
        *(["--each"] if each else []),
        *(["-q"] if quiet else []),
    ]
    tree = Tree(
        argv,
        os.path.join(folder, "consumer.log"),
        stop_signal=signal.SIGINT,
        stop_timeout=30,
        env=env,
    )
    try:
        wait_for(lambda: _up(tree) >= workers + 2, 60, f"{workers} Huey workers")
    except BaseException:
        tree.close()
        raise
    return tree


def _up(tree: Tree) -> int:
    if not tree.alive():
        raise RuntimeError(f"huey consumer exited with {tree.proc.returncode}: {tree.output()}")
    return len(tree.members())


def burn(folder: str, fsync: str, workers: int, n: int, quiet: bool = False) -> dict[str, Any]:
    """Burn-down: ``n`` no-op tasks pre-enqueued; tasks/s from the first start to the last end."""
    db, out = paths(folder)
    filler, task = make_huey(
        db, "off"
    )  # only the fill runs without fsync; the consumer uses ``fsync``
    for k in range(n):
        task(k)
    filler.storage.close()
    huey, _ = make_huey(db, fsync)
    with start(folder, fsync, workers, quiet=quiet) as tree:
        wait_for(
            lambda: huey.pending_count() == 0, 60 + n / 100, "the Huey burn-down", interval=0.1
        )
        time.sleep(0.2)
        tree.close()
    huey.storage.close()
    records = read_records(out)
    if len(records) != n:
        raise RuntimeError(f"Huey ran {len(records)} of {n} tasks")
    first = min(t0 for t0, _ in records.values())
    last = max(t1 for _, t1 in records.values())
    return {**rate(n, last - first), "workers": workers}


def enqueue(folder: str, fsync: str, single: int) -> dict[str, Any]:
    """Task calls one by one (Huey has no batch enqueue)."""
    db, _ = paths(folder)
    huey, task = make_huey(db, fsync)
    try:
        t0 = time.perf_counter()
        for k in range(single):
            task(k)
        return {"single": rate(single, time.perf_counter() - t0)}
    finally:
        huey.storage.close()


class Session:
    """A running consumer with a producer (see :mod:`bench.latency`)."""

    def __init__(self, folder: str, fsync: str, workers: int, quiet: bool = False) -> None:
        db, self.out = paths(folder)
        self.huey, self.task = make_huey(db, fsync)
        self.keys = itertools.count()
        try:
            self.tree = start(folder, fsync, workers, each=True, quiet=quiet)
        except BaseException:
            self.huey.storage.close()
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
        self.tree.close()
        self.huey.storage.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
