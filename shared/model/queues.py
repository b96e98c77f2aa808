"""Named queues and their worker pools (docs/queues.md).

Every job belongs to one queue (``"default"`` unless named). Without ``[queues]`` tables a
supervisor's workers form one pool that serves every queue, as before queues existed. With them,
a queue with ``workers`` has a pool of its own; the others (and ``default`` when it has no table)
share the rest of ``[supervisor] workers``, each claim taking a queue first at random by
``weight`` (Sidekiq's weighted queues) and falling back to the others in the same draw.
``[supervisor] queues`` (``--queues a,b``) narrows a supervisor to some queues.

A supervisor's slots are laid out pool after pool (:func:`plan`); a worker finds its pool from
its slot number and the config snapshot (:func:`slot_queues`), so a reload that resizes pools
needs nothing but the new snapshot and a SIGHUP: each worker looks its slot up again.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Sequence

from shared.model.queuenames import DEFAULT_QUEUE

Weighted = tuple[tuple[str, int], ...]  # (queue name, weight) pairs


@dataclass(frozen=True)
class Pool:
    """``workers`` slots serving ``queues`` (None: every queue, unfiltered); ``name``: the queue
    whose own pool this is, or ``""`` for the shared pool."""

    name: str
    workers: int
    queues: Weighted | None


def plan(config: Any) -> list[Pool]:
    """The pools of ``config``, in slot order: the queues' own pools (as the tables list them),
    then the shared pool (``[supervisor] workers`` minus the own pools' workers, when some queue
    is left to it). A queue paused in ``jobq.toml`` keeps its pool but is claimed by none."""
    only = tuple(config.supervisor.queues)
    if not config.queues:
        served = None if not only else tuple((q, 1) for q in only)
        return [Pool("", config.supervisor.workers, served)]
    wanted = [n for n in config.queues if not only or n in only]
    own = [
        Pool(n, config.queues[n].workers, _live(config, ((n, 1),)))
        for n in wanted
        if config.queues[n].workers is not None
    ]
    rest: dict[str, int] = {
        n: config.queues[n].weight or 1 for n in wanted if config.queues[n].workers is None
    }
    for n in only or (DEFAULT_QUEUE,):
        if n not in config.queues:
            rest.setdefault(n, 1)
    left = max(0, config.supervisor.workers - sum(p.workers for p in own))
    return own + ([Pool("", left, _live(config, tuple(rest.items())))] if rest and left else [])


def _live(config: Any, queues: Weighted) -> Weighted:
    """``queues`` without those ``[queues.NAME] paused = true`` leaves unclaimed."""
    return tuple((n, w) for n, w in queues if not (n in config.queues and config.queues[n].paused))


def total_workers(config: Any) -> int:
    """How many worker slots the supervisor keeps: every pool's workers."""
    return sum(p.workers for p in plan(config))


def slot_queues(config: Any, slot: int | None) -> Weighted | None:
    """The queues the worker in ``slot`` claims from (None: every queue). A worker with no slot
    (run by hand) serves what all the pools serve; a slot past the last pool (retiring), nothing."""
    pools = plan(config)
    if slot is None:
        if any(p.queues is None for p in pools):
            return None
        merged: dict[str, int] = {}
        for p in pools:
            merged.update(p.queues or ())
        return tuple(merged.items())
    for p in pools:
        if slot < p.workers:
            return p.queues
        slot -= p.workers
    return ()


class QueueOrder:
    """The order a worker tries its queues in, drawn again for each claim: weighted at random
    without replacement (a queue of weight 3 comes first three times as often as one of weight
    1), so no queue starves while another has a backlog. ``rng``: injected for tests."""

    def __init__(self, queues: Weighted, rng: random.Random | None = None) -> None:
        self.queues = tuple(queues)
        self.names = tuple(n for n, _ in self.queues)
        self.rng = rng or random.Random()

    def draw(self) -> Sequence[str]:
        if len(self.queues) < 2:
            return self.names
        left = list(self.queues)
        out = []
        while left:
            pick = self.rng.uniform(0, sum(w for _, w in left))
            for i, (name, w) in enumerate(left):
                pick -= w
                if pick <= 0 or i == len(left) - 1:
                    out.append(name)
                    del left[i]
                    break
        return out
