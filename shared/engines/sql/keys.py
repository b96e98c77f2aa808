"""Per-key limits and the fair claim, written once (docs/types.md).

Inside the limited claim (:mod:`.limits`, one transaction that limited claims take in turns),
for each type with ``concurrency_per_key``, ``rate_per_key`` or ``fair``:

- the running jobs are counted per (type, key) from the running rows (few; read with the claim's
  other state in one statement, so a dead worker's job re-queued frees its key's slot at once),
  and the recent starts from a sliding log per key, ``key_starts`` (like ``type_starts`` per
  type): a key at its limit is skipped, not waited for, across every process and host;
- a fair type's keyed jobs are not taken in claim order but round-robin over its keys, in ONE
  statement (:data:`WALK`): from the key after the last one served (``key_turns``), a recursive
  walk seeks the next key with a due job on ``jobs_key_claim`` (``limit_key > k ORDER BY
  limit_key LIMIT 1``: one index seek per key, whatever the depth), stepping over keys at their
  limit, until it has as many keys with room as the claim wants (or :data:`MAX_PROBES`); each
  such key's first job in claim order is its candidate. A key with 10,000 due jobs gets one turn
  per round, like a key with one.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, Tuple

from .base import SqlBase
from .jobs import CLAIM_ORDER
from .queues import QUEUE_FREE

if TYPE_CHECKING:
    from shared.model.limits import TypeLimit

Walked = Tuple[list, int, bool]  # a walk's candidates, keys looked at, whether the keys ran out
MAX_PROBES = 64  # keys looked at per fair type and claim (keys at their limit are stepped over)

ROW = "id, type, limit_key, priority, run_at, created_at"
_FORGET = "DELETE FROM key_starts WHERE type = :type AND started_at <= :since"
_USED = "SELECT limit_key, count(*) AS n FROM key_starts WHERE type = :type GROUP BY limit_key"
_START = "INSERT INTO key_starts (type, limit_key, started_at) VALUES (:type, :key, :now)"
SET_TURN = (
    "INSERT INTO key_turns (type, last_key) VALUES (:turn_type, :turn_key) "
    "ON CONFLICT (type) DO UPDATE SET last_key = excluded.last_key"
)
# The next key of the type after {after} (bounded by {upto}) with a due job this claim may take.
_NEXT = (
    f"SELECT limit_key FROM jobs WHERE type = :type AND status = 'pending' AND limit_key IS NOT NULL "
    f"AND limit_key > {{after}} {{upto}}AND run_at <= :now AND {QUEUE_FREE} {{extra}}"
    f"ORDER BY limit_key LIMIT 1"
)
# The first pass of a fair walk starts after the type's turn as the statement reads it: its reads
# need nothing the claim's state read answers, so they may be sent with it (candidates._early_reads).
FROM_TURN = "coalesce((SELECT last_key FROM key_turns WHERE type = :type), '')"
# The fair walk: (k, n: keys seen, got: keys with room before k) per step, stopping once the keys
# seen hold :want with room, or at :probes keys; then each key with room, its head in claim
# order. ``{room}``: walk.k may start one more (it is not one of the keys at their limit). A last
# row with k NULL: the keys ran out.
_HAS_ROOM = "CASE WHEN {room} THEN 1 ELSE 0 END"
WALK = (
    f"WITH RECURSIVE walk(k, n, got) AS ("
    f"SELECT ({_NEXT.format(after='{after}', upto='{upto}', extra='{extra}')}), 1, 0 "
    f"UNION ALL "
    f"SELECT ({_NEXT.format(after='walk.k', upto='{upto}', extra='{extra}')}), walk.n + 1, "
    f"walk.got + {_HAS_ROOM} FROM walk "
    f"WHERE walk.k IS NOT NULL AND walk.n < :probes AND walk.got + {_HAS_ROOM} < :want) "
    f"SELECT walk.k AS walk_key, j.id, j.type, j.limit_key, j.priority, j.run_at, j.created_at FROM walk "
    f"LEFT JOIN jobs j ON walk.k IS NOT NULL AND {{room}} AND j.id = ("
    f"SELECT id FROM jobs WHERE type = :type AND limit_key = walk.k AND status = 'pending' "
    f"AND run_at <= :now AND {QUEUE_FREE} {{extra}}{CLAIM_ORDER} LIMIT 1) ORDER BY walk.n"
)


class KeyCounts:
    """Running jobs and recent starts per (type, key), as of one limited claim."""

    def __init__(
        self, running: dict[tuple[str, str], int], used: dict[tuple[str, str], int]
    ) -> None:
        self.running, self.used = running, used
        self._full: dict[str, list[str]] = {}  # per type, as first worked out (one claim's counts)

    def room(self, lim: "TypeLimit", key: str | None) -> float:
        """How many more jobs of ``key`` may start now (inf: no per-key limit, or no key)."""
        if key is None:
            return math.inf
        room = math.inf
        if lim.concurrency_per_key is not None:
            room = lim.concurrency_per_key - self.running.get((lim.type, key), 0)
        if lim.rate_per_key is not None:
            room = min(room, lim.rate_per_key[0] - self.used.get((lim.type, key), 0))
        return room

    def full(self, lim: "TypeLimit") -> list[str]:
        """The keys of ``lim``'s type with no room now."""
        if lim.type not in self._full:
            keys = {k for t, k in (*self.running, *self.used) if t == lim.type}
            self._full[lim.type] = sorted(k for k in keys if self.room(lim, k) <= 0)
        return self._full[lim.type]


