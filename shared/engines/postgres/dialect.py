"""How PostgreSQL spells what shared statements (:mod:`shared.engines.sql`) ask of an engine."""

from __future__ import annotations

from ..sql import Dialect
from .schema import COUNTS


def pg_text(text: str | None) -> str | None:
    """PostgreSQL text cannot hold NUL: keep it visible as an escape instead."""
    return text if text is None or "\x00" not in text else text.replace("\x00", "\\x00")


DIALECT = Dialect(
    name="postgresql",
    named=False,  # psycopg: %(name)s
    counts=f"({COUNTS})",  # job_counts plus the deltas upkeep has not folded yet
    seconds="(extract(epoch FROM ({end})::timestamptz - ({start})::timestamptz)::float8)",
    lock=" FOR UPDATE",  # a batch's rows, locked and checked again (READ COMMITTED)
    skip_locked=" FOR UPDATE SKIP LOCKED",
    lease_now="db_now()",  # leases on the server's clock: one clock for every host
    arrays=True,
    in_rows="{col} = ANY(ARRAY({rows}))",  # looked up by col's index, whatever the rows' number
    notify="SELECT pg_notify(:channel, '')",
    # one key per schema (hashtext of a name of jobq's own), held until the transaction ends;
    # the planner's defaults again for this transaction only (a worker's session turns sorts
    # and sequential scans off and keeps generic plans, see store.WORKER_SESSION): the fair
    # walk's plans need sorts, and without them a claim among 10,000 jobs of one key took
    # seconds, fencing the workers
    limits_lock=(
        "SELECT set_config('enable_sort', 'on', true), set_config('enable_seqscan', 'on', true), "
        "set_config('plan_cache_mode', 'auto', true), pg_advisory_xact_lock(hashtext(:key))"
    ),
    release_history=True,  # no trigger records the attempt a release ends
    text=pg_text,
    dml_in_with=True,  # a data-modifying WITH runs whether read or not
)
