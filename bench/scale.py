"""How big each workload is: the full run, ``--quick`` (a minute or two) and ``--smoke``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scale:
    burn_jobs: int
    workers: tuple[int, ...]
    burn_repeats: int  # runs of the largest worker count (the median is kept)
    raw_modes_workers: tuple[int, ...]  # worker counts for the raw fold / 10-per-tx variants
    rate: float  # steady producer, jobs/s
    steady_seconds: float
    settle: float  # quiet time before the idle CPU window
    cpu_window: float
    idle_jobs: int
    delayed_jobs: int
    enqueue_single: int
    enqueue_batched: int
    depths: tuple[int, ...]
    depth_claims: int


FULL = Scale(
    burn_jobs=20_000,
    workers=(1, 2, 4, 8),
    burn_repeats=3,
    raw_modes_workers=(8,),
    rate=500,
    steady_seconds=10,
    settle=3,
    cpu_window=10,
    idle_jobs=100,
    delayed_jobs=100,
    enqueue_single=5_000,
    enqueue_batched=100_000,
    depths=(1_000, 100_000, 1_000_000),
    depth_claims=6_000,
)

QUICK = Scale(
    burn_jobs=1_000,
    workers=(8,),
    burn_repeats=1,
    raw_modes_workers=(),
    rate=300,
    steady_seconds=1,
    settle=0.3,
    cpu_window=1,
    idle_jobs=3,
    delayed_jobs=2,
    enqueue_single=500,
    enqueue_batched=5_000,
    depths=(1_000, 20_000),
    depth_claims=500,
)

SMOKE = Scale(
    burn_jobs=300,
    workers=(2,),
    burn_repeats=1,
    raw_modes_workers=(),
    rate=50,
    steady_seconds=1,
    settle=0.2,
    cpu_window=0.5,
    idle_jobs=2,
    delayed_jobs=1,
    enqueue_single=200,
    enqueue_batched=2_000,
    depths=(1_000,),
    depth_claims=100,
)
