"""The schema steps to the server's native column types (:data:`.native.NATIVE_COLUMNS`: times
``timestamptz``, JSON ``jsonb``; then :data:`IDS`, over :data:`.native.ID_COLUMNS`: job ids
``uuid``). The first in two parts:

- the conversions (:func:`conversions`): one ``ALTER TABLE`` per table, every listed column of
  it converted in place (``ALTER COLUMN c TYPE t USING ...``; one rewrite of the table, its
  indexes rebuilt). A fresh install runs them on empty tables.
- :data:`AFTER`: what was written against the old types and is made again: ``db_now()`` (the
  lease clock) now a ``timestamptz`` cut to milliseconds, as jobq's times are, and the
  workflow settle function (its stamp a ``timestamptz``, the parent's id in its children's
  error as 32 hex digits, as jobq writes ids).

The batched online upgrade converts the same columns its own way, then runs the same
:data:`AFTER`. jobq's own connections read the new types back as the old text
(:mod:`.loaders`), so the rest of the engine sees the values it saw.
"""

from __future__ import annotations

from typing import Sequence

from .native import ID_COLUMNS, NATIVE_COLUMNS, NativeColumn
from .settle import CHAIN_LINKS, settle_function

# The database's clock: statement time (stable within one statement) to the millisecond.
DB_NOW = "date_trunc('milliseconds', statement_timestamp())"


def conversions(columns: Sequence[NativeColumn] = NATIVE_COLUMNS) -> str:
    """The in-place conversions of ``columns``: one ``ALTER TABLE`` per table, in list order."""
    tables: dict[str, list[str]] = {}
    for col in columns:
        using = col.using.format(c=col.column)
        tables.setdefault(col.table, []).append(
            f"ALTER COLUMN {col.column} TYPE {col.type} USING {using}"
        )
    return "".join(
        f"ALTER TABLE {t}\n    " + ",\n    ".join(alters) + ";\n" for t, alters in tables.items()
    )


AFTER = f"""
DROP FUNCTION db_now();
CREATE FUNCTION db_now() RETURNS timestamptz LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT {DB_NOW} $$;
""" + settle_function("OR REPLACE ", CHAIN_LINKS, native=True)

NATIVE = conversions() + AFTER

# Nothing written against the ids' type is made again: the settle function names no id type
# and writes ids in text as 32 hex digits whatever the column's type (.settle).
ID_AFTER = ""
IDS = conversions(ID_COLUMNS)
