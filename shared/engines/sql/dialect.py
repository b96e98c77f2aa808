"""What an engine's SQL spells differently: the one place a shared statement asks.

A statement is written once with ``:name`` parameters; :meth:`Dialect.sql` turns it into the
driver's style (``sqlite3``: ``:name`` as written; psycopg: ``%(name)s``, with a literal ``%``
doubled). The other fields are fragments a statement formats in where engines differ.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

# ``:name`` but not PostgreSQL's ``::type`` cast, nor a ``:`` inside a quoted literal.
_PARAM = re.compile(r"'(?:[^']|'')*'|(?<![:\w]):([A-Za-z_]\w*)")


@dataclass(frozen=True)
class Dialect:
    """One engine's spellings. Instances are immutable and made once per engine module.

    - ``name``: the engine ('sqlite', 'postgresql'), for messages only (never branched on).
    - ``named``: True when the driver takes ``:name`` parameters as written (sqlite3).
    - ``counts``: a FROM source (table or parenthesised subquery) with columns ``type``,
      ``status``, ``n``: the per-(type, status) counts, folded or not.
    - ``seconds``: an expression template with ``{end}`` and ``{start}`` (two ISO texts): the
      seconds between them as a float, NULL when either is NULL.
    - ``lock``: appended to a SELECT whose rows the same transaction then writes (a batch of a
      bulk write): ``" FOR UPDATE"`` where rows are locked, ``""`` where the database is (SQLite).
    - ``skip_locked``: the same, for a claim that passes over rows another session holds.
    - ``nulls_last_desc``: how ``completed_at DESC`` is ordered so it follows the engine's index.
    - ``iso_text``: a template with ``{t}`` (a stored time, or ``lease_now``): that time as
      jobq's ISO text (``shared.runtime.clock.iso``), where a statement cuts or joins the text
      itself (a minute's prefix, a time written into a text column). Times are that text
      already where they are stored as text (SQLite).
    - ``time_type``, ``json_type``: the SQL types of stored times and JSON (a typed list of
      them, :meth:`row_set`, is cast to them).
    - ``json_text``: a template with ``{j}`` (a stored JSON column): its JSON text, for a
      statement that cuts or searches the text.
    - ``id_floor``: below every id jobq writes, where a walk in id order starts (``id >``
      it): ``""`` for text; the all-zero uuid (no id of jobq's is: its first bits are a time).
    - ``id_type``: the SQL type of a job's id (a typed list of ids is cast to it);
      ``is_id``: whether a caller's text can be an id at all (where the type is ``uuid``, only
      32 hex digits can: anything else matches no job, and is never sent, which would fail).

    The transitions' fields (``shared.engines.sql`` statements for producers, workers, upkeep):

    - ``lease_now``: the time a lease is written with: ``:now`` (the caller's clock, one host)
      or a server function (``db_now()``: one clock for every host).
    - ``arrays``: True when a list travels as one array parameter (``= ANY(:ids)``); False when
      it is spelt out as ``IN (:ids0, :ids1, ...)`` (see :meth:`member`).
    - ``jobs_running``: the ``jobs`` table as a read of running rows only names it (an index
      hint where the planner would rather scan a covering index of every job).
    - ``notify``: a statement that wakes idle workers (``:channel``), or "" where they watch
      the database some other way; :meth:`waking` folds it into a write.
    - ``limits_lock``: a statement (``:key``) a limited claim's transaction runs first so that
      limited claims take turns ("" where one write lock serializes every writer already).
    - ``release_history``: True when a dead owner's released run writes its attempt-history row
      itself (False: the schema's trigger writes it).
    - ``text``: how a free text (an error) is stored (where text cannot hold NUL, it is escaped).
    - ``json_value``: how a JSON text (a payload, result, progress) is stored (where the JSON
      type refuses some strings, they are kept visible as escapes).
    - ``greatest``: the two-argument maximum function (SQLite's scalar ``max``, ``greatest``).
    - ``instr``: the position of a substring, ``fn(text, part)``, 0 when absent (case-sensitive).
    - ``any_of``: a template with ``{col}`` and ``{param}``: ``col`` is one of the list bound to
      ``param`` (one parameter, whatever the list's length: see :meth:`list_param`).
    - ``json_lists``: True when a list parameter is bound as a JSON array text (SQLite's
      ``json_each``), False when the driver binds a list as an array (psycopg).
    - ``nul_text``: True when text can hold NUL; where it cannot, no stored id has one, and a
      statement is never sent with one (the driver would refuse it).
    - ``in_rows``: a template with ``{col}`` and ``{rows}`` (a subquery of one column): ``col``
      is one of its rows. PostgreSQL's is an array of them, which the planner looks up by
      ``col``'s index: as ``IN (subquery)`` it may hash the rows and scan the whole table, and
      did for batches of a few thousand (each batch of a purge read every job).
    - ``rowid``: the column a walk in claim order breaks ties by, as the claim index does
      (SQLite's ``rowid``; ``id`` elsewhere); its value is part of a listing's cursor.
    - ``dml_in_with``: True when a write may ride in a ``WITH`` of another write (one round trip
      for both: the fair claim moves its turn in the claim statement); False: run it apart.
    - ``window_sorted``: True when a join over an ordered window keeps the window's order
      (SQLite's ``CROSS JOIN``, no sort); False when a listing must order its page itself.
    """

    name: str
    named: bool
    counts: str
    seconds: str
    lock: str = ""
    skip_locked: str = ""
    nulls_last_desc: str = "completed_at DESC"
    iso_text: str = "{t}"
    time_type: str = "text"
    json_type: str = "text"
    id_type: str = "text"
    id_floor: str = ""
    is_id: Callable[[str], bool] = field(default=lambda t: True, compare=False, repr=False)
    json_text: str = "{j}"
    lease_now: str = ":now"
    arrays: bool = False
    jobs_running: str = "jobs"
    notify: str = ""
    limits_lock: str = ""
    release_history: bool = False
    text: Callable[[Any], Any] = field(default=lambda t: t, compare=False, repr=False)
    json_value: Callable[[Any], Any] = field(default=lambda t: t, compare=False, repr=False)
    greatest: str = "greatest"
    instr: str = "strpos"
    any_of: str = "{col} = ANY({param})"
    in_rows: str = "{col} IN ({rows})"
    json_lists: bool = False
    nul_text: bool = False
    rowid: str = "id"
    window_sorted: bool = False
    dml_in_with: bool = False
    _cache: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def sql(self, text: str) -> str:
        """``text`` (``:name`` parameters) in the driver's parameter style (cached per text)."""
        if self.named:
            return text
        out = self._cache.get(text)
        if out is None:
            out = _PARAM.sub(_pyformat, text.replace("%", "%%"))
            self._cache[text] = out
        return out

    def list_param(self, items: Sequence[Any]) -> Any:
        """``items`` as the one parameter of :attr:`any_of`."""
        return json.dumps(list(items)) if self.json_lists else list(items)

    def lookup_id(self, text: str) -> str:
        """A caller's ``text`` as the id parameter of a lookup: itself where it can be an id
        (:attr:`is_id`), else :attr:`id_floor`, which no job has (the statement still runs, and
        finds nothing, where the server would refuse the text)."""
        return text if self.is_id(text) else self.id_floor

    def iso(self, time: str) -> str:
        """The :attr:`iso_text` expression of ``time`` (a column name or an expression)."""
        return self.iso_text.format(t=time)

    def json(self, column: str) -> str:
        """The :attr:`json_text` expression of ``column``."""
        return self.json_text.format(j=column)

    def between(self, end: str, start: str) -> str:
        """The :attr:`seconds` expression for two column names or expressions."""
        return self.seconds.format(end=end, start=start)

    def member(
        self,
        expr: str,
        name: str,
        values: Sequence[Any],
        negate: bool = False,
        kind: str | None = None,
    ) -> tuple[str, dict[str, Any]]:
        """``expr`` is (``negate``: is not) one of ``values``: the fragment and its parameters
        (named ``name`` or ``name0``, ``name1``...). An empty list matches nothing (``negate``:
        everything). ``kind``: the values' kind where the engine's type is not text's (``id``,
        see :meth:`row_set`)."""
        if self.arrays:
            arr = f":{name}" if kind is None else f":{name}::{self._sql_type(kind)}[]"
            return (f"{expr} <> ALL({arr})" if negate else f"{expr} = ANY({arr})"), {
                name: list(values)
            }
        if not values:
            return ("1 = 1" if negate else "1 = 0"), {}
        params = {f"{name}{i}": v for i, v in enumerate(values)}
        return (
            f"{expr} {'NOT IN' if negate else 'IN'} ({', '.join(':' + k for k in params)})",
            params,
        )

    def row_set(self, name: str, columns: Sequence[tuple[str, str]]) -> str:
        """A FROM source, aliased ``name``, of the rows :meth:`row_params` binds for it: one
        statement whatever their number. ``columns``: (name, SQL type: ``text`` or ``integer``,
        or a kind the engine names: ``time``, ``json``, ``id``, see :attr:`time_type`) in row
        order; the rows come out in the order given. Where lists travel as arrays,
        one array per column (``unnest``); elsewhere one JSON text of the rows (``json_each``)."""
        if self.arrays:
            args = ", ".join(f":{name}_{col}::{self._sql_type(kind)}[]" for col, kind in columns)
            return f"unnest({args}) AS {name}({', '.join(col for col, _ in columns)})"
        cols = ", ".join(
            f"json_extract(value, '$[{i}]') AS {col}" for i, (col, _) in enumerate(columns)
        )
        return f"(SELECT {cols} FROM json_each(:{name}) ORDER BY key) AS {name}"

    def _sql_type(self, kind: str) -> str:
        """The SQL type of a :meth:`row_set` column's ``kind``."""
        return {"time": self.time_type, "json": self.json_type, "id": self.id_type}.get(kind, kind)

    def row_params(
        self, name: str, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[Any]]
    ) -> dict[str, Any]:
        """The parameters of :meth:`row_set` ``name`` holding ``rows`` (tuples in column order)."""
        if self.arrays:
            return {f"{name}_{col}": [r[i] for r in rows] for i, (col, _) in enumerate(columns)}
        return {name: json.dumps(rows, separators=(",", ":"), ensure_ascii=False)}

    def waking(self, stmt: str) -> str:
        """``stmt`` (a write without RETURNING), waking idle workers in the same statement where
        the engine has :attr:`notify` (a data-modifying ``WITH`` runs whether read or not)."""
        return f"WITH w AS ({stmt}) {self.notify}" if self.notify else stmt


def _pyformat(m: re.Match[str]) -> str:
    name = m.group(1)
    return m.group(0) if name is None else f"%({name})s"
