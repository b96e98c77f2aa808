"""The catalogue reads and the SQL text of the online upgrade (:mod:`.online`): the shadow
column of each converted column, its sync trigger, and the indexes and CHECK constraints on the
old columns written again over the shadows (``pg_get_indexdef`` / ``pg_get_constraintdef`` with
the column names rewritten, partial-index predicates included).

Names: the shadow of ``col`` is ``col__native``, of index or constraint ``name`` is
``name__native`` (cut and hashed to stay within PostgreSQL's 63 bytes); from finish to its
cleanup the old ones are ``col__old`` and ``name__old``.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, NamedTuple, Sequence

import psycopg
from psycopg.rows import tuple_row

from .native import NativeColumn

SUFFIX = "__native"
RETIRED = "__old"  # an old column or index, from finish until its cleanup drops it
_MAX_NAME = 63
_LITERAL = re.compile(r"('(?:[^']|'')*')")


def shadow(name: str, suffix: str = SUFFIX) -> str:
    """The shadow of a column, index or constraint ``name`` (at most 63 bytes); with
    ``suffix`` :data:`RETIRED`, the name the old one has between finish and its cleanup."""
    out = name + suffix
    if len(out.encode()) <= _MAX_NAME:
        return out
    digest = hashlib.md5(name.encode()).hexdigest()[:8]
    cut = name.encode()[: _MAX_NAME - len(suffix) - 9].decode(errors="ignore")
    return cut + "_" + digest + suffix


def retired(name: str) -> str:
    """The name of an old column or index between finish and its cleanup."""
    return shadow(name, RETIRED)


def by_table(columns: Sequence[NativeColumn]) -> dict[str, tuple[NativeColumn, ...]]:
    """The columns grouped by table, in the order given."""
    out: dict[str, tuple[NativeColumn, ...]] = {}
    for c in columns:
        out[c.table] = out.get(c.table, ()) + (c,)
    return out


def not_null_name(c: NativeColumn) -> str:
    """The CHECK that proves ``c``'s shadow NOT NULL (dropped by finish)."""
    return shadow(f"{c.table}_{c.column}_nn")


