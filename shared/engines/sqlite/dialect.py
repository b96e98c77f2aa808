"""How the SQLite engine spells the shared SQL (:class:`shared.engines.sql.Dialect`)."""
from ..sql import Dialect

DIALECT = Dialect(
    "sqlite", named=True,
    counts="job_counts",  # the triggers' per-(type, status) counters (see the schema)
    seconds="((julianday({end}) - julianday({start})) * 86400.0)",
    # only running rows are read (the planner would rather scan a covering index of every job)
    jobs_running="jobs INDEXED BY jobs_running",
)
