"""Per-type limits from ``[types."<job type>"]``: ``concurrency`` and ``rate``.

The worker chooses how to claim from :func:`type_limits`: the store's fast unlimited
``claim`` while no type has a limit, ``claim_limited`` once one does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .durations import parse_rate


@dataclass(frozen=True)
class TypeLimit:
    """One type's limits: at most ``concurrency`` running at once, at most ``rate[0]`` claims
    in any ``rate[1]`` seconds. None: no such limit."""
    type: str
    concurrency: int | None = None
    rate: tuple[int, float] | None = None


def type_limits(config: Any) -> dict[str, TypeLimit]:
    """The types of ``config`` that have a concurrency or rate limit (empty: none has)."""
    out = {}
    for name, t in config.types.items():
        if t.concurrency is not None or t.rate is not None:
            out[name] = TypeLimit(name, t.concurrency, parse_rate(t.rate) if t.rate else None)
    return out



def pick_claims(candidates: list[tuple[str, str]], room: dict[str, float], rated: set[str],
                limit: int) -> list[str]:
    """Which of ``candidates`` ((id, type) in claim order) a limited claim takes: at most
    ``limit``, within each type's ``room`` (decremented here), and a job of a rate-limited type
    (``rated``) only first in a batch, ending it (so it starts at once: its start is counted
    now). Engine-neutral: both engines' limited claims call it."""
    out: list[str] = []
    for job_id, job_type in candidates:
        if len(out) == limit:
            break
        if room.get(job_type, 1) <= 0 or (out and job_type in rated):
            continue
        out.append(job_id)
        if job_type in room:
            room[job_type] -= 1
        if job_type in rated:
            break
    return out
