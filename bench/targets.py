"""The throughput targets, checked against one run's results (8 workers, no-op jobs), and the
cost of tracing (``otel_targets``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from .report import dig


def _num(v: Any) -> float | None:
    return v if isinstance(v, (int, float)) else None


def verdict(target: str, measured: str, met: bool | None) -> dict[str, Any]:
    return {"target": target, "measured": measured, "met": met}


def burn_targets(results: dict, syncs: list[str]) -> list[dict[str, Any]]:
    wanted = {
        "normal": (("off", 2.0, "Huey fsync=False"), ("default", 8.0, "Huey defaults")),
        "full": (("default", 3.0, "Huey defaults"),),
    }
    out = []
    for sync in syncs:
        j = _num(dig(results, "burn", "jobq", sync, "8", "per_s"))
        for variant, factor, name in wanted[sync]:
            h = _num(dig(results, "burn", "huey", variant, "8", "per_s"))
            if j is None or h is None:
                continue
            out.append(
                verdict(
                    f"synchronous={sync}: burn-down (W=8) >= {factor:g}x {name}",
                    f"{j:,.0f} vs {h:,.0f} jobs/s = {j / h:.2f}x",
                    j >= factor * h,
                )
            )
        # The same, both systems at their default logging (jobq info, Huey INFO)
        j = _num(dig(results, "burn", "jobq_info", sync, "8", "per_s"))
        h = _num(dig(results, "burn", "huey_info", "default", "8", "per_s"))
        factor = 8.0 if sync == "normal" else 3.0
        if j is not None and h is not None:
            out.append(
                verdict(
                    f"synchronous={sync}: burn-down (W=8) >= {factor:g}x Huey's defaults, both at "
                    f"default logging",
                    f"{j:,.0f} vs {h:,.0f} jobs/s = {j / h:.2f}x",
                    j >= factor * h,
                )
            )
    return out


def idle_targets(results: dict, syncs: list[str]) -> list[dict[str, Any]]:
    checks = (
        ("start", "p50", 2.0, "idle enqueue-to-start p50"),
        ("start", "p99", 10.0, "idle enqueue-to-start p99"),
        ("cpu_pct", None, 1.0, "idle CPU of the whole tree (% of a core)"),
        ("delayed", "p99", 10.0, "delayed jobs start - run_at p99"),
    )
    out = []
    for sync in syncs:
        for key, q, limit, name in checks:
            v = _num(dig(results, "idle", "jobq", sync, *((key, q) if q else (key,))))
            if v is not None:
                unit = "%" if q is None else " ms"
                out.append(
                    verdict(
                        f"synchronous={sync}: {name} <= {limit:g}{unit}",
                        f"{v:.2f}{unit}",
                        v <= limit,
                    )
                )
    return out


def enqueue_targets(results: dict, syncs: list[str]) -> list[dict[str, Any]]:
    out = []
    for sync in syncs:
        limits = (
            (("single", 15_000.0), ("batched", 100_000.0))
            if sync == "normal"
            else (("batched", 100_000.0),)
        )
        for kind, limit in limits:
            v = _num(dig(results, "enqueue", "jobq", sync, kind, "per_s"))
            if v is not None:
                out.append(
                    verdict(
                        f"synchronous={sync}: enqueue {kind} >= {limit:,.0f}/s",
                        f"{v:,.0f}/s",
                        v >= limit,
                    )
                )
    return out


def depth_targets(results: dict, syncs: list[str], depths: list[int]) -> list[dict[str, Any]]:
    out = []
    lo, hi = str(min(depths)), str(max(depths))
    for sync in syncs:
        for kind, name in (("due", "all due"), ("future90", "90% future")):
            a = _num(dig(results, "depth", "jobq", sync, lo, kind, "per_s"))
            b = _num(dig(results, "depth", "jobq", sync, hi, kind, "per_s"))
            if a is None or b is None or lo == hi:
                continue
            out.append(
                verdict(
                    f"synchronous={sync}: claims/s at {int(hi):,} pending >= 90% of {int(lo):,} ({name})",
                    f"{b:,.0f} vs {a:,.0f}/s = {100 * b / a:.1f}%",
                    b >= 0.9 * a,
                )
            )
    return out


OTEL_LOSS = 3.0  # the SDK with the manual's sampler: under 3% of burn-down throughput lost
OTEL_OWN_US = 10.0  # jobq's own cost per job beyond the SDK's span, in one process


def otel_targets(results: dict) -> list[dict[str, Any]]:
    """Tracing's cost targets (bench.otel): the SDK with the manual's sampler loses under 3% of
    a burn-down; the API alone no more than noise (zero lies within its alternated rounds'
    losses against tracing off: a round where it lost nothing); jobq's own cost per job beyond
    the SDK's span at most 10 us. Every span recorded is stated, with the floor the SDK's own
    span sets, and judged by no target."""
    out = []
    loss = _num(dig(results, "otel", "burn", "sampled", "loss_pct"))
    if loss is not None:
        floor = sdk_floor(results, "sampled")
        why = f" (the SDK's own unsampled span alone: at least {floor:.0f}%)" if floor else ""
        out.append(
            verdict(
                f"tracing on (the SDK, ParentBased(TraceIdRatioBased(0.01))): burn-down loses "
                f"< {OTEL_LOSS:g}% of its throughput",
                f"{loss:.1f}% lost{why}",
                loss < OTEL_LOSS,
            )
        )
    api = dig(results, "otel", "burn", "api") or {}
    if api.get("losses"):
        rounds = api["losses"]
        out.append(
            verdict(
                "the API alone (no SDK): no loss beyond noise over the alternated rounds",
                f"{api['loss_pct']:.1f}% lost (rounds {rounds})",
                min(rounds) <= 0 <= max(rounds) or api["loss_pct"] <= 0,
            )
        )
    own = _num(dig(results, "otel", "micro", "sdk", "own_us"))
    if own is not None:
        out.append(
            verdict(
                f"jobq's own cost per job beyond the SDK's span <= {OTEL_OWN_US:g} us",
                f"{own:.1f} us",
                own <= OTEL_OWN_US,
            )
        )
    loss = _num(dig(results, "otel", "burn", "sdk", "loss_pct"))
    if loss is not None:
        floor = sdk_floor(results)
        why = f" (the SDK's own span alone: at least {floor:.0f}%)" if floor is not None else ""
        out.append(
            verdict(
                "every span recorded (the SDK, no sampler): what a burn-down loses (no target)",
                f"{loss:.1f}% lost{why}",
                None,
            )
        )
    return out


def sdk_floor(results: dict, mode: str = "sdk") -> float | None:
    """The least a CPU-bound burn-down of no-op jobs can lose to the SDK whatever jobq does: the
    SDK's bare span (bench.otel's micro: start with jobq's attributes, the outcome, end; in
    ``mode``, ``sampled`` for one the sampler drops) added to the CPU a job costs with tracing
    off, in percent; None if either was not measured."""
    bare = _num(dig(results, "otel", "micro", mode, "bare_span_us"))
    off = _num(dig(results, "otel", "burn", "off", "cpu_us_per_job"))
    if bare is None or not off:
        return None
    return 100 * bare / (off + bare)


def check(results: dict, syncs: list[str], depths: list[int]) -> list[dict[str, Any]]:
    return (
        burn_targets(results, syncs)
        + idle_targets(results, syncs)
        + enqueue_targets(results, syncs)
        + depth_targets(results, syncs, depths)
        + otel_targets(results)
    )


def markdown(verdicts: list[dict[str, Any]]) -> str:
    mark = {True: "met", False: "MISSED", None: "n/a"}
    return "\n".join(
        f"- {mark[v['met']]}: {v['target']} (measured {v['measured']})"
        if not v["measured"].startswith("not measured")
        else f"- not measured in this run: {v['target']} ({v['measured'][len('not measured in this run; ') :]})"
        for v in verdicts
    )


# ---- The performance targets: every target stated once, as data ----------------------------------
#
# A target's ``figure`` reads what it is judged on from an :class:`Inputs` and gives
# ``[(variant, measured text, met)]`` (one per SQLite ``synchronous`` mode where that matters),
# or ``[]`` when this run did not measure it: never a figure written down here.


@dataclass(frozen=True)
class Inputs:
    """What one ``python -m bench`` run has to judge by: its own results and engine, and the
    JSON of ``bench.startup`` / ``bench.purge`` when given (``--startup-json``, ``--purge-json``)."""

    results: dict
    engine: str  # "sqlite" or "postgresql": this run's
    syncs: list[str]
    startup: dict | None = None  # as ``python -m bench.startup --json`` writes it (or flat)
    startup_source: str = ""
    purge: dict | None = None  # as ``python -m bench.purge`` prints it
    purge_source: str = ""


Figure = Callable[[Inputs], list[tuple[str, str, bool]]]


@dataclass(frozen=True)
class Target:
    name: str
    engine: str  # "sqlite", "postgresql" or "both"
    bound: str
    how: str  # how it is measured, where a reader can rerun it
    figure: Figure


def startup_flat(results: dict) -> dict | None:
    """This run's ``startup`` workload in ``bench.startup``'s flat layout, or None."""
    r = results.get("startup")
    if not isinstance(r, dict):
        return None
    return {
        "cold_template": dig(r, "cold", "template"),
        "huey_quiet": dig(r, "huey", "quiet"),
        "huey_default": dig(r, "huey", "default"),
        "respawn": r.get("respawn"),
        "engine": "sqlite",
    }


def startup_views(doc: dict) -> list[dict]:
    """``bench.startup --json`` (per engine, per checkout; cold runs and their medians) as flat
    views, one per engine, of the checkout it ran from; a flat document as it is. A view's 8
    busy workers are the median over its cold runs with a run where some worker ran no job
    counted as missed (None, and the fewest workers that ran), not left out."""
    if not any(isinstance(doc.get(e), dict) and "this" in doc[e] for e in ("sqlite", "postgresql")):
        return [doc]
    views = []
    for engine in ("sqlite", "postgresql"):
        mine = dig(doc, engine, "this")
        if not isinstance(mine, dict):
            continue
        cold, runs = (
            mine.get("cold"),
            [r for r in mine.get("cold_runs") or [] if isinstance(r, dict)],
        )
        if isinstance(cold, dict) and runs:
            busy = sorted(
                float("inf")
                if r.get("all_workers_first_job_s") is None
                else r["all_workers_first_job_s"]
                for r in runs
            )[(len(runs) - 1) // 2]
            cold = {
                **cold,
                "all_workers_first_job_s": None if busy == float("inf") else busy,
                "workers_that_ran": min(r.get("workers_that_ran", 0) for r in runs),
                "workers": runs[0].get("workers"),
                "jobs": runs[0].get("jobs"),
            }
        views.append(
            {
                "cold_template": cold,
                "respawn": mine.get("respawn"),
                "engine": engine,
                "huey_quiet": dig(doc, engine, "huey_quiet"),
                "huey_default": dig(doc, engine, "huey_default"),
            }
        )
    return views


def _startups(i: Inputs) -> list[tuple[dict, str]]:
    """The start-up figures, per engine: this run's startup workload, else the JSON given."""
    own = startup_flat(i.results)
    if own and isinstance(own.get("cold_template"), dict) and "error" not in own["cold_template"]:
        return [(own, "this run")]
    return [(v, i.startup_source) for v in startup_views(i.startup)] if i.startup else []


