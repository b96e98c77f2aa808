"""Placeholder: lease and process ages on the server's clock (helper: multihost)."""


class PgLeases:
    """Filled in by its branch."""
