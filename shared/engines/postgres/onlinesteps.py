"""The migration steps that ``jobq db upgrade`` runs online on a big queue (:mod:`.online`),
one row each: the version the step reaches, the columns it converts, the SQL run after its swap
and what it does in words. The migration's guard (:func:`.online.guard_step`), the command
(:mod:`.upgrade`) and their messages read this table and nothing else; every other step is
small and runs in place (as a store opens, or by the command before a step's prepare).
"""

from __future__ import annotations

from typing import NamedTuple

from . import schema as schema_mod
from .native import ID_COLUMNS, NATIVE_COLUMNS, NativeColumn


class OnlineStep(NamedTuple):
    """A step converted online: ``name`` (its name in :mod:`.schema`), the ``version`` it
    reaches (its index in ``MIGRATIONS`` + 1), its ``columns``, the SQL ``after`` its swap
    (empty: none) and ``what`` it does, as the end of "converting ..."."""

    name: str
    version: int
    columns: tuple[NativeColumn, ...]
    after: str
    what: str


def steps() -> tuple[OnlineStep, ...]:
    """The online steps in version order (read from :mod:`.schema` at each call, so a test's
    shortened migrations are seen)."""
    return (
        OnlineStep(
            "NATIVE",
            schema_mod.NATIVE_VERSION,
            NATIVE_COLUMNS,
            schema_mod.NATIVE_AFTER,
            "its times and JSON to timestamptz and jsonb",
        ),
        OnlineStep(
            "IDS", schema_mod.IDS_VERSION, ID_COLUMNS, schema_mod.IDS_AFTER, "its job ids to uuid"
        ),
    )


def reaching(version: int) -> OnlineStep | None:
    """The online step whose migration reaches ``version``, or None (a small step)."""
    return next((s for s in steps() if s.version == version), None)


def next_above(version: int) -> OnlineStep | None:
    """The first online step above a schema at ``version`` (None: none left)."""
    return next((s for s in steps() if s.version > version), None)


def named(step: OnlineStep) -> str:
    """``step`` as messages name it: ``step IDS (to version 13)``."""
    return f"step {step.name} (to version {step.version})"