def _from_startup(path: tuple[str, ...], limit: float, unit: str) -> Figure:
    def figure(i: Inputs) -> list[tuple[str, str, bool]]:
        out = []
        for got, source in _startups(i):
            v = _num(dig(got, *path))
            if v is not None:
                out.append((got.get("engine", "sqlite"), f"{v:g} {unit} ({source})", v <= limit))
        return out

    return figure


def _all_busy(i: Inputs) -> list[tuple[str, str, bool]]:
    """Launch to all workers running a job; missed when the jobs ran out before all of them did."""
    out = []
    for got, source in _startups(i):
        c, engine = got.get("cold_template"), got.get("engine", "sqlite")
        if not isinstance(c, dict) or "error" in c:
            continue
        v = _num(c.get("all_workers_first_job_s"))
        ran, end = c.get("workers_that_ran"), _num(c.get("end_to_end_s"))
        if v is not None:
            out.append((engine, f"{v:g} s ({source})", v <= 0.3))
        elif ran is not None and end is not None:
            out.append(
                (
                    engine,
                    f"only {ran} of {c.get('workers', '?')} workers ran a job before the "
                    f"{c.get('jobs', '?')} jobs were done, {end:g} s after launch ({source})",
                    end <= 0.3,
                )
            )
    return out


def _from_launch_vs_huey(variant: str, factor: float) -> Figure:
    def figure(i: Inputs) -> list[tuple[str, str, bool]]:
        out = []
        for got, source in _startups(i):
            j = _num(dig(got, "cold_template", "end_to_end_jobs_s"))
            h = _num(dig(got, variant, "end_to_end_jobs_s"))
            if j is not None and h is not None:
                out.append(
                    (
                        "sqlite",
                        f"{j:,.0f} vs {h:,.0f} jobs/s = {j / h:.2f}x ({source})",
                        j >= factor * h,
                    )
                )
        return out

    return figure


