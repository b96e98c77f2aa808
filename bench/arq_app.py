"""arq beside jobq (bench.asyncbench): one async task that awaits ``asyncio.sleep(ms)`` and
counts itself done in Redis (``INCR bench:done``).

``python -m bench.arq_app --redis redis://127.0.0.1:6379/0 --queue Q --concurrency C`` runs one
arq worker (``max_jobs=C``) on queue ``Q`` until SIGTERM. Needs ``pip install arq`` and a Redis.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

DONE_KEY = "bench:done:{queue}"


async def aio_sleep(ctx, ms: float, queue: str) -> None:
    await asyncio.sleep(ms / 1000.0)
    await ctx["redis"].incr(DONE_KEY.format(queue=queue))


def main(argv: list[str] | None = None) -> int:
    from arq.connections import RedisSettings
    from arq.worker import run_worker

    p = argparse.ArgumentParser(prog="python -m bench.arq_app")
    p.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    p.add_argument("--queue", required=True)
    p.add_argument("--concurrency", type=int, default=10)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    class Settings:
        functions = [aio_sleep]
        redis_settings = RedisSettings.from_dsn(args.redis)
        queue_name = args.queue
        max_jobs = args.concurrency
        keep_result = 0
        handle_signals = True
        poll_delay = 0.05

    run_worker(Settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
