"""The workloads, run one after another on fresh temporary folders; every measurement lands in
``results[workload][system][variant]...`` (a failure is recorded as ``{"error": ...}``)."""

from __future__ import annotations

import contextlib
import dataclasses
import random
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from . import depth, huey_runs, jobq_runs, latency, raw_runs, startup
from .db import Db
from .scale import Scale

WORKLOADS = ("enqueue", "burn", "steady", "idle", "depth", "startup", "waits", "features", "otel")
SYSTEMS = ("jobq", "huey", "raw")


@dataclass
class Ctx:
    root: str
    scale: Scale
    syncs: list[str]
    systems: set[str]
    huey_variants: list[str]
    huey_quiet: bool = False  # Huey's -q: WARNING logging instead of its default INFO
    url: str | None = None  # PostgreSQL: the server every system runs on (bench.pg_run)
    size: str = "full"  # "full", "quick" or "smoke": the sizes of bench.features
    seed: int = 7
    started: float = field(default_factory=time.monotonic)

    def log(self, msg: str) -> None:
        print(f"[{time.monotonic() - self.started:7.1f}s] {msg}", file=sys.stderr, flush=True)

    @property
    def latency_workers(self) -> int:
        return max(self.scale.workers)


@contextlib.contextmanager
def folder(ctx: Ctx, name: str) -> Iterator[str]:
    """A fresh folder for one measurement, removed afterwards."""
    path = tempfile.mkdtemp(prefix=f"{name}-", dir=ctx.root)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def put(results: dict, keys: tuple[str, ...], value: Any) -> None:
    node = results
    for k in keys[:-1]:
        node = node.setdefault(k, {})
    node[keys[-1]] = value


def attempt(ctx: Ctx, keys: tuple[str, ...], fn: Callable[[str], Any]) -> Any:
    """Run ``fn(folder)``; its result, or ``{"error": ...}`` if it failed."""
    name = "/".join(keys)
    try:
        with folder(ctx, keys[0]) as f:
            value = fn(f)
    except Exception as exc:  # noqa: BLE001 - one failed figure must not lose a long run
        ctx.log(f"{name}: FAILED\n{traceback.format_exc()}")
        return {"error": f"{type(exc).__name__}: {exc}"}
    ctx.log(f"{name}: {summary(value)}")
    return value


def measure(ctx: Ctx, results: dict, keys: tuple[str, ...], fn: Callable[[str], Any]) -> None:
    put(results, keys, attempt(ctx, keys, fn))