def _walked(cur: Any) -> Walked:
    """A pass of :data:`WALK`, answered: its candidates, the keys it looked at, and whether
    the keys ran out."""
    rows = cur.fetchall()
    seen = sum(1 for r in rows if r["walk_key"] is not None)
    ran_out = bool(rows) and rows[-1]["walk_key"] is None
    return (
        [{k: r[k] for k in ROW.split(", ")} for r in rows if r["id"] is not None],
        seen,
        ran_out,
    )


class FairWalk(NamedTuple):
    """One fair type's walk over its keys in a limited claim: the type's limit (``lim``), its
    keys at their limit (``full``), the claim's time (``stamp``), and the ``extra`` ``AND``
    fragments of the candidate reads (the queues served) with their ``params``."""

    lim: "TypeLimit"
    full: list[str]
    stamp: str
    extra: str
    params: dict[str, Any]


class KeysSql(SqlBase):
    """The per-key counts, the fair walk over keys, and the bookkeeping of a claim's starts."""

    def _key_counts(
        self,
        c: Any,
        limits: Mapping[str, "TypeLimit"],
        running: dict[tuple[str, str], int],
        stamp_since: Any,
    ) -> KeyCounts:
        """Per-key counts for the keyed types of ``limits``: ``running`` as read, and the starts
        within each rate's period (forgetting older ones: ``stamp_since(period)`` gives the
        cut-off text)."""
        used: dict[tuple[str, str], int] = {}
        for t, lim in limits.items():
            if lim.rate_per_key is not None:
                self._run(c, _FORGET, {"type": t, "since": stamp_since(lim.rate_per_key[1])})
                used.update(
                    {
                        (t, r["limit_key"]): r["n"]
                        for r in self._run(c, _USED, {"type": t}).fetchall()
                    }
                )
        return KeyCounts(running, used)

    def _fair_candidates(
        self, c: Any, walk: FairWalk, want: int
    ) -> Callable[[Mapping[str, str]], list[dict[str, Any]]]:
        """Up to ``want`` due jobs of a fair type, one per key with room (not in ``walk.full``),
        in turn from the key after the last one served, wrapping round once: one statement per
        pass. The first pass is sent now; the returned function, given the turns the claim read,
        reads its answer (and runs the second pass, up to the type's turn, when the keys ran
        out)."""
        first = self._walk(c, walk, want, MAX_PROBES)

        def result(turns: Mapping[str, str]) -> list[dict[str, Any]]:
            out, seen, ran_out = first()
            start = turns.get(walk.lim.type, "")
            if ran_out and start and len(out) < want and seen < MAX_PROBES:
                more, _, _ = self._walk(c, walk, want - len(out), MAX_PROBES - seen, "", start)()
                out += more
            return out

        return result

    def _walk(
        self,
        c: Any,
        walk: FairWalk,
        want: int,
        probes: int,
        after: str | None = None,
        upto: str | None = None,
    ) -> Callable[[], Walked]:
        """Send one pass of :data:`WALK` over the keys after ``after`` (None: the type's turn,
        read by the statement) up to ``upto`` (included), for ``want`` keys with room, looking
        at ``probes`` keys at most; the returned function reads its candidates, how many keys it
        looked at, and whether the keys ran out."""
        cur = self._run(
            c,
            self._walk_sql(walk, after, upto),
            {
                **walk.params,
                "wfull": self.dialect.list_param(walk.full),
                "type": walk.lim.type,
                "after": after,
                "upto": upto,
                "now": walk.stamp,
                "want": want,
                "probes": probes,
            },
        )
        return functools.partial(_walked, cur)

    def _walk_sql(self, walk: FairWalk, after: str | None, upto: str | None) -> str:
        """The text of one pass of :data:`WALK` (see :meth:`_walk`)."""
        # the full keys as one list parameter: one statement text, however many keys are full
        room = f"NOT ({self.dialect.any_of.format(col='walk.k', param=':wfull')})"
        return WALK.format(
            after=FROM_TURN if after is None else ":after",
            extra=walk.extra,
            room=room,
            upto="AND limit_key <= :upto " if upto is not None else "",
        )

    def _record_keys(
        self,
        c: Any,
        taken: list[tuple[str, str | None]],
        limits: Mapping[str, "TypeLimit"],
        stamp: str,
    ) -> None:
        """After a claim took ``taken`` ((type, key) in claim order): count the starts of keys
        with a rate, and move each fair type's turn to the last key it served (an engine whose
        writes ride in a ``WITH`` does both in the claim statement instead: ``limits._claim_with``)."""
        turns: dict[str, str] = {}
        for t, key in taken:
            lim = limits.get(t)
            if lim is None or key is None:
                continue
            if lim.rate_per_key is not None:
                self._run(c, _START, {"type": t, "key": key, "now": stamp})
            if lim.fair:
                turns[t] = key
        for t, key in turns.items():
            self._run(c, SET_TURN, {"turn_type": t, "turn_key": key})
