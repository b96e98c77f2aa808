"""Small statistics helpers: percentiles and latency summaries in milliseconds."""

from __future__ import annotations

from typing import Iterable


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation; ``values`` need not be sorted."""
    if not values:
        raise ValueError("percentile of no values")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def latency_ms(seconds: Iterable[float], expected: int | None = None) -> dict[str, float | int]:
    """p50/p99/max/mean of latencies given in seconds, reported in ms; ``missing`` counts jobs
    that never started (when ``expected`` is given)."""
    xs = [s * 1000.0 for s in seconds]
    out: dict[str, float | int] = {"n": len(xs)}
    if expected is not None:
        out["missing"] = expected - len(xs)
    if xs:
        out.update(
            p50=round(percentile(xs, 50), 3),
            p99=round(percentile(xs, 99), 3),
            max=round(max(xs), 3),
            mean=round(sum(xs) / len(xs), 3),
        )
    return out


def rate(count: int, seconds: float) -> dict[str, float | int]:
    """A throughput figure: ``count`` things in ``seconds``."""
    return {
        "count": count,
        "seconds": round(seconds, 4),
        "per_s": round(count / seconds, 1) if seconds > 0 else None,
    }