def median_run(runs: list[Any]) -> Any:
    """The run with the median rate (its figures, plus every run's rate under ``runs``)."""
    ok = sorted((r for r in runs if "error" not in r), key=lambda r: r["per_s"])
    if not ok:
        return runs[0]
    return {**ok[(len(ok) - 1) // 2], "runs": [r.get("per_s") for r in runs]}


def summary(value: Any) -> str:
    if isinstance(value, dict) and "per_s" in value:
        return f"{value['per_s']:,}/s"
    return str(value)[:300]


def run_enqueue(ctx: Ctx, results: dict) -> None:
    s = ctx.scale
    for sync in ctx.syncs:
        if "jobq" in ctx.systems:
            measure(
                ctx,
                results,
                ("enqueue", "jobq", sync),
                lambda f: jobq_runs.enqueue(f, sync, s.enqueue_single, s.enqueue_batched),
            )
        if "raw" in ctx.systems:
            measure(
                ctx,
                results,
                ("enqueue", "raw", sync),
                lambda f: raw_runs.enqueue(f, sync, s.enqueue_single, s.enqueue_batched),
            )
    for fsync in ctx.huey_variants:
        measure(
            ctx,
            results,
            ("enqueue", "huey", fsync),
            lambda f: huey_runs.enqueue(f, fsync, s.enqueue_single),
        )


def burn_plan(ctx: Ctx, w: int) -> list[tuple[tuple[str, ...], Callable[[str], Any]]]:
    """Every burn-down measurement with ``w`` workers."""
    n, plan = ctx.scale.burn_jobs, []
    for sync in ctx.syncs:
        if "jobq" in ctx.systems:
            plan.append(
                (("burn", "jobq", sync, str(w)), lambda f, sync=sync: jobq_runs.burn(f, sync, w, n))
            )
        if "raw" in ctx.systems:
            plan.append(
                (("burn", "raw", sync, str(w)), lambda f, sync=sync: raw_runs.burn(f, sync, w, n))
            )
            if w in ctx.scale.raw_modes_workers:
                plan += [
                    (
                        ("burn", f"raw_{mode}", sync, str(w)),
                        lambda f, sync=sync, mode=mode: raw_runs.burn(f, sync, w, n, mode),
                    )
                    for mode in ("fold", "batch10")
                ]
    for fsync in ctx.huey_variants:
        plan.append(
            (
                ("burn", "huey", fsync, str(w)),
                lambda f, fsync=fsync: huey_runs.burn(f, fsync, w, n, ctx.huey_quiet),
            )
        )
    if w == max(ctx.scale.workers) and "jobq" in ctx.systems and "default" in ctx.huey_variants:
        # Both at their default logging (jobq "info": a line per job; Huey INFO), as the targets'
        # "Huey's defaults" figure was taken.
        plan += [
            (
                ("burn", "jobq_info", sync, str(w)),
                lambda f, sync=sync: jobq_runs.burn(f, sync, w, n, log_level="info"),
            )
            for sync in ctx.syncs
        ]
        plan.append(
            (
                ("burn", "huey_info", "default", str(w)),
                lambda f: huey_runs.burn(f, "default", w, n, quiet=False),
            )
        )
    return plan


def run_burn(ctx: Ctx, results: dict) -> None:
    """Each worker count; the largest one ``burn_repeats`` times, the systems interleaved so that
    drifting machine load hits them alike; the median run is kept."""
    for w in ctx.scale.workers:
        plan = burn_plan(ctx, w)
        runs: dict[tuple[str, ...], list[Any]] = {keys: [] for keys, _ in plan}
        for _ in range(ctx.scale.burn_repeats if w == max(ctx.scale.workers) else 1):
            for keys, fn in plan:
                runs[keys].append(attempt(ctx, keys, fn))
        for keys, values in runs.items():
            put(results, keys, median_run(values))


def sessions(ctx: Ctx) -> Iterator[tuple[tuple[str, str], Callable[[str], Any]]]:
    """(system, variant) and a factory of a running session in a folder, for each system."""
    w = ctx.latency_workers
    if "jobq" in ctx.systems:
        for sync in ctx.syncs:
            yield ("jobq", sync), lambda f, sync=sync: jobq_runs.Session(f, sync, w)
    for fsync in ctx.huey_variants:
        yield ("huey", fsync), lambda f, fsync=fsync: huey_runs.Session(f, fsync, w, ctx.huey_quiet)


def run_latency(ctx: Ctx, results: dict, workloads: list[str]) -> None:
    """Steady state, then idle latency, on one running session per system (one start-up)."""
    s = ctx.scale
    for (system, variant), make in sessions(ctx):
        with folder(ctx, "latency") as f:
            try:
                session = make(f)
            except Exception as exc:  # noqa: BLE001 - recorded; the other systems still run
                ctx.log(f"{system}/{variant}: could not start\n{traceback.format_exc()}")
                for w in workloads:
                    put(results, (w, system, variant), {"error": f"{type(exc).__name__}: {exc}"})
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
                        },
                    )


def run_depth(ctx: Ctx, results: dict) -> None:
    systems = [s for s in ("jobq", "raw") if s in ctx.systems]
    for kind, future in (("due", 0.0), ("future90", 0.9)):
        with contextlib.ExitStack() as stack:
            files = {}
            for d in ctx.scale.depths:
                path = f"{stack.enter_context(folder(ctx, 'depth'))}/jobq.db"
                t0 = time.monotonic()
                files[str(d)] = (path, depth.build(path, d, future))
                ctx.log(f"depth: built {d:,} jobs ({kind}) in {time.monotonic() - t0:.1f}s")
            for sync in ctx.syncs:
                out = attempt(
                    ctx,
                    ("depth", sync, kind),
                    lambda _f: depth.measure(files, sync, ctx.scale.depth_claims, systems),
                )
                for d in files:
                    for system in systems:
                        put(
                            results,
                            ("depth", system, sync, d, kind),
                            out.get(d, {}).get(system, out),
                        )


