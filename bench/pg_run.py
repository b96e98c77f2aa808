"""The workloads on PostgreSQL (``python -m bench --database postgresql://...``): jobq (the real
supervisor on a schema of its own) beside Huey's PostgresHuey, Procrastinate and the raw
``SKIP LOCKED`` loop, each in a fresh schema dropped afterwards, at the server's own durability.

Results: ``results[workload][system][variant]...`` with systems "jobq", "huey", "procrastinate"
and "raw"; variants "pg" (jobq, Huey, raw enqueue and idle), "1xW"/"Wx1" (Procrastinate: one
process of concurrency W, W processes of one) and "1"/"10"/"100" (raw burn-down: claims per
transaction).
"""

from __future__ import annotations

import contextlib
import random
import traceback
from typing import Any, Callable, Iterator

from . import huey_pg_runs, jobq_runs, latency, pg, pg_depth, procrastinate_runs, raw_pg_runs
from .db import Db
from .run import Ctx, attempt, folder, measure, median_run, put

SYSTEMS = ("jobq", "huey", "procrastinate", "raw")
RAW_BATCHES = ("1", "10", "100")
PEER_SINGLE = 1000  # one-by-one enqueues of the slow peers (Huey, Procrastinate: ~300-400/s)
PROCRASTINATE_BURN = (
    5000  # its burn-down at ~300/s: a rate from 5,000 jobs is as good as from 20,000
)


@contextlib.contextmanager
def jobq_db(ctx: Ctx, f: str) -> Iterator[Db]:
    """A Db on a fresh jobq schema (jobq creates it), dropped at the end."""
    with pg.fresh_schema(ctx.url, "jobq", create=False) as schema:
        db = Db.postgres(f, ctx.url, schema)
        try:
            yield db
        finally:
            db.close()


def run_enqueue(ctx: Ctx, results: dict) -> None:
    s, url = ctx.scale, ctx.url
    if "jobq" in ctx.systems:

        def jobq(f: str) -> Any:
            with jobq_db(ctx, f) as db:
                return jobq_runs.enqueue(db, "", s.enqueue_single, s.enqueue_batched)

        measure(ctx, results, ("enqueue", "jobq", "pg"), jobq)
    if "raw" in ctx.systems:
        measure(
            ctx,
            results,
            ("enqueue", "raw", "pg"),
            lambda f: raw_pg_runs.enqueue(url, s.enqueue_single, s.enqueue_batched),
        )
    single = min(s.enqueue_single, PEER_SINGLE)
    if "huey" in ctx.systems:
        measure(
            ctx,
            results,
            ("enqueue", "huey", "pg"),
            lambda f: huey_pg_runs.enqueue(url, single, min(s.enqueue_batched, 20_000)),
        )
    if "procrastinate" in ctx.systems:
        measure(
            ctx,
            results,
            ("enqueue", "procrastinate", "pg"),
            lambda f: procrastinate_runs.enqueue(url, single, min(s.enqueue_batched, 20_000)),
        )


def burn_plan(ctx: Ctx, w: int) -> list[tuple[tuple[str, ...], Callable[[str], Any]]]:
    n, url, plan = ctx.scale.burn_jobs, ctx.url, []
    if "jobq" in ctx.systems:

        def jobq(f: str) -> Any:
            with jobq_db(ctx, f) as db:
                return jobq_runs.burn(db, "", w, n)

        plan.append((("burn", "jobq", "pg", str(w)), jobq))
    if "huey" in ctx.systems:
        plan.append(
            (
                ("burn", "huey", "pg", str(w)),
                lambda f: huey_pg_runs.burn(f, url, w, n, ctx.huey_quiet),
            )
        )
    if "procrastinate" in ctx.systems:
        for layout in procrastinate_runs.LAYOUTS:
            plan.append(
                (
                    ("burn", "procrastinate", layout, str(w)),
                    lambda f, layout=layout: procrastinate_runs.burn(
                        f, url, w, min(n, PROCRASTINATE_BURN), layout
                    ),
                )
            )
    if "raw" in ctx.systems:
        for b in RAW_BATCHES:
            plan.append(
                (("burn", "raw", b, str(w)), lambda f, b=b: raw_pg_runs.burn(url, w, n, int(b)))
            )
    return plan


