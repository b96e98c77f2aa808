"""The workflow settle trigger's function (``jobs_settle``), as each schema step wrote it.

A row trigger settles a parent's waiting children in the statement that ends it; its WHEN
(has_children) keeps every other job's transitions free of it. Children are counted off with a
decrement of their own row, which serializes parents that end at once on the child's row lock
(a count of edges read from a snapshot would miss a parent committing concurrently).

The cancelled children's error names the parent (``parent job <id> (<type>) <word>``) with its
id as jobq writes ids (32 hex digits), whatever the column's type: text before the native
types (``.nativeschema``), ``uuid`` after (whose own text has hyphens).
"""

from __future__ import annotations

_HEAD = "'parent job ' || {pid} || ' (' || p.type || ') ' || word"
# The error as FLOWS wrote it: the chain cut at 2,000 characters (its far end, the failed job,
# was lost at depth).
_INDENT = "\n" + " " * 26
FIRST_LINKS = (
    "substr(" + _HEAD + _INDENT + "|| CASE WHEN p.error LIKE 'parent job %' "
    "THEN ' <- ' || p.error ELSE '' END," + _INDENT + "1, 2000)"
)
# The error since FLOW_CHAINS, as the SQLite engine's (shared.engines.sqlite.flowschema): no
# chain below, the link alone; an elided chain (``<nearest> <- N more <- <root>``), this link,
# N + 1 and the same root; a chain that fits, this link before it; else this link, how many are
# dropped (all but the root: one per ' <- ') and the root (the text after the last ' <- ').
CHAIN_LINKS = """substr(CASE
               WHEN p.error IS NULL OR p.error NOT LIKE 'parent job %' THEN {head}
               WHEN split_part(p.error, ' <- ', 2) ~ '^[0-9]+ more$'
               THEN {head} || ' <- '
                    || (split_part(split_part(p.error, ' <- ', 2), ' ', 1)::numeric + 1)
                    || ' more <- ' || substr(p.error, strpos(p.error, ' more <- ') + 9)
               WHEN length({head}) + 4 + length(p.error) <= 2000 THEN {head} || ' <- ' || p.error
               ELSE {head} || ' <- '
                    || ((length(p.error) - length(replace(p.error, ' <- ', ''))) / 4)
                    || ' more <- ' || regexp_replace(p.error, '^.* <- ', '')
           END, 1, 2000)""".replace("{head}", _HEAD)
_SETTLE_FUNCTION = """CREATE {or_replace}FUNCTION jobs_settle() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    p jobs;
    ended text;
    word text;
    stamp {stamp};
BEGIN
    IF TG_OP = 'DELETE' THEN
        p := OLD; ended := 'cancelled'; word := 'deleted'; stamp := db_now();
    ELSE
        p := NEW; ended := NEW.status; word := NEW.status; stamp := NEW.updated_at;
    END IF;
    UPDATE jobs SET status = 'cancelled', completed_at = stamp, updated_at = stamp,
           error = {error}
    WHERE status = 'waiting' AND ended <> 'completed'
      AND (after_failure = 'cancel' OR (after_failure = 'hold' AND ended = 'cancelled'))
      AND id IN (SELECT child FROM job_deps WHERE parent = p.id AND done = 0);
    IF FOUND THEN  -- jobs ended: their waiters listen on the done channel (connection.done_channel)
        PERFORM pg_notify('jobq_done_' || left(encode(sha256(convert_to(current_schema(), 'UTF8')), 'hex'), 20), '');
    END IF;
    WITH e AS (UPDATE job_deps d SET done = 1 FROM jobs c
               WHERE d.parent = p.id AND d.done = 0 AND c.id = d.child
                 AND (ended = 'completed' OR c.after_failure = 'run')
               RETURNING d.child)
    UPDATE jobs SET waiting_on = waiting_on - 1, updated_at = stamp,
           status = CASE WHEN waiting_on <= 1 THEN 'pending' ELSE status END
    WHERE id IN (SELECT child FROM e) AND status = 'waiting';
    IF FOUND THEN
        PERFORM pg_notify('jobq_' || current_schema(), '');
    END IF;
    RETURN NULL;
END $$;
"""


def settle_function(or_replace: str, links: str, native: bool = False) -> str:
    """The settle trigger's function, its cancelled children's error being ``links`` (one of
    :data:`FIRST_LINKS`, :data:`CHAIN_LINKS`); ``native``: over the native column types (a
    ``uuid`` id written as its 32 hex digits, times ``timestamptz``)."""
    pid = "replace(p.id::text, '-', '')" if native else "p.id"
    return (
        _SETTLE_FUNCTION.replace("{or_replace}", or_replace)
        .replace("{error}", links.replace("{pid}", pid))
        .replace("{stamp}", "timestamptz" if native else "text")
    )
