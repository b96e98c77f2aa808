"""Placeholder: the operators' SQL (helper: pgops)."""


class PgOps:
    """Filled in by its branch."""
