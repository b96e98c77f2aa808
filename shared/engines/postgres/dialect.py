"""How PostgreSQL spells what shared statements (:mod:`shared.engines.sql`) ask of an engine."""

from __future__ import annotations

import re

from ..sql import Dialect
from .schema import COUNTS


def pg_text(text: str | None) -> str | None:
    """PostgreSQL text cannot hold NUL: keep it visible as an escape instead."""
    return text if text is None or "\x00" not in text else text.replace("\x00", "\\x00")


# A JSON text's backslash escapes, one at a time (so an escaped backslash is never read as the
# start of another escape): a surrogate pair, any other \uXXXX, any other escaped character.
_ESCAPE = re.compile(
    r"\\(?:u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|u([0-9a-fA-F]{4})|.)"
)


def _visible(m: re.Match[str]) -> str:
    code = m.group(1)
    if code is not None and (code == "0000" or code[:2].lower() in _SURROGATES):
        return "\\" + m.group(0)  # the escape itself, as text: \\u0000
    return m.group(0)


_SURROGATES = {"d8", "d9", "da", "db", "dc", "dd", "de", "df"}


def pg_json(text: str | None) -> str | None:
    """A JSON text as ``jsonb`` can hold it: a string's NUL (``\\u0000``) and lone surrogates
    (``\\udc80``), which ``jsonb`` refuses, kept visible as the escape's own text (the string
    then holds a backslash and ``u0000``), as :func:`pg_text` keeps an error's NUL."""
    if text is None or "\\u" not in text:
        return text
    return _ESCAPE.sub(_visible, text)


_HEX_ID = re.compile(r"[0-9a-f]{32}")


def _is_hex_id(text: str) -> bool:
    """Whether ``text`` is 32 lowercase hex digits, as jobq writes ids: the server reads it as a
    uuid. (Upper case too would find a job here that SQLite's text ids do not match.)"""
    return _HEX_ID.fullmatch(text) is not None


def uuid_text(job_id: str) -> str:
    """A job's 32-hex id as the server writes the ``uuid`` (``8-4-4-4-12``, ``id::text``)."""
    return f"{job_id[:8]}-{job_id[8:12]}-{job_id[12:16]}-{job_id[16:20]}-{job_id[20:]}"


DIALECT = Dialect(
    name="postgresql",
    named=False,  # psycopg: %(name)s
    counts=f"({COUNTS})",  # job_counts plus the deltas upkeep has not folded yet
    seconds="(extract(epoch FROM ({end})::timestamptz - ({start})::timestamptz)::float8)",
    lock=" FOR UPDATE",  # a batch's rows, locked and checked again (READ COMMITTED)
    skip_locked=" FOR UPDATE SKIP LOCKED",
    # times are timestamptz (schema.NATIVE): as text only where a statement cuts the text
    iso_text="""to_char(({t}) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')""",
    json_text="({j})::text",
    time_type="timestamptz",
    json_type="jsonb",
    id_type="uuid",  # schema.IDS: read back as 32 hex digits (.loaders)
    id_floor="0" * 32,
    is_id=_is_hex_id,
    lease_now="db_now()",  # leases on the server's clock: one clock for every host
    arrays=True,
    in_rows="{col} = ANY(ARRAY({rows}))",  # looked up by col's index, whatever the rows' number
    notify="SELECT pg_notify(:channel, '')",
    # one key per schema (hashtext of a name of jobq's own), held until the transaction ends;
    # the planner's defaults again for this transaction only (a worker's session turns sorts
    # and sequential scans off and keeps generic plans, see store.WORKER_SESSION): the fair
    # walk's plans need sorts, and without them a claim among 10,000 jobs of one key took
    # seconds, fencing the workers
    limits_lock=(
        "SELECT set_config('enable_sort', 'on', true), set_config('enable_seqscan', 'on', true), "
        "set_config('plan_cache_mode', 'auto', true), pg_advisory_xact_lock(hashtext(:key))"
    ),
    release_history=True,  # no trigger records the attempt a release ends
    text=pg_text,
    json_value=pg_json,
    dml_in_with=True,  # a data-modifying WITH runs whether read or not
)
