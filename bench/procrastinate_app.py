"""Procrastinate 3.10 beside jobq: an App on a schema of its own with one no-op task.

``python -m bench.procrastinate_app --url URL --schema S --concurrency C [--out DIR]`` runs one
worker (``App.run_worker``, LISTEN/NOTIFY on, its defaults otherwise) until SIGTERM/SIGINT, or
with ``--until-empty`` until the queue is empty (``wait=False``). With ``--out`` every task
appends ``k start end`` to ``DIR/<pid>.txt`` (the latency runs read it while the worker runs).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from typing import Any

from .huey_app import read_records  # the same record format as Huey's  # noqa: F401


def make_app(
    url: str, schema: str, out_dir: str | None = None, *, sync: bool = False
) -> tuple[Any, Any]:
    """An App whose connections have ``schema`` first on the search path, and its
    ``bench_noop(k)`` task. ``sync``: a synchronous connector (for a producer outside asyncio)."""
    import procrastinate

    options = {"options": f"-c search_path={schema},public"}
    if sync:
        connector = procrastinate.SyncPsycopgConnector(conninfo=url, kwargs=options)
    else:
        connector = procrastinate.PsycopgConnector(conninfo=url, kwargs=options)
    app = procrastinate.App(connector=connector)

    @app.task(name="bench_noop")
    def bench_noop(k: int) -> None:
        t0 = time.time()
        if out_dir:
            with open(os.path.join(out_dir, f"{os.getpid()}.txt"), "a", encoding="ascii") as f:
                f.write(f"{k} {t0!r} {time.time()!r}\n")

    @app.task(name="bench_aio_sleep")
    async def bench_aio_sleep(ms: float) -> None:
        import asyncio

        await asyncio.sleep(ms / 1000.0)

    app.bench_aio_sleep = bench_aio_sleep  # bench.asyncbench's task
    return app, bench_noop


def apply_schema(url: str, schema: str) -> None:
    """Procrastinate's own schema (tables, types, functions, triggers) inside ``schema``."""
    app, _ = make_app(url, schema, sync=True)
    with app.open():
        app.schema_manager.apply_schema()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.procrastinate_app")
    p.add_argument("--url", required=True)
    p.add_argument("--schema", required=True)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--out")
    p.add_argument("--until-empty", action="store_true")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    app, _ = make_app(args.url, args.schema, args.out)
    with app.open():
        app.run_worker(concurrency=args.concurrency, wait=not args.until_empty)
    return 0


if __name__ == "__main__":
    sys.exit(main())
