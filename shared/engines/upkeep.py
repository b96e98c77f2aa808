"""The supervisor's upkeep as the store contract names it (re-exported by
``shared.engines.contract``): a :class:`Round` of upkeep handed to each :class:`UpkeepTask`, the
engines' own among them.

Each task has a scope: ``HOST`` work every supervisor does for itself (its own children, its own
process row and counters), ``CLUSTER`` work that is the same on every supervisor sharing the
database (other hosts' dead owners, schedules, an engine's bookkeeping), which only the one that
holds the upkeep lead runs (``supervisor.election``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from shared.engines.contract import UpkeepStore

HOST = "host"  # every supervisor runs it, for itself
CLUSTER = "cluster"  # only the supervisor that holds the upkeep lead runs it
SCOPES = (HOST, CLUSTER)


@dataclass
class Round:
    """What one round of the supervisor's upkeep knows, handed to every task in turn."""

    store: UpkeepStore
    config: Any  # the supervisor's current shared.settings.config.Config
    now: float  # wall clock, Unix seconds
    monotonic: float  # the clock's monotonic reading
    busy: bool = True  # jobs are running (set by the timeouts task, which runs first)
    running: Any = None  # the running jobs the timeouts task read (None: it could not)
    expired: set = field(default_factory=set)  # foreign owners whose lease expired
    lead: bool = True  # this supervisor holds the upkeep lead: the CLUSTER tasks run


@dataclass
class UpkeepTask:
    """Periodic work the supervisor runs: ``run(round)`` at most every ``every`` seconds
    (0: every maintenance round), in the order of the list. Engines add their own
    (:func:`shared.engines.upkeep_tasks`). ``scope``: :data:`HOST` (every supervisor) or
    :data:`CLUSTER` (only the upkeep lead)."""

    name: str
    every: float
    run: Callable[[Round], None]
    scope: str = HOST

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ValueError(
                f"upkeep task {self.name!r}: scope {self.scope!r} is not one of {SCOPES}"
            )
