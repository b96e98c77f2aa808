"""SQL written once for every engine.

Statements here use ``:name`` parameters and jobq's columns (the same tables on every engine:
times as fixed-width ISO-8601 UTC text). An engine supplies a :class:`~.dialect.Dialect` (what
its SQL spells differently) and runs the statements on its own connection through the
:class:`~.base.SqlBase` mixin's helpers; it keeps only what truly differs (its connection,
schema, wake-up, upkeep, and the hot path where the SQL really differs).

By transition: :mod:`.jobs` (a job's row, counts, due times, the pause flag), :mod:`.processes`
(the process registry), :mod:`.schedules`, :mod:`.owners` (a dead owner's jobs released),
:mod:`.limits` (the limited claim), :mod:`.queues` (named queues in the claim, their pause), :mod:`.retention` (``purge_finished``), :mod:`.transfer`
(``jobq copy``'s reads), :mod:`.flows` (workflows: jobs that wait for others), :mod:`.stopping` (a busy worker's check-in: progress, cancel
requests), :mod:`.lead` (the upkeep lead: one supervisor runs the cluster's upkeep), :mod:`.connection` (what every connection class does alike).
"""

from .base import SqlBase
from .connection import ConnectionBase
from .dialect import Dialect
from .flows import FlowsSql
from .lead import LeadSql
from .jobs import CLAIM_ORDER, GIVEN_BACK, JOB_COLUMNS, RELEASE, JobsSql
from .limits import LimitsSql
from .owners import OwnersSql
from .processes import ProcessesSql
from .queues import QueueServing
from .retention import Chunks, RetentionSql
from .schedules import SchedulesSql
from .stopping import StoppingSql
from .transfer import ExportSql


class TransitionsSql(
    JobsSql,
    ProcessesSql,
    SchedulesSql,
    OwnersSql,
    LimitsSql,
    RetentionSql,
    ExportSql,
    QueueServing,
    FlowsSql,
    StoppingSql,
    LeadSql,
):
    """Every transition written once: an engine's store class inherits this (before its
    connection class) and adds its hot path, its wake-up and its imports."""


__all__ = [
    "CLAIM_ORDER",
    "GIVEN_BACK",
    "JOB_COLUMNS",
    "RELEASE",
    "Chunks",
    "ConnectionBase",
    "Dialect",
    "SqlBase",
    "TransitionsSql",
]
