"""Placeholder: schedules, retention and per-type limits (helper: pgops)."""


class PgLifecycle:
    """Filled in by its branch."""
