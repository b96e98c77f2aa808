"""The PostgreSQL run's table and its engine's speed targets (see :mod:`bench.pg_run` for the
layout of the results)."""

from __future__ import annotations

from typing import Any, Callable

from .report import dig, fmt, ratio
from .targets import _num, verdict

Get = Callable[[dict], Any]


def _best(*values: Any) -> Any:
    nums = [v for v in values if isinstance(v, (int, float))]
    return max(nums) if nums else next((v for v in values if v is not None), None)


def rows(
    results: dict, workers: list[int], depths: list[int]
) -> list[tuple[str, str, bool, Any, Any, Any, Any]]:
    """(label, unit, higher is better, jobq, Huey PG, Procrastinate, raw) per figure."""
    r = results
    out = []
    for w in workers:
        w_ = str(w)
        j = dig(r, "burn", "jobq", "pg", w_, "per_s")
        p1, p2 = (
            dig(r, "burn", "procrastinate", "1xW", w_, "per_s"),
            dig(r, "burn", "procrastinate", "Wx1", w_, "per_s"),
        )
        out.append(
            (
                f"burn-down W={w} (Procrastinate: best of 1x{w} {fmt(p1, '/s')}, {w}x1 {fmt(p2, '/s')}; "
                "raw: 100 per tx)",
                "/s",
                True,
                j,
                dig(r, "burn", "huey", "pg", w_, "per_s"),
                _best(p1, p2),
                dig(r, "burn", "raw", "100", w_, "per_s"),
            )
        )
        for b in ("1", "10"):
            out.append(
                (
                    f"burn-down W={w} vs raw {b} per tx",
                    "/s",
                    True,
                    j,
                    None,
                    None,
                    dig(r, "burn", "raw", b, w_, "per_s"),
                )
            )
    for what in ("start", "finish"):
        for q in ("p50", "p99"):
            out.append(
                (
                    f"steady enqueue-to-{what} {q}",
                    "ms",
                    False,
                    *(dig(r, "steady", sys_, var, what, q) for sys_, var in _LAT),
                )
            )
    for q in ("p50", "p99"):
        out.append(
            (
                f"idle enqueue-to-start {q}",
                "ms",
                False,
                *(dig(r, "idle", sys_, var, "start", q) for sys_, var in _LAT),
            )
        )
    out.append(
        (
            "idle CPU, tree + its PG backends",
            "% of a core",
            False,
            *(dig(r, "idle", sys_, var, "cpu_pct") for sys_, var in _LAT),
        )
    )
    for q in ("p50", "p99"):
        out.append(
            (
                f"delayed start - run_at {q}",
                "ms",
                False,
                *(dig(r, "idle", sys_, var, "delayed", q) for sys_, var in _LAT),
            )
        )
    e = lambda sys_, k: dig(r, "enqueue", sys_, "pg", k, "per_s")  # noqa: E731
    out.append(
        (
            "enqueue single (raw: INSERT + pg_notify, one statement)",
            "/s",
            True,
            e("jobq", "single"),
            e("huey", "single"),
            e("procrastinate", "single"),
            e("raw", "single"),
        )
    )
    out.append(
        (
            "enqueue single vs raw bare INSERT",
            "/s",
            True,
            e("jobq", "single"),
            None,
            None,
            e("raw", "single_insert"),
        )
    )
    out.append(
        (
            "enqueue single vs raw BEGIN; INSERT; NOTIFY; COMMIT",
            "/s",
            True,
            e("jobq", "single"),
            None,
            None,
            e("raw", "single_tx"),
        )
    )
    out.append(
        (
            "enqueue batched (1,000/tx; Huey by hand)",
            "/s",
            True,
            e("jobq", "batched"),
            e("huey", "batched"),
            e("procrastinate", "batched"),
            e("raw", "batched"),
        )
    )
    for kind, name in (
        ("due", "all due"),
        ("future90", "90% future"),
        ("finished90", "90% finished"),
    ):
        for d in depths:
            out.append(
                (
                    f"depth {d:,} pending, {name}: claim+complete",
                    "/s",
                    True,
                    dig(r, "depth", "jobq", "pg", str(d), kind, "per_s"),
                    None,
                    None,
                    dig(r, "depth", "raw", "pg", str(d), kind, "per_s"),
                )
            )
        for d in depths:
            out.append(
                (
                    f"depth {d:,} pending, {name}: one claim",
                    "ms",
                    False,
                    dig(r, "depth", "jobq", "pg", str(d), kind, "claim_ms"),
                    None,
                    None,
                    dig(r, "depth", "raw", "pg", str(d), kind, "claim_ms"),
                )
            )
    return out


