"""SQL written once for every engine (issue 22).

Statements here use ``:name`` parameters and jobq's columns (the same tables on every engine:
times as fixed-width ISO-8601 UTC text). An engine supplies a :class:`~.dialect.Dialect` (what
its SQL spells differently) and runs the statements on its own connection through the
:class:`~.base.SqlBase` mixin's helpers; it keeps only what truly differs (its connection,
schema, wake-up, upkeep, and the hot path where the SQL really differs).
"""
from .base import SqlBase
from .dialect import Dialect

__all__ = ["Dialect", "SqlBase"]
