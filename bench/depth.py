"""Claim throughput against queue depth: 1,000 to 1,000,000 pending jobs, all due or 90% of
them scheduled a day ahead. One process claims and completes jobs one at a time, through
jobq's ``SqliteStore`` (the SQL its workers run) and through the raw loop, on the same file."""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any, Callable

from shared.runtime.clock import iso
from shared.model.job import new_id
from shared.engines.sqlite.store import Finish, SqliteStore

from . import raw
from .stats import rate

CHUNK = 50_000
WARMUP = 50
ROUNDS = 9

Loop = Callable[[int], tuple[int, float]]  # run k claim+complete cycles -> (done, seconds claiming)


def build(path: str, n: int, future: float) -> int:
    """``n`` pending jobs; every job i with ``i % 10 < future*10`` is due a day from now.
    Returns how many are due. Written with executemany in big transactions."""
    conn = raw.connect(path, "off", create=True)
    now = time.time()
    stamp, due, later = iso(now), iso(now - 1), iso(now + 86400)
    cut = round(future * 10)
    try:
        for start in range(0, n, CHUNK):
            rows = [
                (new_id(), "bench:noop", "null", later if i % 10 < cut else due, stamp, stamp)
                for i in range(start, min(start + CHUNK, n))
            ]
            raw.in_tx(conn, lambda c: c.executemany(raw.INSERT, rows))
    finally:
        conn.close()
    return n - sum(1 for i in range(n) if i % 10 < cut)


def reset(path: str) -> None:
    """Put every claimed or completed job back to pending (between measurements)."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    try:
        conn.execute(
            "UPDATE jobs SET status = 'pending', attempts = 0, owner = NULL, owner_pid = NULL, "
            "started_at = NULL, completed_at = NULL, heartbeat_at = NULL, result = NULL "
            "WHERE status IN ('running', 'completed')"
        )
    finally:
        conn.close()


def jobq_loop(path: str, sync: str) -> Loop:
    store = SqliteStore(path, synchronous=sync)
    owner, pid = f"bench:{os.getpid()}", os.getpid()

    def run(k: int) -> tuple[int, float]:
        done, claiming = 0, 0.0
        for _ in range(k):
            t0 = time.perf_counter()
            jobs = store.claim(owner, pid, time.time(), 1)
            claiming += time.perf_counter() - t0
            if not jobs:
                break
            store.finish(
                Finish("completed", jobs[0].id, jobs[0].attempts, None), owner, time.time()
            )
            done += 1
        return done, claiming

    run.close = store.close  # type: ignore[attr-defined]
    return run


def raw_loop(path: str, sync: str) -> Loop:
    conn = raw.connect(path, sync)
    owner = f"raw:{os.getpid()}"

    def run(k: int) -> tuple[int, float]:
        done, claiming = 0, 0.0
        for _ in range(k):
            t0 = time.perf_counter()
            jobs = raw.claim(conn, owner)
            claiming += time.perf_counter() - t0
            if not jobs:
                break
            raw.complete(conn, owner, jobs)
            done += 1
        return done, claiming

    run.close = conn.close  # type: ignore[attr-defined]
    return run


def measure(
    files: dict[str, tuple[str, int]], sync: str, claims: int, systems: list[str]
) -> dict[str, dict[str, Any]]:
    """Claim+complete cycles per second, and the mean time of the claim alone, for each depth
    (``files``: name -> (path, due jobs)) and system.

    The same number of cycles per round everywhere (at least ROUNDS rounds, ``claims`` cycles in
    all per depth and system), the depths and systems taking turns round by round and each table
    reset after its round; the median round is reported. Depths are compared side by side, so a
    burst of load elsewhere on the machine moves all of them alike.
    """
    size = max(1, min(min(due for _, due in files.values()), claims // ROUNDS))
    loops = {
        (name, system): SYSTEMS[system](path, sync)
        for name, (path, _) in files.items()
        for system in systems
    }
    rounds: dict[tuple[str, str], list[tuple[float, float]]] = {k: [] for k in loops}
    try:
        for (name, _), run in loops.items():
            run(min(WARMUP, size))
            reset(files[name][0])
        for _ in range(max(ROUNDS, -(-claims // size))):
            for (name, system), run in loops.items():
                rounds[(name, system)].append(_round(run, files[name][0], size))
    finally:
        for run in loops.values():
            run.close()  # type: ignore[attr-defined]
    out: dict[str, dict[str, Any]] = {name: {} for name in files}
    for (name, system), rs in rounds.items():
        out[name][system] = _median(rs, size)
    return out


def _round(run: Loop, path: str, size: int) -> tuple[float, float]:
    """(seconds for ``size`` claim+complete cycles, seconds spent claiming)."""
    t0 = time.perf_counter()
    n, claiming = run(size)
    spent = time.perf_counter() - t0
    reset(path)
    if n != size:
        raise RuntimeError(f"claimed {n} of {size} due jobs")
    return spent, claiming


def _median(rounds: list[tuple[float, float]], size: int) -> dict[str, Any]:
    spent = sorted(r[0] for r in rounds)[len(rounds) // 2]
    claiming = sorted(r[1] for r in rounds)[len(rounds) // 2]
    return {
        **rate(size, spent),
        "rounds": len(rounds),
        "claim_ms": round(1000 * claiming / size, 4),
    }


SYSTEMS = {"jobq": jobq_loop, "raw": raw_loop}