def _pg_ratio(workload: str, a: tuple[str, ...], b: tuple[str, ...], factor: float) -> Figure:
    def figure(i: Inputs) -> list[tuple[str, str, bool]]:
        x, y = _num(dig(i.results, workload, *a)), _num(dig(i.results, workload, *b))
        if i.engine != "postgresql" or x is None or y is None or not y:
            return []
        return [("postgresql", f"{x:,.0f} vs {y:,.0f}/s = {x / y:.2f}x", x >= factor * y)]

    return figure


def _pg_vs_procrastinate(i: Inputs) -> list[tuple[str, str, bool]]:
    """jobq's drain against Procrastinate's faster layout (1 process x W, or W x 1)."""
    rates = [
        _num(dig(i.results, "burn", "procrastinate", layout, "8", "per_s"))
        for layout in ("1xW", "Wx1")
    ]
    best = max((r for r in rates if r), default=None)
    j = _num(dig(i.results, "burn", "jobq", "pg", "8", "per_s"))
    if i.engine != "postgresql" or j is None or best is None:
        return []
    return [("postgresql", f"{j:,.0f} vs {best:,.0f}/s = {j / best:.2f}x", j >= 30 * best)]


def _pg_idle_p50(i: Inputs) -> list[tuple[str, str, bool]]:
    v = _num(dig(i.results, "idle", "jobq", "pg", "start", "p50"))
    return (
        [] if i.engine != "postgresql" or v is None else [("postgresql", f"{v:.2f} ms", v <= 4.0)]
    )


