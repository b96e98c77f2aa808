"""The SQLite engine's own upkeep task for the supervisor: WAL checkpoints.

A TRUNCATE checkpoint when the WAL has grown past ``[sqlite] wal_checkpoint_mb``; when the
queue is idle (no running jobs, none checkpointed for IDLE_CHECKPOINT_EVERY seconds) a PASSIVE
one, which copies the WAL into the database but keeps the file's length (commits then overwrite
it instead of growing it, and a growing file makes each fsync costlier).
"""

from __future__ import annotations

import logging

from shared.engines.contract import CLUSTER, Round, UpkeepTask
from shared.runtime.logs import event, get_logger

log = get_logger("supervisor")

IDLE_CHECKPOINT_EVERY = 10.0


def checkpoint_mode(wal_bytes: int, limit_mb: float, idle: bool) -> str | None:
    """TRUNCATE past ``limit_mb``; PASSIVE when ``idle`` and the WAL is not empty; else none."""
    if wal_bytes > limit_mb * (1 << 20):
        return "TRUNCATE"
    return "PASSIVE" if idle and wal_bytes > 0 else None


class Checkpointer:
    """Runs in every upkeep round (it decides itself whether to checkpoint)."""

    def __init__(self) -> None:
        self.last = 0.0  # monotonic time of the last checkpoint

    def __call__(self, rnd: Round) -> None:
        store = rnd.store
        idle = rnd.monotonic - self.last >= IDLE_CHECKPOINT_EVERY and not rnd.busy
        before = store.wal_bytes()
        mode = checkpoint_mode(before, rnd.config.sqlite.wal_checkpoint_mb, idle)
        if mode:
            busy, _, _ = store.checkpoint(mode)
            self.last = rnd.monotonic
            event(
                log,
                "wal.checkpoint",
                logging.DEBUG,
                before=before,
                after=store.wal_bytes(),
                busy=busy,
            )


def checkpoint_task() -> UpkeepTask:
    """One database file, whoever checkpoints it: the upkeep lead's (``CLUSTER``)."""
    return UpkeepTask("wal_checkpoint", 0.0, Checkpointer(), CLUSTER)
