"""The overview page's data: the ``status`` snapshot, a per-minute chart of the last hour, and
the wait/run percentiles.

The chart follows ``job_attempts`` incrementally (like ``top``): the first refresh reads the
hour's attempts, later ones only the attempts that ended since, so a live update costs the new
attempts, not the hour. One :class:`Chart` lives with the app (one per server, one thread).
"""

from __future__ import annotations

from typing import Any

from shared import ops
from shared.ops import activity
from shared.runtime.clock import iso, parse_iso
from supervisor.views import snapshot as status

MINUTES = 60
SERIES = ("completed", "failed", "retried")


class Chart:
    """Completed, failed and retried attempts per minute over the last :data:`MINUTES`."""

    def __init__(self) -> None:
        self.db: str | None = None
        self.seq = 0
        self.per: dict[str, dict[str, int]] = {}

    def refresh(self, store: Any, now: float) -> list[dict[str, Any]]:
        """Fold the attempts ended since the last refresh; the last hour, oldest minute first."""
        start = (int(now // 60) - (MINUTES - 1)) * 60.0
        last = ops.last_attempt_seq(store)
        if self.db != store.location or last < self.seq:  # another database, or history purged
            self.db, self.per = store.location, {}
            self.seq = activity.first_attempt_since(store, start) - 1
        if last > self.seq:
            for r in activity.attempts_by_minute(store, self.seq, last):
                if r["status"] in SERIES:  # a running job's cancelled attempt is not charted
                    self.per.setdefault(r["minute"], dict.fromkeys(SERIES, 0))[r["status"]] += r[
                        "n"
                    ]
            self.seq = last
        minutes = [iso(start + 60 * i)[:16] for i in range(MINUTES)]
        self.per = {m: c for m, c in self.per.items() if m >= minutes[0]}
        return [{"minute": m, **self.per.get(m, dict.fromkeys(SERIES, 0))} for m in minutes]


def svg_chart(
    per_minute: list[dict[str, Any]], width: int = 1000, height: int = 170
) -> dict[str, Any]:
    """Polyline points for each series of ``per_minute``, scaled into ``width`` x ``height``
    (the template draws them; no script needed)."""
    top = max([max(p[s] for s in SERIES) for p in per_minute] + [1])
    step = width / max(len(per_minute) - 1, 1)
    lines = {
        s: " ".join(
            f"{i * step:.1f},{height - p[s] * height / top:.1f}" for i, p in enumerate(per_minute)
        )
        for s in SERIES
    }
    totals = {s: sum(p[s] for p in per_minute) for s in SERIES}
    return {
        "lines": lines,
        "max": top,
        "width": width,
        "height": height,
        "totals": totals,
        "first": per_minute[0]["minute"][11:] if per_minute else "",
        "last": per_minute[-1]["minute"][11:] if per_minute else "",
    }


def snapshot(store: Any, now: float, config: Any, chart: Chart) -> dict[str, Any]:
    """Everything the overview shows, as of ``now``."""
    snap = status.collect(store, now, detail=False, config=config)
    snap["latency"] = status.latency(store, now)
    snap["chart"] = svg_chart(chart.refresh(store, now))
    for w in snap["workers"]:
        w["up_s"] = max(now - parse_iso(w["started_at"]), 0.0) if w.get("started_at") else None
    return snap
