"""Per-type limits from ``[types."<job type>"]``: ``concurrency`` and ``rate``.

The worker chooses how to claim from :func:`type_limits`: the fast unlimited
``SqliteStore.claim`` while no type has a limit, ``SqliteStore.claim_limited`` once one does.
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