def _sqlite_batched(i: Inputs) -> list[tuple[str, str, bool]]:
    out = []
    for sync in i.syncs if i.engine == "sqlite" else []:
        j = _num(dig(i.results, "enqueue", "jobq", sync, "batched", "per_s"))
        r = _num(dig(i.results, "enqueue", "raw", sync, "batched", "per_s"))
        if j is not None and r:
            out.append(
                (f"synchronous={sync}", f"{j:,.0f} vs {r:,.0f}/s = {j / r:.2f}x", j >= 1.4 * r)
            )
    return out


def _purge(key: str) -> Figure:
    def figure(i: Inputs) -> list[tuple[str, str, bool]]:
        p = i.purge or {}
        rows, v = (
            p.get("rows"),
            _num(
                p.get("purge_s")
                if key == "purge_s"
                else dig(p, "during", "enqueue_call_p99_ms") or dig(p, "during", "p99_ms")
            ),
        )
        if v is None:
            return []
        what = (
            "purge"
            if key == "purge_s"
            else "enqueue call"
            if dig(p, "during", "enqueue_call_p99_ms")
            else "enqueue-to-completion"
        )
        full = isinstance(rows, int) and rows >= 500_000
        unit, limit = ("s", 30.0) if key == "purge_s" else ("ms", 100.0)
        text = (
            f"{what} {v:g} {unit} with {rows:,} rows ({i.purge_source})"
            if isinstance(rows, int)
            else f"{v:g}"
        )
        return [
            (
                p.get("engine", "sqlite"),
                text + ("" if full else ": fewer rows than the target's"),
                (v <= limit) if full else None,
            )
        ]

    return figure


