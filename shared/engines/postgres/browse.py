"""Placeholder: the dashboard's reads (helper: browse)."""


class PgBrowse:
    """Filled in by its branch."""
