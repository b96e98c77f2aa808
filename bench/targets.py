"""Issue 7's targets, checked against one run's results (8 workers, no-op jobs), and issue 29's
cost of tracing (``otel_targets``)."""
from __future__ import annotations

from typing import Any

from .report import dig


def _num(v: Any) -> float | None:
    return v if isinstance(v, (int, float)) else None


def verdict(target: str, measured: str, met: bool | None) -> dict[str, Any]:
    return {"target": target, "measured": measured, "met": met}


def burn_targets(results: dict, syncs: list[str]) -> list[dict[str, Any]]:
    wanted = {"normal": (("off", 2.0, "Huey fsync=False"), ("default", 8.0, "Huey defaults")),
              "full": (("default", 3.0, "Huey defaults"),)}
    out = []
    for sync in syncs:
        j = _num(dig(results, "burn", "jobq", sync, "8", "per_s"))
        for variant, factor, name in wanted[sync]:
            h = _num(dig(results, "burn", "huey", variant, "8", "per_s"))
            if j is None or h is None:
                continue
            out.append(verdict(f"synchronous={sync}: burn-down (W=8) >= {factor:g}x {name}",
                               f"{j:,.0f} vs {h:,.0f} jobs/s = {j / h:.2f}x", j >= factor * h))
        # The same, both systems at their default logging (jobq info, Huey INFO)
        j = _num(dig(results, "burn", "jobq_info", sync, "8", "per_s"))
        h = _num(dig(results, "burn", "huey_info", "default", "8", "per_s"))
        factor = 8.0 if sync == "normal" else 3.0
        if j is not None and h is not None:
            out.append(verdict(f"synchronous={sync}: burn-down (W=8) >= {factor:g}x Huey's defaults, both at "
                               f"default logging", f"{j:,.0f} vs {h:,.0f} jobs/s = {j / h:.2f}x", j >= factor * h))
    return out


def idle_targets(results: dict, syncs: list[str]) -> list[dict[str, Any]]:
    checks = (("start", "p50", 2.0, "idle enqueue-to-start p50"), ("start", "p99", 10.0, "idle enqueue-to-start p99"),
              ("cpu_pct", None, 1.0, "idle CPU of the whole tree (% of a core)"),
              ("delayed", "p99", 10.0, "delayed jobs start - run_at p99"))
    out = []
    for sync in syncs:
        for key, q, limit, name in checks:
            v = _num(dig(results, "idle", "jobq", sync, *((key, q) if q else (key,))))
            if v is not None:
                unit = "%" if q is None else " ms"
                out.append(verdict(f"synchronous={sync}: {name} <= {limit:g}{unit}", f"{v:.2f}{unit}", v <= limit))
    return out


def enqueue_targets(results: dict, syncs: list[str]) -> list[dict[str, Any]]:
    out = []
    for sync in syncs:
        limits = (("single", 15_000.0), ("batched", 100_000.0)) if sync == "normal" else (("batched", 100_000.0),)
        for kind, limit in limits:
            v = _num(dig(results, "enqueue", "jobq", sync, kind, "per_s"))
            if v is not None:
                out.append(verdict(f"synchronous={sync}: enqueue {kind} >= {limit:,.0f}/s", f"{v:,.0f}/s", v >= limit))
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
            out.append(verdict(f"synchronous={sync}: claims/s at {int(hi):,} pending >= 90% of {int(lo):,} ({name})",
                               f"{b:,.0f} vs {a:,.0f}/s = {100 * b / a:.1f}%", b >= 0.9 * a))
    return out


OTEL_LOSS = 3.0  # issue 29: tracing on, a no-op exporter: under 3% of burn-down throughput lost


def otel_targets(results: dict) -> list[dict[str, Any]]:
    """Issue 29's cost target (bench.otel): the SDK with a no-op exporter, and the API alone,
    each against tracing off, in alternated burn-downs."""
    out = []
    for mode, name in (("sdk", "the SDK and a no-op exporter"), ("api", "the API alone (no SDK)")):
        loss = _num(dig(results, "otel", "burn", mode, "loss_pct"))
        if loss is not None:
            out.append(verdict(f"tracing on ({name}): burn-down loses < {OTEL_LOSS:g}% of its throughput",
                               f"{loss:.1f}% lost", loss < OTEL_LOSS))
    return out


def check(results: dict, syncs: list[str], depths: list[int]) -> list[dict[str, Any]]:
    return (burn_targets(results, syncs) + idle_targets(results, syncs) + enqueue_targets(results, syncs)
            + depth_targets(results, syncs, depths) + otel_targets(results))


def markdown(verdicts: list[dict[str, Any]]) -> str:
    mark = {True: "met", False: "MISSED", None: "n/a"}
    return "\n".join(f"- {mark[v['met']]}: {v['target']} (measured {v['measured']})" for v in verdicts)
