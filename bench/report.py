"""The markdown table, the throughput target verdicts, and the JSON file.

``results[workload][system][variant]...``: systems "jobq", "huey", "raw" (one claim per
transaction), "raw_fold", "raw_batch10"; variants "normal"/"full" (jobq, raw) and
"default"/"off" (Huey's fsync). A failed measurement is ``{"error": "..."}``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Callable

HUEY = (("huey", "default"), ("huey", "off"))


@dataclass(frozen=True)
class Figure:
    label: str
    path: Callable[
        [str], tuple[str, ...]
    ]  # system -> keys below results[workload][system][variant]
    workload: str
    unit: str  # "/s", "ms" or "% of a core"
    higher_is_better: bool
    huey: bool = True  # does Huey have this figure?
    raw: str | None = "raw"  # the raw system beside it, if any
    jobq: str = "jobq"  # the system names in results for jobq and Huey
    huey_system: str = "huey"


def dig(results: dict, *keys: str) -> Any:
    node: Any = results
    for k in keys:
        if not isinstance(node, dict):
            return None
        if "error" in node and k not in node:
            return "error"
        node = node.get(k)
    return node


def figures(workers: list[int], depths: list[int], rate: float | None) -> list[Figure]:
    out = [
        Figure(f"burn-down W={w}", lambda s, w=w: (str(w), "per_s"), "burn", "/s", True)
        for w in workers
    ]
    if 8 in workers:
        out += [
            Figure(
                "burn-down W=8 vs raw fold (complete+claim in 1 tx)",
                lambda s: ("8", "per_s"),
                "burn",
                "/s",
                True,
                huey=False,
                raw="raw_fold",
            ),
            Figure(
                "burn-down W=8 vs raw 10 claims/tx",
                lambda s: ("8", "per_s"),
                "burn",
                "/s",
                True,
                huey=False,
                raw="raw_batch10",
            ),
            Figure(
                "burn-down W=8, both at default logging (jobq info, Huey INFO)",
                lambda s: ("8", "per_s"),
                "burn",
                "/s",
                True,
                raw=None,
                jobq="jobq_info",
                huey_system="huey_info",
            ),
        ]
    tag = f" @{rate:g}/s" if rate else ""
    for what in ("start", "finish"):
        for q in ("p50", "p99"):
            out.append(
                Figure(
                    f"steady{tag} enqueue-to-{what} {q}",
                    lambda s, w=what, q=q: (w, q),
                    "steady",
                    "ms",
                    False,
                    raw=None,
                )
            )
    out += [
        Figure(
            f"idle enqueue-to-start {q}", lambda s, q=q: ("start", q), "idle", "ms", False, raw=None
        )
        for q in ("p50", "p99")
    ]
    out.append(
        Figure(
            "idle CPU, whole tree", lambda s: ("cpu_pct",), "idle", "% of a core", False, raw=None
        )
    )
    out += [
        Figure(
            f"delayed start - run_at {q}",
            lambda s, q=q: ("delayed", q),
            "idle",
            "ms",
            False,
            raw=None,
        )
        for q in ("p50", "p99")
    ]
    out += [
        Figure("enqueue single", lambda s: ("single", "per_s"), "enqueue", "/s", True),
        Figure(
            "enqueue batched (1,000/tx)",
            lambda s: ("batched", "per_s"),
            "enqueue",
            "/s",
            True,
            huey=False,
        ),
    ]
    for kind, name in (("due", "all due"), ("future90", "90% future")):
        out += [
            Figure(
                f"depth {d:,} pending, {name}: claim+complete",
                lambda s, d=d, k=kind: (str(d), k, "per_s"),
                "depth",
                "/s",
                True,
                huey=False,
            )
            for d in depths
        ]
        out += [
            Figure(
                f"depth {d:,} pending, {name}: one claim",
                lambda s, d=d, k=kind: (str(d), k, "claim_ms"),
                "depth",
                "ms",
                False,
                huey=False,
            )
            for d in depths
        ]
    return out


def fmt(v: Any, unit: str) -> str:
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    if unit == "/s":
        return f"{v:,.0f}"
    return f"{v:,.3f}" if abs(v) < 1 else f"{v:,.2f}"


def ratio(jobq: Any, other: Any, higher_is_better: bool) -> str:
    if not all(isinstance(v, (int, float)) for v in (jobq, other)):
        return "—"
    num, den = (jobq, other) if higher_is_better else (other, jobq)
    return "—" if den == 0 else f"{num / den:.2f}×"


def table(results: dict, syncs: list[str], figs: list[Figure]) -> str:
    head = (
        "| figure | jobq | Huey default | Huey fsync=False | raw ceiling | vs Huey default "
        "| vs Huey fsync=False | vs raw |"
    )
    lines = [head, "|" + "---|" * 8]
    for sync in syncs:
        for f in figs:
            get = lambda system, variant: dig(results, f.workload, system, variant, *f.path(system))  # noqa: E731
            j = get(f.jobq, sync)
            h = [get(f.huey_system, variant) if f.huey else None for _, variant in HUEY]
            r = get(f.raw, sync) if f.raw else None
            if all(v is None for v in (j, *h, r)) or (f.raw not in (None, "raw") and r is None):
                continue
            cells = [
                f"{f.label} ({f.unit}), {sync}",
                fmt(j, f.unit),
                *(fmt(v, f.unit) for v in h),
                fmt(r, f.unit),
                *(ratio(j, v, f.higher_is_better) for v in (*h, r)),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_json(path: str, data: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=False, default=str)
