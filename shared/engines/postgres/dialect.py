"""How PostgreSQL spells what shared statements (:mod:`shared.engines.sql`) ask of an engine."""
from __future__ import annotations

from ..sql import Dialect
from .schema import COUNTS

DIALECT = Dialect(
    name="postgresql",
    named=False,                    # psycopg: %(name)s
    counts=f"({COUNTS}) c",         # job_counts plus the deltas upkeep has not folded yet
    seconds="extract(epoch from ({end}::timestamptz - {start}::timestamptz))::float8",
    lock=" FOR UPDATE",             # a batch's rows, locked and checked again (READ COMMITTED)
    skip_locked=" FOR UPDATE SKIP LOCKED",
)
