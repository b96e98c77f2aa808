"""The Huey side of the comparison: a SqliteHuey with one no-op task that records, in memory,
when it started and ended; each worker process writes its records to ``out_dir`` when it shuts
down (a Huey ``on_shutdown`` hook), so measuring adds no write to the task. With ``each``
(latency runs, read while the consumer runs) every record is appended to the file at once.

``fsync``: "default" leaves SQLite's default (FULL in this build); "off" is Huey's
``fsync=False`` (``synchronous=OFF``).
"""

from __future__ import annotations

import os
import time
from typing import Any

FSYNC = {"default": None, "off": False}


def make_huey(
    db: str,
    fsync: str,
    out_dir: str | None = None,
    each: bool = False,
    pg_schema: str | None = None,
) -> tuple[Any, Any]:
    """A SqliteHuey on ``db`` and its ``bench_noop(k)`` task; with ``pg_schema``, ``db`` is a
    PostgreSQL URL and the Huey is a PostgresHuey whose tables live in that schema (``fsync``
    is then ignored: the server's own durability applies)."""
    if pg_schema is not None:
        from huey import PostgresHuey  # huey >= 3.5 (psycopg 3)

        huey = PostgresHuey("bench", dsn=db, options=f"-c search_path={pg_schema}")
    else:
        from huey import SqliteHuey  # a bench dependency only (the "bench" extra)

        huey = SqliteHuey("bench", filename=db, fsync=FSYNC[fsync])
    return _with_task(huey, out_dir, each)


def _with_task(huey: Any, out_dir: str | None, each: bool) -> tuple[Any, Any]:
    seen: list[tuple[int, float, float]] = []

    def dump() -> None:
        if out_dir and seen:
            with open(os.path.join(out_dir, f"{os.getpid()}.txt"), "a", encoding="ascii") as f:
                f.writelines(f"{k} {t0!r} {t1!r}\n" for k, t0, t1 in seen)
            seen.clear()

    def bench_noop(k: int) -> None:
        t0 = time.time()
        seen.append((k, t0, time.time()))
        if each:
            dump()

    task = huey.task(name="bench_noop")(bench_noop)
    huey.on_shutdown(name="bench_dump")(dump)
    return huey, task


def read_records(out_dir: str) -> dict[int, tuple[float, float]]:
    """Task key -> (start, end), from every worker's dump file."""
    out: dict[int, tuple[float, float]] = {}
    for name in os.listdir(out_dir):
        if name.endswith(".txt"):
            with open(os.path.join(out_dir, name), encoding="ascii") as f:
                for line in f:
                    k, t0, t1 = line.split()
                    out[int(k)] = (float(t0), float(t1))
    return out
