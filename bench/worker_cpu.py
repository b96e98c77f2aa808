"""``python -m bench.worker_cpu``: one SQLite worker's CPU per no-op job, alone on a filled file.

Fills a fresh SQLite file with ``--jobs`` ``bench:noop`` jobs (no payload, as bench.startup) (the producer's batched enqueue,
``synchronous=off``), then runs one :class:`worker.loop.Worker` in this process at the shipped
defaults (the handlers of ``bench.handlers``, ``warning`` JSON logs) until the queue is empty,
and prints the process's CPU (all its threads: the heartbeat's too) per job. ``--rounds``
repeats fill and burn-down and prints each round and the median. ``--profile FILE`` runs
cProfile around the loop (the main thread only) and writes its stats to FILE (read them with
``python -m pstats FILE``); ``--callgrind`` waits on a marker so that ``valgrind
--tool=callgrind --collect-atstart=no --toggle-collect=...`` can count only the burn-down.
Times here move with the machine's load: compare trees in one sitting, alternating.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import statistics
import sys
import tempfile
import subprocess
import time
from typing import Any

from shared.execution.handlers import load_registry
from shared.producer.api import JobQueue
from shared.runtime import logs
from shared.settings import config as config_mod
from shared.settings.config import Config, SqliteConfig
from worker.loop import Worker


# the children's bytecode (their first round writes it): compiling the modules a worker
# imports as it opens its store would be counted as its CPU
MAX_BATCH = int(os.environ.get("JOBQ_BENCH_MAX_BATCH", "0"))  # 0: the default
FIXED_BATCH = int(os.environ.get("JOBQ_BENCH_FIXED_BATCH", "0"))  # 0: sized as shipped
PYCACHE = os.path.join(tempfile.gettempdir(), "jobq-worker-cpu-pycache")


class Drain(Worker):
    """A worker that stops at its first idle wait (the queue is empty), counting its commits."""

    commits = 0

    def idle_wait(self) -> None:
        self.stopping = True

    def write_outcomes(self, limit: int) -> tuple[list[bool], list[Any]]:
        self.commits += 1
        return super().write_outcomes(limit)


def fill(path: str, jobs: int) -> None:
    cfg = Config(database=path, sqlite=SqliteConfig(synchronous="off"))
    with JobQueue(path, config=cfg) as q:
        for k in range(0, jobs, 1000):
            q.enqueue_many([("bench:noop", None)] * min(1000, jobs - k))


def config(folder: str, path: str) -> Config:
    toml = os.path.join(folder, f"jobq.{os.getpid()}.toml")  # (--workers: one each)
    with open(toml, "w") as f:
        f.write(
            f'database = {json.dumps(path)}\nhandlers = ["bench.handlers"]\n'
            'log_level = "warning"\nlog_format = "json"\n'
            + (f"[worker]\nmax_batch = {MAX_BATCH}\n" if MAX_BATCH else "")
        )
    return config_mod.load(toml)


def burn(path: str, folder: str, profile: cProfile.Profile | None) -> tuple[int, float, float]:
    """Run one worker until the queue is empty: (jobs done, CPU s, wall s); with its commits
    on the standard error."""
    cfg = config(folder, path)
    logs.setup(cfg.log_level, cfg.log_format)
    registry = load_registry(cfg.handlers, cfg.path)
    # a progress file, as the supervisor gives its workers (one write per batch, a count per job)
    worker = Drain(cfg, registry, progress=os.path.join(folder, f"progress.{os.getpid()}"))
    if FIXED_BATCH:  # every claim this size: counts that do not depend on timing (callgrind)
        worker.held.size = FIXED_BATCH
        worker.held.sized = lambda max_batch, own, wall: FIXED_BATCH  # type: ignore[method-assign]
    cpu0, wall0 = time.process_time(), time.perf_counter()
    if profile is not None:
        profile.enable()
    worker.run()
    if profile is not None:
        profile.disable()
    print(f"commits {worker.commits}, batches of {worker.held.size}", file=sys.stderr)
    return worker.jobs_done, time.process_time() - cpu0, time.perf_counter() - wall0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.worker_cpu")
    p.add_argument("--jobs", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--profile", default=None, help="write cProfile stats here")
    p.add_argument("--workers", type=int, default=1, help="worker processes on one file")
    p.add_argument("--one", default=None, help="burn down this filled file (one worker)")
    p.add_argument("--fill", default=None, help="only fill this new file, for --one")
    p.add_argument("--callgrind", action="store_true", help="toggle collection around burns")
    args = p.parse_args(argv)
    if args.fill:
        fill(args.fill, args.jobs)
        return 0
    if args.one:
        prof = cProfile.Profile(time.process_time) if args.profile else None
        done, cpu, wall = burn(args.one, os.path.dirname(args.one), prof)
        if prof is not None:
            prof.dump_stats(f"{args.profile}.{os.getpid()}")
        print(json.dumps([done, cpu, wall]))
        return 0
    per_job = []
    profile = cProfile.Profile(time.process_time) if args.profile and args.workers == 1 else None
    for r in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="jobq-wcpu-") as folder:
            path = os.path.join(folder, "jobq.db")
            fill(path, args.jobs)
            if args.workers > 1:
                done, cpu, wall = many(path, args.workers, args.profile)
            else:
                done, cpu, wall = (
                    burn_collected(path, folder) if args.callgrind else burn(path, folder, profile)
                )
        us = cpu / max(done, 1) * 1e6
        per_job.append(us)
        print(f"round {r + 1}: {done} jobs, CPU {cpu:.3f} s, wall {wall:.3f} s, {us:.1f} us/job")
    print(
        f"median CPU per job: {statistics.median(per_job):.1f} us (load {os.getloadavg()[0]:.1f})"
    )
    if profile is not None:
        profile.dump_stats(args.profile)  # (--workers: one file per worker, FILE.pid)
    sys.stdout.flush()
    return 0


def many(path: str, workers: int, profile: str | None) -> tuple[int, float, float]:
    """``workers`` processes burning the queue down together (each stops at its first idle
    wait): their jobs, CPU and the longest wall time, each one's line on the standard error."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.worker_cpu", "--one", path]
            + (["--profile", profile] if profile else []),
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": PYCACHE},
        )
        for _ in range(workers)
    ]
    got = [json.loads(pr.communicate()[0]) for pr in procs]
    for g in got:
        print(
            f"  worker: {g[0]} jobs, CPU {g[1]:.3f} s, {g[1] / max(g[0], 1) * 1e6:.1f} us/job",
            file=sys.stderr,
        )
    return sum(g[0] for g in got), sum(g[1] for g in got), max(g[2] for g in got)


def burn_collected(path: str, folder: str) -> tuple[int, float, float]:
    """:func:`burn` inside ``collected_burn`` (the name callgrind's --toggle-collect takes)."""
    return collected_burn(path, folder)


def collected_burn(path: str, folder: str) -> tuple[int, float, float]:
    return burn(path, folder, None)


if __name__ == "__main__":
    raise SystemExit(main())
