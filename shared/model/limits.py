"""Per-type limits from ``[types."<job type>"]``: ``concurrency`` and ``rate``.

The worker chooses how to claim from :func:`type_limits`: the store's fast unlimited
``claim`` while no type has a limit, ``claim_limited`` once one does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.settings.durations import parse_rate


@dataclass(frozen=True)
class TypeLimit:
    """One type's limits: at most ``concurrency`` running at once, at most ``rate[0]`` claims
    in any ``rate[1]`` seconds. None: no such limit."""

    type: str
    concurrency: int | None = None
    rate: tuple[int, float] | None = None
    concurrency_per_key: int | None = None  # the same, per limit key (shared.model.keys)
    rate_per_key: tuple[int, float] | None = None
    fair: bool = False  # round-robin across keys (shared.engines.sql.keys)

    @property
    def keyed(self) -> bool:
        return self.concurrency_per_key is not None or self.rate_per_key is not None or self.fair


def type_limits(config: Any) -> dict[str, TypeLimit]:
    """The types of ``config`` that have a concurrency or rate limit, per type or per key, or
    are fair (empty: none has)."""
    out = {}
    for name, t in config.types.items():
        lim = TypeLimit(
            name,
            t.concurrency,
            parse_rate(t.rate) if t.rate else None,
            t.concurrency_per_key,
            parse_rate(t.rate_per_key) if t.rate_per_key else None,
            bool(t.fair),
        )
        if lim.concurrency is not None or lim.rate is not None or lim.keyed:
            out[name] = lim
    return out


def pick_claims(
    candidates: list[tuple[str, str]],
    room: dict[str, float],
    rated: set[str],
    limit: int,
    key_room: dict[tuple[str, str], float] | None = None,
) -> list[str]:
    """Which of ``candidates`` ((id, type) in claim order) a limited claim takes: at most
    ``limit``, within each type's ``room`` (decremented here), and a job of a rate-limited type
    (``rated``) only first in a batch, ending it (so it starts at once: its start is counted
    now). Engine-neutral: both engines' limited claims call it. A candidate (id, type, key)
    also needs room in ``key_room`` ((type, key) -> room; absent: unlimited)."""
    out: list[str] = []
    key_room = key_room if key_room is not None else {}
    for job_id, job_type, *key in candidates:
        if len(out) == limit:
            break
        kr = (job_type, key[0]) if key and key[0] is not None else None
        if (
            room.get(job_type, 1) <= 0
            or (out and job_type in rated)
            or (kr and key_room.get(kr, 1) <= 0)
        ):
            continue
        out.append(job_id)
        if kr in key_room:
            key_room[kr] -= 1  # type: ignore[index]
        if job_type in room:
            room[job_type] -= 1
        if job_type in rated:
            break
    return out