def run_burn(ctx: Ctx, results: dict) -> None:
    """As on SQLite: the largest worker count ``burn_repeats`` times, systems interleaved."""
    for w in ctx.scale.workers:
        plan = burn_plan(ctx, w)
        runs: dict[tuple[str, ...], list[Any]] = {keys: [] for keys, _ in plan}
        for _ in range(ctx.scale.burn_repeats if w == max(ctx.scale.workers) else 1):
            for keys, fn in plan:
                runs[keys].append(attempt(ctx, keys, fn))
        for keys, values in runs.items():
            put(results, keys, median_run(values))


class JobqSession(jobq_runs.Session):
    """jobq's session on a fresh schema, its CPU counted with its server backends."""

    def __init__(self, ctx: Ctx, f: str, workers: int) -> None:
        self._cm = jobq_db(ctx, f)
        db = self._cm.__enter__()
        appname = pg.new_appname("jobq")
        try:
            super().__init__(db, "", workers, env=pg.child_env(appname))
        except BaseException:
            self._cm.__exit__(None, None, None)
            raise
        self.tree = pg.WithBackends(self.tree, ctx.url, appname)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._cm.__exit__(None, None, None)


def sessions(ctx: Ctx) -> Iterator[tuple[tuple[str, str], Callable[[str], Any]]]:
    w, url = ctx.latency_workers, ctx.url
    if "jobq" in ctx.systems:
        yield ("jobq", "pg"), lambda f: JobqSession(ctx, f, w)
    if "huey" in ctx.systems:
        yield ("huey", "pg"), lambda f: huey_pg_runs.Session(f, url, w, ctx.huey_quiet)
    if "procrastinate" in ctx.systems:
        yield ("procrastinate", "1xW"), lambda f: procrastinate_runs.Session(f, url, w, "1xW")
    if "raw" in ctx.systems:
        yield ("raw", "pg"), lambda f: raw_pg_runs.Session(f, url, w)


def run_latency(ctx: Ctx, results: dict, workloads: list[str]) -> None:
    s = ctx.scale
    for (system, variant), make in sessions(ctx):
        with folder(ctx, "latency") as f:
            try:
                session = make(f)
            except Exception as exc:  # noqa: BLE001 - recorded; the other systems still run
                ctx.log(f"{system}/{variant}: could not start\n{traceback.format_exc()}")
                for wl in workloads:
                    put(results, (wl, system, variant), {"error": f"{type(exc).__name__}: {exc}"})
                continue
            with session:
                if "steady" in workloads:
                    measure(
                        ctx,
                        results,
                        ("steady", system, variant),
                        lambda _f: {
                            **latency.steady(session, s.rate, s.steady_seconds),
                            "workers": ctx.latency_workers,
                        },
                    )
                if "idle" in workloads:
                    measure(
                        ctx,
                        results,
                        ("idle", system, variant),
                        lambda _f: {
                            **latency.idle(
                                session,
                                settle=s.settle,
                                cpu_window=s.cpu_window,
                                jobs=s.idle_jobs,
                                delayed=s.delayed_jobs,
                                rng=random.Random(ctx.seed),
                            ),
                            "workers": ctx.latency_workers,
                            "cpu_includes": "tree and its backends",
                        },
                    )


def run_depth(ctx: Ctx, results: dict) -> None:
    systems = [x for x in ("jobq", "raw") if x in ctx.systems]
    for kind, future, finished in (
        ("due", 0.0, 0.0),
        ("future90", 0.9, 0.0),
        ("finished90", 0.0, 0.9),
    ):
        out = attempt(
            ctx,
            ("depth", "pg", kind),
            lambda f: pg_depth.run_depth(
                ctx.url,
                f,
                list(ctx.scale.depths),
                future,
                ctx.scale.depth_claims,
                systems,
                ctx.log,
                finished,
            ),
        )
        for d in map(str, ctx.scale.depths):
            for system in systems:
                put(results, ("depth", system, "pg", d, kind), out.get(d, {}).get(system, out))


def run(ctx: Ctx, results: dict, workloads: list[str]) -> None:
    from .run import WORKLOADS, run_features, run_waits

    chosen = [
        w for w in WORKLOADS if w in workloads and w not in ("startup", "otel")
    ]  # both SQLite only
    for name in chosen:
        if name == "idle" and "steady" in chosen:
            continue
        ctx.log(f"== {name} (PostgreSQL)")
        if name in ("steady", "idle"):
            run_latency(ctx, results, [w for w in chosen if w in ("steady", "idle")])
        else:
            {
                "enqueue": run_enqueue,
                "burn": run_burn,
                "depth": run_depth,
                "waits": run_waits,
                "features": run_features,
            }[name](ctx, results)
