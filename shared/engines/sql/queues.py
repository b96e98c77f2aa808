"""Named queues in the claim and the pause of one queue, written once.

A worker of a pool is told its queues (:meth:`QueueServing.serve`); each claim then tries them
in the order :class:`shared.model.queues.QueueOrder` draws, one statement per queue (``queue = ?``,
on the ``jobs_queue_claim`` index: a claim costs what the plain claim costs), until one gives
jobs. A worker that serves every queue keeps the plain claim, which skips jobs of a paused
queue. A queue is paused by a ``control`` row ``paused:<queue>`` = ``'1'``, read inside the claim
statement itself, so a pause holds from the next claim on, on every host.
"""

from __future__ import annotations

import hashlib
from typing import Callable, Sequence, TypeVar

from shared.model.queues import QueueOrder, Weighted
from .base import SqlBase

T = TypeVar("T")

PAUSE_PREFIX = "paused:"  # control row of a paused queue: PAUSE_PREFIX + its name
# The plain claim's filter: not a job of a paused queue. The uncorrelated test comes first: while
# no queue is paused (the usual case) the row's queue is never read.
QUEUE_FREE = (
    "(NOT EXISTS (SELECT 1 FROM control WHERE name > 'paused:' AND name < 'paused;' AND value = '1') "
    "OR NOT EXISTS (SELECT 1 FROM control WHERE name = 'paused:' || jobs.queue AND value = '1'))"
)
# One queue's claim filter; ``{q}``: the engine's spelling of the ``queue`` parameter.
IN_QUEUE = "queue = {q} AND NOT EXISTS (SELECT 1 FROM control WHERE name = 'paused:' || {q} AND value = '1')"

_SET = (
    "INSERT INTO control (name, value) VALUES (:name, :value) "
    "ON CONFLICT (name) DO UPDATE SET value = excluded.value"
)
_GET = "SELECT value FROM control WHERE name = :name"
_PAUSED = "SELECT name FROM control WHERE name > 'paused:' AND name < 'paused;' AND value = '1' ORDER BY name"


def first_claimed(order: Sequence[str | None], claim: Callable[[str | None], list[T]]) -> list[T]:
    """``claim(queue)`` for each queue of ``order`` until one returns jobs (None: every queue)."""
    for queue in order:
        got = claim(queue)
        if got:
            return got
    return []


class QueueServing(SqlBase):
    """The queues a worker's store claims from, and the pause of one queue."""

    serving: QueueOrder | None = None  # None: every queue (the plain claim)

    def serve(self, queues: Weighted | None) -> None:
        """Claims take only jobs of ``queues`` ((name, weight) pairs; tried in a weighted random
        order drawn per claim) from now on; None: of every queue; empty: none."""
        self.serving = None if queues is None else QueueOrder(queues)

    def claim_order(self) -> Sequence[str | None]:
        """The queues the next claim tries, in order (``[None]``: every queue at once)."""
        return [None] if self.serving is None else self.serving.draw()

    def serving_tag(self) -> str:
        """A short name for the queue set served ("" for every queue): the idle workers of one
        pool elect their own lead (``shared.engines.idlelead``)."""
        if self.serving is None:
            return ""
        return "." + hashlib.sha1(",".join(sorted(self.serving.names)).encode()).hexdigest()[:10]

    def serving_slot(self) -> int:
        """The byte of the idle-lead file this queue set locks (0: every queue, as before)."""
        tag = self.serving_tag()
        return int(hashlib.sha256(tag.encode()).hexdigest()[:15], 16) if tag else 0

    def serving_names(self) -> list[str] | None:
        return None if self.serving is None else list(self.serving.names)

    def set_queue_paused(self, queue: str, paused: bool) -> None:
        """Pause or resume one queue (one statement; it wakes idle workers where the engine
        notifies)."""
        params = {
            "name": PAUSE_PREFIX + queue,
            "value": "1" if paused else "0",
            "channel": self.channel,
        }
        self._write(lambda c: self._run(c, self.dialect.waking(_SET), params))

    def is_queue_paused(self, queue: str) -> bool:
        return bool(self._value(_GET, {"name": PAUSE_PREFIX + queue}) == "1")

    def paused_queues(self) -> list[str]:
        """The queues paused now (by ``jobq pause --queue``, the API or the dashboard)."""
        return [r["name"][len(PAUSE_PREFIX) :] for r in self._rows(_PAUSED)]
