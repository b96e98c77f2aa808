"""The supervisor's word on queues no worker serves (``shared.model.unserved``; docs/queues.md).

A job on a queue that no pool of the config serves waits forever, silently. So each time the
supervisor's config is new (at boot, after a reload, after ``jobq scale``), the upkeep round
after it logs one ``queue.unserved`` warning per such queue that has pending jobs or a
``[queues]`` table (a table whose queue no pool serves is a mistake even while it is empty):

    queue.unserved queue=newsletters pending=1 note="no worker serves queue newsletters: 1 pending"

The pending counts are read from the claim index (``shared.ops.queues``), once per config.
"""

from __future__ import annotations

import logging
from typing import Any

from shared.runtime.logs import event, get_logger
from shared.model.unserved import sentence

log = get_logger("supervisor")


class UnservedLog:
    """Remembers the config it last looked at, so that each config is looked at once."""

    def __init__(self) -> None:
        self.seen: Any = None

    def check(self, store: Any, config: Any, now: float) -> None:
        """Log the unserved queues of ``config`` (see the module) unless it was looked at."""
        if config is self.seen:
            return
        from shared.ops import queues  # here: the ops layer is not needed before the first workers

        for row in queues.by_queue(store, now, config, sample=0):
            if row["unserved"] and (row["pending"] or row["queue"] in config.queues):
                event(
                    log,
                    "queue.unserved",
                    logging.WARNING,
                    queue=row["queue"],
                    pending=row["pending"],
                    note=sentence(row["queue"], row["pending"]),
                )
        self.seen = config