def q(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def rows(conn: psycopg.Connection, query: str, params: Sequence[Any] = ()) -> list[tuple]:
    """The rows of ``query`` as tuples (whatever the connection's row factory)."""
    with conn.cursor(row_factory=tuple_row) as cur:
        cur.execute(query, params)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


def rename_columns(text: str, names: dict[str, str]) -> str:
    """``text`` (an index or constraint definition) with each column of ``names`` (old -> new)
    renamed, bare or quoted, outside string literals; a name after a dot (a schema-qualified
    table) or before one or before ``(`` (a function) is left alone."""
    if not names:
        return text
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    quoted = "|".join(re.escape(q(n)) for n in sorted(names, key=len, reverse=True))
    pattern = re.compile(
        rf'(?<![\w$."])(?:(?P<bare>{alternatives})|(?P<quoted>{quoted}))(?![\w$"(.])'
    )

    def sub(m: re.Match[str]) -> str:
        old = m.group("bare") or m.group("quoted")[1:-1].replace('""', '"')
        return q(names[old])

    parts = _LITERAL.split(text)
    return "".join(p if i % 2 else pattern.sub(sub, p) for i, p in enumerate(parts))


class ColumnFacts(NamedTuple):
    """What a column of the live table is: its type, NOT NULL, its default expression."""

    type: str
    not_null: bool
    default: str | None


def column_facts(conn: psycopg.Connection, schema: str, table: str) -> dict[str, ColumnFacts]:
    """Every live column of ``schema.table`` by name (empty: no such table)."""
    found = rows(
        conn,
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, "
        "pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a "
        "LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
        "WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped",
        (f"{q(schema)}.{q(table)}",),
    )
    return {name: ColumnFacts(kind, notnull, default) for name, kind, notnull, default in found}


class IndexDef(NamedTuple):
    """An index on the old columns: its name, its definition over the shadows (``CREATE ...
    INDEX CONCURRENTLY IF NOT EXISTS``), the constraint it backs (``p``, ``u`` or None)."""

    name: str
    create: str
    constraint: str | None


def index_defs(
    conn: psycopg.Connection, schema: str, table: str, names: dict[str, str]
) -> list[IndexDef]:
    """The indexes of ``schema.table`` that read a column of ``names`` (old -> shadow), each
    defined again over the shadows; an index that reads none is left out. The shadows'
    own indexes (a name ending in the suffix) are never copied."""
    found = rows(
        conn,
        "SELECT c.relname, pg_get_indexdef(i.indexrelid), con.contype FROM pg_index i "
        "JOIN pg_class c ON c.oid = i.indexrelid "
        "LEFT JOIN pg_constraint con ON con.conindid = i.indexrelid AND con.contype IN ('p', 'u') "
        "WHERE i.indrelid = to_regclass(%s) ORDER BY c.relname",
        (f"{q(schema)}.{q(table)}",),
    )
    out = []
    for name, definition, contype in found:
        if name.endswith((SUFFIX, RETIRED)):
            continue
        m = re.match(r"CREATE (UNIQUE )?INDEX (\S+) ON (.*)$", definition, re.S)
        if m is None:  # pg_get_indexdef always has this form
            raise ValueError(f"index {name}: unexpected definition {definition!r}")
        body = rename_columns(m.group(3), names)
        if body == m.group(3):
            continue
        create = (
            f"CREATE {m.group(1) or ''}INDEX CONCURRENTLY IF NOT EXISTS {q(shadow(name))} ON {body}"
        )
        out.append(IndexDef(name, create, contype))
    return out


def check_defs(
    conn: psycopg.Connection, schema: str, table: str, names: dict[str, str]
) -> list[tuple[str, str]]:
    """(name, definition over the shadows) of each CHECK constraint of ``schema.table`` that
    reads a column of ``names``; the upgrade's own (suffixed) constraints are left out."""
    found = rows(
        conn,
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = to_regclass(%s) AND contype = 'c' ORDER BY conname",
        (f"{q(schema)}.{q(table)}",),
    )
    out = []
    for name, definition in found:
        renamed = rename_columns(definition, names)
        if not name.endswith(SUFFIX) and renamed != definition:
            out.append((name, renamed))
    return out


def constraint_names(conn: psycopg.Connection, schema: str, table: str) -> set[str]:
    """The names of every constraint of ``schema.table``."""
    found = rows(
        conn,
        "SELECT conname FROM pg_constraint WHERE conrelid = to_regclass(%s)",
        (f"{q(schema)}.{q(table)}",),
    )
    return {r[0] for r in found}


def foreign_keys(conn: psycopg.Connection, schema: str, table: str) -> list[str]:
    """The foreign keys that reference or leave ``schema.table`` (the upgrade takes none)."""
    found = rows(
        conn,
        "SELECT conname FROM pg_constraint WHERE contype = 'f' "
        "AND (conrelid = to_regclass(%s) OR confrelid = to_regclass(%s))",
        (f"{q(schema)}.{q(table)}",) * 2,
    )
    return [r[0] for r in found]


def converted(using: str, expr: str) -> str:
    """The native value of ``expr`` (a value of the old form) by the column's ``USING``."""
    return "(" + using.replace("{c}", expr) + ")"


def sync_function(schema: str, table: str, columns: Sequence[NativeColumn]) -> str:
    """The row trigger's function that keeps each shadow equal to its old column converted,
    for writers that know only the old column: set on insert, and on update when the old value
    changed or the shadow is still empty. A value that does not convert leaves its shadow NULL
    (the writer is never failed by the upgrade; prepare's check names what is left)."""

    def set_(c: NativeColumn) -> str:
        return f"NEW.{q(shadow(c.column))} := {converted(c.using, 'NEW.' + q(c.column))};"

    def changed(c: NativeColumn) -> str:
        old, new = "OLD." + q(c.column), "NEW." + q(c.column)
        return f"NEW.{q(shadow(c.column))} IS NULL OR {new} IS DISTINCT FROM {old}"

    inserted = "\n            ".join(set_(c) for c in columns)
    updated = "\n            ".join(f"IF {changed(c)} THEN {set_(c)} END IF;" for c in columns)
    fallback = "\n        ".join(
        f"BEGIN {set_(c)} EXCEPTION WHEN OTHERS THEN NEW.{q(shadow(c.column))} := NULL; END;"
        for c in columns
    )
    return f"""CREATE OR REPLACE FUNCTION {q(schema)}.{q(sync_name(table))}() RETURNS trigger
LANGUAGE plpgsql AS $sync$
BEGIN
    BEGIN
        IF TG_OP = 'INSERT' THEN
            {inserted}
        ELSE
            {updated}
        END IF;
    EXCEPTION WHEN OTHERS THEN
        {fallback}
    END;
    RETURN NEW;
END $sync$"""


def sync_name(table: str) -> str:
    """The name of ``table``'s sync trigger and of its function."""
    return shadow(table + "_sync")


def remaining(columns: Sequence[NativeColumn]) -> str:
    """A row's test for work left: a shadow still empty where its old column is not."""
    return " OR ".join(
        f"({q(shadow(c.column))} IS NULL AND {q(c.column)} IS NOT NULL)" for c in columns
    )
