"""Which named queues this worker claims from (docs/queues.md).

The supervisor lays its slots out pool after pool (``shared.model.queues.plan``); a worker looks its
slot up in the config snapshot at start and again after each reload (SIGHUP), so a pool resized
or a queue moved in ``jobq.toml`` reaches running workers without a restart: the job in hand
finishes, the next claim takes the new queues. Idle workers of one pool share their own idle
lead, so a new job of a queue wakes a worker that may claim it.
"""

from __future__ import annotations

from typing import Any

from shared.runtime.logs import event, get_logger
from shared.model.queues import slot_queues

log = get_logger("worker")


def serve_queues(worker: Any) -> None:
    """Point ``worker``'s store at its slot's queues; a changed set gets a new idle wait (a
    lead of its new pool). Logged (``worker.queues``) when the set changes."""
    store = worker.store
    if store is None:
        return
    before = store.serving_tag()
    queues = slot_queues(worker.config, worker.slot)
    store.serve(queues)
    if store.serving_tag() == before and worker.wakeup is not None:
        return
    if worker.wakeup is not None:
        worker.wakeup.close()
        worker.wakeup = store.wakeup()
    event(
        log,
        "worker.queues",
        slot=worker.slot,
        pid=worker.pid,
        queues="*" if queues is None else ",".join(n for n, _ in queues) or "-",
    )