def run_startup(ctx: Ctx, results: dict) -> None:
    """Cold start (template and exec side by side, Huey end to end), respawn after a
    SIGKILL, throughput under faults at the shipped defaults (bench.startup), 8 workers."""
    n, w = ctx.scale.burn_jobs, max(8, max(ctx.scale.workers))
    here = startup.Side(
        "this", startup.REPO, None
    )  # this checkout, the environment's bytecode cache
    measure(
        ctx,
        results,
        ("startup", "cold", "template"),
        lambda f: startup.cold(Db.sqlite(f), here, w, n, True),
    )
    measure(
        ctx,
        results,
        ("startup", "cold", "exec"),
        lambda f: startup.cold(Db.sqlite(f), here, w, n, False),
    )
    for variant, fsync, quiet in (("quiet", "off", True), ("default", "default", False)):
        if ctx.huey_variants:
            measure(
                ctx,
                results,
                ("startup", "huey", variant),
                lambda f: startup.huey_cold(f, fsync, w, n, quiet),
            )
    kills = 10 if n >= 20_000 else 3
    measure(
        ctx,
        results,
        ("startup", "respawn"),
        lambda f: startup.respawn(Db.sqlite(f), here, kills, min(100_000, 5 * n)),
    )
    faults = min(2000, n)
    measure(
        ctx,
        results,
        ("startup", "faults", "none"),
        lambda f: startup.faults(Db.sqlite(f), here, w, faults, None),
    )
    measure(
        ctx,
        results,
        ("startup", "faults", "kill_every_0.1s"),
        lambda f: startup.faults(Db.sqlite(f), here, w, faults, 0.1),
    )
    r = results["startup"]
    flat = {
        "cold_template": r["cold"].get("template"),
        "cold_exec": r["cold"].get("exec"),
        "huey_quiet": r.get("huey", {}).get("quiet"),
        "huey_default": r.get("huey", {}).get("default"),
        "respawn": r.get("respawn"),
        "faults_none": r["faults"].get("none"),
        "faults_kill": r["faults"].get("kill_every_0.1s"),
    }
    try:
        r["verdicts"] = startup.verdicts({k: v for k, v in flat.items() if v and "error" not in v})
    except (KeyError, TypeError, ZeroDivisionError) as exc:
        r["verdicts"] = {"error": repr(exc)}
    ctx.log(f"startup verdicts: {r['verdicts']}")


def run_waits(ctx: Ctx, results: dict) -> None:
    """Tasks: wait latency, idle waiters' CPU, ``.enqueue()`` against ``q.enqueue()``
    (:mod:`bench.waits`), on this run's engine."""
    from . import waits
    from .scale import SMOKE

    results["waits"] = waits.run(ctx.url, smoke=ctx.scale is SMOKE)


def run_features(ctx: Ctx, results: dict) -> None:
    """The features (tasks, workflows, keys, async) beside their baselines (:mod:`bench.features`),
    on this run's engine, with the largest worker count."""
    from . import features

    sizes = {"smoke": features.SMOKE, "quick": features.QUICK}.get(ctx.size, features.FULL)
    sizes = dataclasses.replace(sizes, workers=max(ctx.scale.workers))
    results["features"] = attempt(
        ctx, ("features",), lambda _f: features.run(ctx.url, sizes, log=ctx.log)
    )


def run_otel(ctx: Ctx, results: dict) -> None:
    """What tracing costs (:mod:`bench.otel`): burn-downs with tracing off, the API
    alone and the SDK with a no-op exporter, alternated (5 rounds, the order rotated; 1 in
    ``--smoke``)."""
    from . import otel
    from .scale import SMOKE

    smoke = ctx.scale is SMOKE
    n = ctx.scale.burn_jobs if smoke else max(ctx.scale.burn_jobs, 5000)
    results["otel"] = otel.run(
        ctx.root, 1 if smoke else 5, max(ctx.scale.workers), n, 2000 if smoke else 20_000
    )
    ctx.log(otel.report(results["otel"]))


def run(ctx: Ctx, results: dict, workloads: list[str]) -> None:
    """The selected workloads, in the order of :data:`WORKLOADS`."""
    chosen = [w for w in WORKLOADS if w in workloads]
    for name in chosen:
        if name == "idle" and "steady" in chosen:
            continue  # ran with steady, in the same sessions
        ctx.log(f"== {name}")
        if name in ("steady", "idle"):
            run_latency(ctx, results, [w for w in chosen if w in ("steady", "idle")])
        else:
            {
                "enqueue": run_enqueue,
                "burn": run_burn,
                "depth": run_depth,
                "startup": run_startup,
                "waits": run_waits,
                "features": run_features,
                "otel": run_otel,
            }[name](ctx, results)