_LAT = (("jobq", "pg"), ("huey", "pg"), ("procrastinate", "1xW"), ("raw", "pg"))


def table(results: dict, workers: list[int], depths: list[int]) -> str:
    lines = [
        "| figure | jobq | Huey PG | Procrastinate | raw loop | vs Huey PG | vs Procrastinate | vs raw |",
        "|" + "---|" * 8,
    ]
    for label, unit, hib, j, h, p, r in rows(results, workers, depths):
        if all(v is None for v in (j, h, p, r)):
            continue
        cells = [
            f"{label} ({unit})",
            *(fmt(v, unit) for v in (j, h, p, r)),
            *(ratio(j, v, hib) for v in (h, p, r)),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _ratio_check(name: str, a: Any, b: Any, factor: float, what: str) -> list[dict[str, Any]]:
    a, b = _num(a), _num(b)
    if a is None or b is None:
        return []
    shown = f"{factor:g}x" if factor >= 1 else f"{100 * factor:g}% of"
    return [
        verdict(
            f"{name} >= {shown} {what}", f"{a:,.0f} vs {b:,.0f}/s = {a / b:.2f}x", a >= factor * b
        )
    ]


def check(results: dict, depths: list[int]) -> list[dict[str, Any]]:
    """The PostgreSQL engine's targets (8 workers; the largest worker count run when 8 was not)."""
    r, out = results, []
    ws = sorted(int(w) for w in (dig(r, "burn", "jobq", "pg") or {}) if str(w).isdigit())
    w = "8" if 8 in ws else (str(ws[-1]) if ws else "8")
    j = dig(r, "burn", "jobq", "pg", w, "per_s")
    out += _ratio_check(
        f"burn-down (W={w})", j, dig(r, "burn", "huey", "pg", w, "per_s"), 8, "Huey PG"
    )
    best_p = _best(
        dig(r, "burn", "procrastinate", "1xW", w, "per_s"),
        dig(r, "burn", "procrastinate", "Wx1", w, "per_s"),
    )
    out += _ratio_check(f"burn-down (W={w})", j, best_p, 30, "Procrastinate (its better layout)")
    out += _ratio_check(
        f"burn-down (W={w})",
        j,
        dig(r, "burn", "raw", "100", w, "per_s"),
        0.7,
        "the raw 100-per-transaction loop",
    )
    for key, q, limit in (("start", "p50", 4.0), ("start", "p99", 10.0), ("cpu_pct", None, 2.0)):
        v = _num(dig(r, "idle", "jobq", "pg", *((key, q) if q else (key,))))
        if v is not None:
            unit = "% of a core (tree + its backends)" if q is None else " ms"
            name = "idle CPU" if q is None else f"idle enqueue-to-start {q}"
            out.append(verdict(f"{name} <= {limit:g}{unit}", f"{v:.2f}{unit}", v <= limit))
    e = lambda sys_, k: dig(r, "enqueue", sys_, "pg", k, "per_s")  # noqa: E731
    out += _ratio_check("enqueue single", e("jobq", "single"), e("huey", "single"), 3, "Huey PG")
    out += _ratio_check(
        "enqueue single", e("jobq", "single"), e("procrastinate", "single"), 3, "Procrastinate"
    )
    out += _ratio_check(
        "enqueue single",
        e("jobq", "single"),
        e("raw", "single"),
        0.9,
        "raw one-statement INSERT + pg_notify",
    )
    out += _ratio_check(
        "enqueue batched", e("jobq", "batched"), e("raw", "batched"), 0.9, "raw batched insert"
    )
    if len(depths) > 1:
        lo, hi = str(min(depths)), str(max(depths))
        for kind, name in (
            ("due", "all due"),
            ("future90", "90% scheduled ahead"),
            ("finished90", "90% of the table finished jobs"),
        ):
            out += _ratio_check(
                f"claims/s at {int(hi):,} pending ({name})",
                dig(r, "depth", "jobq", "pg", hi, kind, "per_s"),
                dig(r, "depth", "jobq", "pg", lo, kind, "per_s"),
                0.9,
                f"those at {int(lo):,}",
            )
    return out
