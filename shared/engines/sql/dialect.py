"""What an engine's SQL spells differently: the one place a shared statement asks.

A statement is written once with ``:name`` parameters; :meth:`Dialect.sql` turns it into the
driver's style (``sqlite3``: ``:name`` as written; psycopg: ``%(name)s``, with a literal ``%``
doubled). The other fields are fragments a statement formats in where engines differ.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

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
    - ``greatest``: the two-argument maximum function (SQLite's scalar ``max``, ``greatest``).
    - ``instr``: the position of a substring, ``fn(text, part)``, 0 when absent (case-sensitive).
    - ``any_of``: a template with ``{col}`` and ``{param}``: ``col`` is one of the list bound to
      ``param`` (one parameter, whatever the list's length: see :meth:`list_param`).
    - ``json_lists``: True when a list parameter is bound as a JSON array text (SQLite's
      ``json_each``), False when the driver binds a list as an array (psycopg).
    - ``nul_text``: True when text can hold NUL; where it cannot, no stored id has one, and a
      statement is never sent with one (the driver would refuse it).
    - ``rowid``: the column a walk in claim order breaks ties by, as the claim index does
      (SQLite's ``rowid``; ``id`` elsewhere); its value is part of a listing's cursor.
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
    greatest: str = "greatest"
    instr: str = "strpos"
    any_of: str = "{col} = ANY({param})"
    json_lists: bool = False
    nul_text: bool = False
    rowid: str = "id"
    window_sorted: bool = False
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

    def between(self, end: str, start: str) -> str:
        """The :attr:`seconds` expression for two column names or expressions."""
        return self.seconds.format(end=end, start=start)


def _pyformat(m: re.Match[str]) -> str:
    name = m.group(1)
    return m.group(0) if name is None else f"%({name})s"
