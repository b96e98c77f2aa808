"""Per-key limits and the fair claim, written once (issue 26; docs/types.md).

Inside the limited claim (:mod:`.limits`, one transaction that limited claims take in turns),
for each type with ``concurrency_per_key``, ``rate_per_key`` or ``fair``:

- the running jobs and the recent starts are counted per (type, key) (running rows are few; the
  starts are a sliding log per key, ``key_starts``, like ``type_starts`` per type), so a key at
  its limit is skipped, not waited for, across every process and host on the database;
- a fair type's keyed jobs are not taken in claim order but round-robin over its keys: from the
  key after the last one served (``key_turns``), one seek per key on ``jobs_key_claim`` finds
  the next key with a due job, and that key's first job in claim order is its candidate. So a
  key with 10,000 due jobs gets one turn per round, like a key with one.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping

from .base import SqlBase
from .jobs import CLAIM_ORDER
from .queues import QUEUE_FREE

if TYPE_CHECKING:
    from ...limits import TypeLimit

MAX_PROBES = 64  # keys looked at per fair type and claim (keys at their limit are stepped over)

ROW = "id, type, limit_key, priority, run_at, created_at"
RUNNING_BY_KEY = ("SELECT type, limit_key, count(*) AS n FROM {jobs} WHERE status = 'running' "
                  "AND limit_key IS NOT NULL GROUP BY type, limit_key")
_FORGET = "DELETE FROM key_starts WHERE type = :type AND started_at <= :since"
_USED = "SELECT limit_key, count(*) AS n FROM key_starts WHERE type = :type GROUP BY limit_key"
_START = "INSERT INTO key_starts (type, limit_key, started_at) VALUES (:type, :key, :now)"
_TURN = "SELECT last_key FROM key_turns WHERE type = :type"
_SET_TURN = ("INSERT INTO key_turns (type, last_key) VALUES (:type, :key) "
             "ON CONFLICT (type) DO UPDATE SET last_key = excluded.last_key")
_NEXT_KEY = (f"SELECT limit_key FROM jobs WHERE type = :type AND status = 'pending' AND limit_key IS NOT NULL "
             f"AND limit_key > :after AND run_at <= :now AND {QUEUE_FREE} {{extra}}ORDER BY limit_key LIMIT 1")
_HEAD = (f"SELECT {ROW} FROM jobs WHERE type = :type AND limit_key = :key AND status = 'pending' "
         f"AND run_at <= :now AND {QUEUE_FREE} {{extra}}{CLAIM_ORDER} LIMIT 1")


class KeyCounts:
    """Running jobs and recent starts per (type, key), as of one limited claim."""

    def __init__(self, running: dict[tuple[str, str], int], used: dict[tuple[str, str], int]) -> None:
        self.running, self.used = running, used

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
        keys = {k for t, k in (*self.running, *self.used) if t == lim.type}
        return sorted(k for k in keys if self.room(lim, k) <= 0)


class KeysSql(SqlBase):
    """The per-key counts, the fair walk over keys, and the bookkeeping of a claim's starts."""

    def _key_counts(self, c: Any, limits: Mapping[str, "TypeLimit"], now: float, stamp_since: Any) -> KeyCounts:
        """Count per key for the keyed types of ``limits`` (forgetting starts older than each
        rate's period: ``stamp_since(period)`` gives the cut-off text)."""
        running = {(r["type"], r["limit_key"]): r["n"] for r in
                   self._run(c, RUNNING_BY_KEY.format(jobs=self.dialect.jobs_running)).fetchall()}
        used: dict[tuple[str, str], int] = {}
        for t, lim in limits.items():
            if lim.rate_per_key is not None:
                self._run(c, _FORGET, {"type": t, "since": stamp_since(lim.rate_per_key[1])})
                used.update({(t, r["limit_key"]): r["n"] for r in self._run(c, _USED, {"type": t}).fetchall()})
        return KeyCounts(running, used)

    def _fair_candidates(self, c: Any, lim: "TypeLimit", counts: KeyCounts, stamp: str, want: int,
                        extra: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Up to ``want`` due jobs of a fair type, one per key with room, in turn from the key
        after the last one served (wrapping round once)."""
        last = self._run(c, _TURN, {"type": lim.type}).fetchone()
        start = last["last_key"] if last else ""
        out: list[dict[str, Any]] = []
        after, wrapped, probes = start, False, 0
        while len(out) < want and probes < MAX_PROBES:
            row = self._run(c, _NEXT_KEY.format(extra=extra), {**params, "type": lim.type, "after": after,
                                                               "now": stamp}).fetchone()
            key = row["limit_key"] if row else None
            if key is None or (wrapped and key > start):
                if wrapped or not start:
                    break
                after, wrapped = "", True
                continue
            after, probes = key, probes + 1
            if counts.room(lim, key) > 0:
                head = self._run(c, _HEAD.format(extra=extra), {**params, "type": lim.type, "key": key,
                                                                "now": stamp}).fetchone()
                if head is not None:
                    out.append(dict(head))
            if wrapped and key == start:
                break
        return out

    def _record_keys(self, c: Any, taken: list[tuple[str, str | None]], limits: Mapping[str, "TypeLimit"],
                    stamp: str) -> None:
        """After a claim took ``taken`` ((type, key) in claim order): count the starts of keys
        with a rate, and move each fair type's turn to the last key it served."""
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
            self._run(c, _SET_TURN, {"type": t, "key": key})
