"""The supervisor's side of named queues (docs/queues.md): ``--queues`` kept over
reloads, and the pools' sizes, which set how many worker slots the arbiter keeps.

The slots are laid out pool after pool (``shared.model.queues.plan``); the workers read the layout
from the snapshot themselves, so resizing a pool is a reload: the arbiter's target follows
:func:`total_workers`, surplus slots retire, new ones start, and each worker moved to another
pool by the new layout switches queues at its next claim.
"""

from __future__ import annotations

import dataclasses

from shared.settings.config import Config
from shared.model.queues import plan, total_workers

__all__ = ["describe", "total_workers", "with_queues"]


def with_queues(config: Config, queues: tuple[str, ...] | None) -> Config:
    """``config`` serving only ``queues`` (``--queues``), or as the file says when None."""
    if queues is None:
        return config
    return config.replace(supervisor=dataclasses.replace(config.supervisor, queues=tuple(queues)))


def describe(config: Config) -> str:
    """The pools for a log line: ``emails=2 *=6`` (``*``: the shared pool)."""
    return " ".join(f"{p.name or '*'}={p.workers}" for p in plan(config))
