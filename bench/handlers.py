"""The handlers the benchmark's jobq workers run (``handlers = ["bench.handlers"]``)."""

from __future__ import annotations

import os
import time

from worker import handler

if os.environ.get(
    "JOBQ_BENCH_OTEL"
):  # tracing on: "sdk" (a no-op exporter), "sampled" or "api" (bench.otel)
    from bench.otel import setup

    setup(os.environ["JOBQ_BENCH_OTEL"])


@handler("bench:noop")
def noop(payload, job):
    """Does nothing: burn-down measures the queue's own cost per job."""
    return None


@handler("bench:stamp")
def stamp(payload, job):
    """Records when the handler started (sub-millisecond), for the latency workloads."""
    return {"t": time.time()}


@handler("bench:sleep")
def sleep(payload, job):
    """Sleeps ``payload['ms']`` milliseconds: the job mix of the fault-throughput workload."""
    time.sleep(payload["ms"] / 1000.0)
    return None


@handler("bench:aio_sleep")
async def aio_sleep(payload, job):
    """Awaits ``asyncio.sleep(payload['ms'] / 1000)``: an I/O-bound call (bench.asyncbench; its
    ``async_concurrency`` comes from the config)."""
    import asyncio

    await asyncio.sleep(payload["ms"] / 1000.0)
    return None


@handler("bench:until_cancelled")
def until_cancelled(payload, job):
    """Loops (up to ``payload['s']`` seconds) until a cancel request reaches it, then returns the
    time it saw the request (bench.idle_hosts: a cancel's latency)."""
    end = time.monotonic() + payload.get("s", 60)
    while time.monotonic() < end:
        if job.cancel_requested:
            return {"seen": time.time()}
        time.sleep(0.005)
    return {"seen": None}
