"""What one limited claim (:mod:`.limits`) works with, named: what it asks for
(:class:`LimitedAsk`), the state it reads in one statement (:data:`STATE`, :class:`ClaimState`),
the room it works out from that state (:class:`Rooms`), and the time it claims at (:func:`read_now`).

Each is made once per claim and handed whole to the claim's steps, so that no step takes more
than the few things it needs by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, Sequence, Union

from .keys import KeyCounts

if TYPE_CHECKING:
    from shared.model.limits import TypeLimit

# The claim's state in one read: the running rows per (type, key) (``dialect.jobs_running``
# names the index where it must; few rows), the global pause, the latest start counted (see
# claim_limited_in; ``{latest}``: as ISO text, ``dialect.iso``) and each fair type's turn (the
# last key served).
STATE = (
    "SELECT 'run' AS kind, type, limit_key AS k, count(*) AS n FROM {jobs} WHERE status = 'running' "
    "GROUP BY type, limit_key "
    "UNION ALL SELECT 'paused', NULL, NULL, 1 FROM control WHERE name = 'paused' AND value = '1' "
    "UNION ALL SELECT 'latest', NULL, {latest}, 0 FROM (SELECT max(started_at) AS t FROM type_starts "
    "UNION ALL SELECT max(started_at) AS t FROM key_starts) s "
    "UNION ALL SELECT 'turn', type, last_key, 0 FROM key_turns"
)

Now = Union[
    float, Callable[[], float]
]  # a time, or a clock's ``now`` to read once the lock is held


def read_now(now: Now) -> float:
    """The time ``now`` stands for: a time, or a clock's ``now`` to call. A limited claim reads
    its clock once its transaction holds the lock (:meth:`LimitsSql.claim_limited_in`): a time
    read before is older than the claim by however long the claim waited for the lock (SQLite's
    busy handler, PostgreSQL's advisory lock), so its start would be counted as of that older
    time and leave a rate's window early: a later claim would start too soon."""
    return now() if callable(now) else now


@dataclass(frozen=True)
class LimitedAsk:
    """What one limited claim asks for: the claimer (``owner``, ``owner_pid``), the ``limits``
    per type, up to ``limit`` jobs, of ``types`` or ``ids`` only (None: any). Worked out once
    from them: ``rated``, the types with a rate (their own or per key); ``keyed``, the types
    with a per-key limit or fair turns; ``shape``, what a claim's early reads are kept for
    (:meth:`.candidates.CandidatesSql._early_reads`): the limits, the types and the limit."""

    owner: str
    owner_pid: int
    limits: Mapping[str, "TypeLimit"]
    limit: int
    types: Sequence[str] | None
    ids: Sequence[str] | None
    rated: set[str]
    keyed: Mapping[str, "TypeLimit"]
    shape: tuple

    @classmethod
    def of(
        cls,
        owner: str,
        owner_pid: int,
        limits: Mapping[str, "TypeLimit"],
        limit: int,
        types: Sequence[str] | None,
        ids: Sequence[str] | None,
    ) -> "LimitedAsk":
        """The ask of a claim called with these arguments."""
        return cls(
            owner,
            owner_pid,
            limits,
            limit,
            types,
            ids,
            rated={t for t, lim in limits.items() if lim.rate or lim.rate_per_key},
            keyed={t: lim for t, lim in limits.items() if lim.keyed},
            shape=(tuple(limits.values()), None if types is None else tuple(types), limit),
        )


class ClaimState:
    """The :data:`STATE` rows of one limited claim: ``paused``, ``latest`` (the last start
    counted, or None), running jobs ``by_type`` and ``by_key`` ((type, key) -> n), ``turns``."""

    def __init__(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self.paused, self.latest = False, None
        self.by_type: dict[str, int] = {}
        self.by_key: dict[tuple[str, str], int] = {}
        self.turns: dict[str, str] = {}
        for r in rows:
            if r["kind"] == "run":
                self.by_type[r["type"]] = self.by_type.get(r["type"], 0) + r["n"]
                if r["k"] is not None:
                    self.by_key[(r["type"], r["k"])] = r["n"]
            elif r["kind"] == "paused":
                self.paused = True
            elif r["kind"] == "latest":
                self.latest = r["k"]
            else:
                self.turns[r["type"]] = r["k"]


class Rooms(NamedTuple):
    """What a limited claim worked out from its state, as of its time: ``stamp`` (that time, as
    text), each type's ``room`` (inf: unlimited; decremented as jobs are picked) and the keyed
    types' ``counts`` (None: no keyed type)."""

    stamp: str
    room: dict[str, float]
    counts: KeyCounts | None
