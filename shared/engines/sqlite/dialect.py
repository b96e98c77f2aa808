"""How SQLite spells what shared statements (:mod:`shared.engines.sql`) ask of an engine."""

from __future__ import annotations

from ..sql import Dialect

DIALECT = Dialect(
    name="sqlite",
    named=True,  # sqlite3 takes :name parameters as written
    counts="job_counts",  # the triggers keep it exact: nothing to add
    seconds="((julianday({end}) - julianday({start})) * 86400.0)",
    # only running rows are read (the planner would rather scan a covering index of every job)
    jobs_running="jobs INDEXED BY jobs_running",
    greatest="max",  # the scalar max of two or more arguments
    instr="instr",
    any_of="{col} IN (SELECT value FROM json_each({param}))",
    json_lists=True,
    nul_text=True,
    rowid="rowid",  # jobs_claim's entries end with the rowid: ties follow it
    window_sorted=True,  # a CROSS JOIN keeps its left side as the outer loop
)
