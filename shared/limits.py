"""Per-type limits from ``[types."<job type>"]``: ``concurrency`` and ``rate``.

The worker claims with :func:`claim` (or calls the store itself, choosing as it does): the fast
unlimited ``claim`` of the store while no type has a limit, ``claim_limited`` once
one does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .durations import parse_rate
from .job import Job


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


def claim(store: Any, config: Any, owner: str, owner_pid: int, now: float, limit: int = 1) -> list[Job]:
    """Claim up to ``limit`` jobs, honouring the limits of ``config`` if it has any."""
    limits = type_limits(config)
    if limits:
        return store.claim_limited(owner, owner_pid, now, limits, limit)
    return store.claim(owner, owner_pid, now, limit)