def _feature(
    path: tuple[str, ...], ok: Callable[[float], bool], text: Callable[[dict], str]
) -> Figure:
    def figure(i: Inputs) -> list[tuple[str, str, bool]]:
        f = i.results.get("features") or {}
        v = _num(dig(f, *path))
        return [] if v is None else [(i.engine, text(f), ok(v))]

    return figure


PERFORMANCE: tuple[Target, ...] = (
    Target(
        "launch to first job",
        "both",
        "<= 0.2 s",
        "bench.startup cold (template), --only startup or --startup-json",
        _from_startup(("cold_template", "first_job_s"), 0.2, "s"),
    ),
    Target(
        "launch to 8 busy workers",
        "both",
        "<= 0.3 s",
        "bench.startup cold: all 8 workers ran a job",
        _all_busy,
    ),
    Target(
        "respawn of a SIGKILLed worker",
        "both",
        "<= 50 ms",
        "bench.startup respawn: from the SIGKILL to the replacement's first job, median",
        _from_startup(("respawn", "after_kill_ms", "median"), 50, "ms"),
    ),
    Target(
        "drain (burn-down W=8) vs the raw 100-per-transaction loop",
        "postgresql",
        ">= 0.7x",
        "--database: burn jobq vs raw/100",
        _pg_ratio("burn", ("jobq", "pg", "8", "per_s"), ("raw", "100", "8", "per_s"), 0.7),
    ),
    Target(
        "drain (burn-down W=8) vs Huey PG",
        "postgresql",
        ">= 8x",
        "--database: burn jobq vs huey",
        _pg_ratio("burn", ("jobq", "pg", "8", "per_s"), ("huey", "pg", "8", "per_s"), 8),
    ),
    Target(
        "drain (burn-down W=8) vs Procrastinate (its better layout)",
        "postgresql",
        ">= 30x",
        "--database: burn jobq vs procrastinate 1xW and Wx1",
        _pg_vs_procrastinate,
    ),
    Target(
        "single enqueue vs raw one-statement INSERT + pg_notify",
        "postgresql",
        ">= 0.9x",
        "--database: enqueue single",
        _pg_ratio(
            "enqueue", ("jobq", "pg", "single", "per_s"), ("raw", "pg", "single", "per_s"), 0.9
        ),
    ),
    Target("idle enqueue-to-start p50", "postgresql", "<= 4 ms", "--database: idle", _pg_idle_p50),
    Target(
        "burn-down from launch vs Huey fsync=False -q",
        "sqlite",
        ">= 2x",
        "bench.startup: end to end from launch",
        _from_launch_vs_huey("huey_quiet", 2),
    ),
    Target(
        "burn-down from launch vs Huey's defaults",
        "sqlite",
        ">= 8x",
        "bench.startup: end to end from launch",
        _from_launch_vs_huey("huey_default", 8),
    ),
    Target(
        "batched enqueue vs the raw insert",
        "sqlite",
        ">= 1.4x",
        "enqueue batched, 1,000 per transaction",
        _sqlite_batched,
    ),
    Target(
        "purge of 500,000 rows on a loaded machine",
        "both",
        "<= 30 s",
        "bench.purge --rows 500000, --purge-json",
        _purge("purge_s"),
    ),
    Target(
        "writers' p99 wait during that purge",
        "both",
        "<= 100 ms",
        "bench.purge: jobs enqueued during it",
        _purge("p99"),
    ),
)

# Feature targets chosen here to guard the features (tasks, workflows, keys, async) against
# regressions; each is a ratio to a plain baseline measured in the same run (bench.features).
FEATURES: tuple[Target, ...] = (
    Target(
        "typed task .enqueue() vs q.enqueue() (calls/s)",
        "both",
        ">= 0.9x",
        "features: enqueue",
        _feature(
            ("enqueue", "extra_percent"),
            lambda v: 100 / (100 + v) >= 0.9,
            lambda f: (
                f"{100 / (100 + f['enqueue']['extra_percent']):.2f}x "
                f"({f['enqueue']['us_per_call']['task.enqueue']} vs "
                f"{f['enqueue']['us_per_call']['q.enqueue']} us)"
            ),
        ),
    ),
    Target(
        "what wait() adds to enqueue-to-finish, p50",
        "both",
        "<= 2 ms",
        "features: wait",
        _feature(
            ("wait", "added_ms", "p50"),
            lambda v: v <= 2.0,
            lambda f: (
                f"{f['wait']['added_ms']['p50']:.2f} ms (result in hand p50 "
                f"{f['wait']['in_hand_ms']['p50']:.2f} ms)"
            ),
        ),
    ),
    Target(
        "a job of a fan-in graph vs an independent job (jobs/s)",
        "both",
        ">= 0.67x (<= 1.5x the cost)",
        "features: deps",
        _feature(
            ("deps", "fanin", "vs_independent"),
            lambda v: v >= 1 / 1.5,
            lambda f: f"{f['deps']['fanin']['vs_independent']:.2f}x",
        ),
    ),
    Target(
        "a job of a chain vs an independent job (jobs/s)",
        "both",
        ">= 0.67x (<= 1.5x the cost)",
        "features: deps",
        _feature(
            ("deps", "chain", "vs_independent"),
            lambda v: v >= 1 / 1.5,
            lambda f: f"{f['deps']['chain']['vs_independent']:.2f}x",
        ),
    ),
    Target(
        "fair keyed claim + complete vs a plain one (/s)",
        "both",
        ">= 0.5x",
        "features: fair",
        _feature(
            ("fair", "vs_plain"), lambda v: v >= 0.5, lambda f: f"{f['fair']['vs_plain']:.2f}x"
        ),
    ),
    Target(
        "async sleeps drained vs the ideal N*t/(W*c)",
        "both",
        "<= 1.5x the ideal",
        "features: async",
        _feature(
            ("async", "vs_ideal"),
            lambda v: v <= 1.5,
            lambda f: (
                f"{f['async']['seconds']:.3f} s vs {f['async']['ideal_seconds']:.3f} s = "
                f"{f['async']['vs_ideal']:.2f}x"
            ),
        ),
    ),
)


def judge(i: Inputs, targets: tuple[Target, ...] = PERFORMANCE + FEATURES) -> list[dict[str, Any]]:
    """A verdict for every target: met, missed, or not measured in this run (and how it is)."""
    out = []
    for t in targets:
        try:
            got = t.figure(i)
        except (KeyError, TypeError, ZeroDivisionError) as exc:  # a layout this code does not know
            got = [("", f"unreadable figure: {exc!r}", None)]
        if not got:
            out.append(
                {
                    **verdict(
                        f"[{t.engine}] {t.name} {t.bound}",
                        f"not measured in this run; {t.how}",
                        None,
                    ),
                    "engine": t.engine,
                    "bound": t.bound,
                    "how": t.how,
                }
            )
        for variant, measured, met in got:
            out.append(
                {
                    **verdict(f"[{variant or t.engine}] {t.name} {t.bound}", measured, met),
                    "engine": t.engine,
                    "bound": t.bound,
                    "how": t.how,
                }
            )
    return out


def read_json(path: str | None) -> dict | None:
    """A JSON object from ``path`` (None: none given). Bad input is an error naming the file."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read {path!r}: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path!r} holds a JSON {type(data).__name__}, not an object")
    return data
