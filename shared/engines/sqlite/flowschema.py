"""The SQLite engine's workflow schema: the edges (``job_deps``), the columns a job in a graph
has, and the triggers that settle a parent's waiting children in the statement that ends it
(their migrations: FLOWS, FLOW_CHAINS, then FLOW_SETTLE; see ``.schema`` for the list).

A child cancelled because its parent failed or was cancelled says why: ``parent job <id>
(<type>) failed``, and down a chain each link adds the one before it (``parent job <child>
(load) cancelled <- parent job <id> (transform) failed``). The text is bounded (2,000
characters): past it, the nearest parent and the job that started it all are kept and the
links between are counted (``parent job <id> (t) cancelled <- 180 more <- parent job <root>
(t) failed``), so at any depth the error names the job that failed. Each link's text comes from
the parent's own error alone (a trigger cannot loop): the form of an elided chain, ``<nearest>
<- N more <- <root>``, is recognised and its count taken up by the next link.
"""

from __future__ import annotations

_DB_NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
_HEAD = "'parent job ' || {row}.id || ' (' || {row}.type || ') ' || {word}"

# The error as FLOWS wrote it: the chain cut at 2,000 characters (its far end, the failed job,
# was lost at depth).
_FIRST_LINKS = (
    """substr("""
    + _HEAD
    + """
                          || CASE WHEN {row}.error LIKE 'parent job %'
                                  THEN ' <- ' || {row}.error ELSE '' END,
                          1, 2000)"""
)

# The error since FLOW_CHAINS (see the module's docstring; ``e`` is the parent's error):
# - no chain below: the link alone;
# - an elided chain (``<nearest> <- N more <- <root>``): this link, N + 1, the same root;
# - a chain that fits: this link before it;
# - else: this link, how many links are dropped (all but the root: one per ' <- '), the root
#   (the text after the last ' <- ': the trimmed set is every other character, so rtrim stops at
#   the last separator, made a single control character for it).
_REST = "substr({e}, instr({e}, ' <- ') + 4)"
_LAST = (
    "substr(replace({e}, ' <- ', char(31)), length(rtrim(replace({e}, ' <- ', char(31)), "
    "replace({e}, ' <- ', ''))) + 1)"
)
_CHAIN = """substr(CASE
               WHEN {e} IS NULL OR {e} NOT LIKE 'parent job %' THEN {head}
               WHEN {rest} GLOB '[0-9]*' AND ltrim({rest}, '0123456789') LIKE ' more <- %'
               THEN {head} || ' <- ' || (CAST({rest} AS INTEGER) + 1) || ' more <- '
                    || substr({e}, instr({e}, ' more <- ') + 9)
               WHEN length({head}) + 4 + length({e}) <= 2000 THEN {head} || ' <- ' || {e}
               ELSE {head} || ' <- ' || ((length({e}) - length(replace({e}, ' <- ', ''))) / 4)
                    || ' more <- ' || {last}
           END, 1, 2000)"""
_CHAIN_LINKS = (
    _CHAIN.replace("{rest}", _REST)
    .replace("{last}", _LAST)
    .replace("{head}", _HEAD)
    .replace("{e}", "{row}.error")
)


def _settle(row: str, ended: str, word: str, stamp: str, error: str) -> str:
    """The body of a settle trigger for the parent ``row`` (NEW or OLD) that ended ``ended``."""
    return _SETTLE.format(
        row=row, ended=ended, word=word, stamp=stamp, error=error.format(row=row, word=word)
    )


# Workflows: jobs that wait for other jobs. A child names its parents in job_deps (in
# the order given: pos); while a parent it needs has not ended it is 'waiting' (SQLite cannot
# change a CHECK in place: the table's stored definition is rewritten, which only widens what
# the rows may hold, and the DDL after it makes every connection re-read the schema).
# ``waiting_on``: the parents the child still waits for; ``after_failure``: the child's policy
# ('cancel', 'run', 'hold'; NULL for a job without parents); ``has_children``: set on a parent
# when a child names it, so the settle triggers cost nothing (their WHEN) for other jobs;
# ``flow_depth``: the job's longest chain of parents (bounded at enqueue:
# shared.engines.sql.flows).
# An edge is ``done`` once its parent counts as ended for its child: completed, or failed or
# cancelled for a child that runs anyway; each edge is counted off once, so a parent retried by
# an operator after it failed never counts twice.
_SETTLE = """
    UPDATE jobs SET status = 'cancelled', completed_at = {stamp}, updated_at = {stamp},
           error = {error}
    WHERE status = 'waiting' AND {ended} <> 'completed'
      AND (after_failure = 'cancel' OR (after_failure = 'hold' AND {ended} = 'cancelled'))
      AND id IN (SELECT child FROM job_deps WHERE parent = {row}.id AND done = 0);
    UPDATE jobs SET waiting_on = waiting_on - 1, updated_at = {stamp},
           status = CASE WHEN waiting_on <= 1 THEN 'pending' ELSE status END
    WHERE status = 'waiting' AND ({ended} = 'completed' OR after_failure = 'run')
      AND id IN (SELECT child FROM job_deps WHERE parent = {row}.id AND done = 0);
    UPDATE job_deps SET done = 1
    WHERE parent = {row}.id AND done = 0
      AND ({ended} = 'completed'
           OR EXISTS (SELECT 1 FROM jobs c
                      WHERE c.id = job_deps.child AND c.after_failure = 'run'));"""

FLOWS = (
    """
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql = replace(sql, '''cancelled''))', '''cancelled'', ''waiting''))')
WHERE type = 'table' AND name = 'jobs';
PRAGMA writable_schema = RESET;
ALTER TABLE jobs ADD COLUMN after_failure TEXT CHECK (after_failure IN ('cancel', 'run', 'hold'));
ALTER TABLE jobs ADD COLUMN waiting_on INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN has_children INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN flow_depth INTEGER NOT NULL DEFAULT 0;
CREATE TABLE job_deps (
    child   TEXT NOT NULL,
    parent  TEXT NOT NULL,
    pos     INTEGER NOT NULL,
    done    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (child, parent)
) WITHOUT ROWID;
CREATE INDEX job_deps_parent ON job_deps (parent, done);
-- The transition that ends a parent settles its waiting children in the same statement, whatever
-- wrote it (a worker's outcome or batch, the supervisor's release, an operator's cancel).
CREATE TRIGGER jobs_settle_children AFTER UPDATE OF status ON jobs
WHEN NEW.has_children <> 0 AND OLD.status <> NEW.status
     AND NEW.status IN ('completed', 'failed', 'cancelled')
BEGIN"""
    + _settle("NEW", "NEW.status", "NEW.status", "NEW.updated_at", _FIRST_LINKS)
    + """
END;
-- A parent deleted before it completed (an operator's purge) is a cancelled one for its children;
-- retention keeps a parent while a child waits for it. Time: the database's, as no caller
-- gives one.
CREATE TRIGGER jobs_settle_deleted AFTER DELETE ON jobs
WHEN OLD.has_children <> 0 AND OLD.status <> 'completed'
BEGIN"""
    + _settle("OLD", "'cancelled'", "'deleted'", _DB_NOW, _FIRST_LINKS)
    + """
END;
CREATE TRIGGER jobs_deps_deleted AFTER DELETE ON jobs
WHEN OLD.after_failure IS NOT NULL
BEGIN
    DELETE FROM job_deps WHERE child = OLD.id;
END;
"""
)

# Errors that keep the failed job at any depth (see the module's docstring): the two settle
# triggers again, with the bounded chain.
FLOW_CHAINS = (
    """
DROP TRIGGER jobs_settle_children;
CREATE TRIGGER jobs_settle_children AFTER UPDATE OF status ON jobs
WHEN NEW.has_children <> 0 AND OLD.status <> NEW.status
     AND NEW.status IN ('completed', 'failed', 'cancelled')
BEGIN"""
    + _settle("NEW", "NEW.status", "NEW.status", "NEW.updated_at", _CHAIN_LINKS)
    + """
END;
DROP TRIGGER jobs_settle_deleted;
CREATE TRIGGER jobs_settle_deleted AFTER DELETE ON jobs
WHEN OLD.has_children <> 0 AND OLD.status <> 'completed'
BEGIN"""
    + _settle("OLD", "'cancelled'", "'deleted'", _DB_NOW, _CHAIN_LINKS)
    + """
END;
"""
)

# A worker's batched completion settles its completed parents itself, once per statement
# (``.flowsettle``): it marks its rows by writing ``settle_mark`` (``1 - settle_mark``), and the
# row trigger skips exactly the completed rows so marked. A column of its own, not ``tally``: a
# process of the version before, still connected after this migration, marks its completions
# for the counts but does not settle them, and the trigger goes on settling those. Failures,
# cancels, deletes and every other writer's completions are settled by the triggers as before.
FLOW_SETTLE = (
    """
ALTER TABLE jobs ADD COLUMN settle_mark INTEGER NOT NULL DEFAULT 0;
DROP TRIGGER jobs_settle_children;
CREATE TRIGGER jobs_settle_children AFTER UPDATE OF status ON jobs
WHEN NEW.has_children <> 0 AND OLD.status <> NEW.status
     AND NEW.status IN ('completed', 'failed', 'cancelled')
     AND (NEW.status <> 'completed' OR NEW.settle_mark = OLD.settle_mark)
BEGIN"""
    + _settle("NEW", "NEW.status", "NEW.status", "NEW.updated_at", _CHAIN_LINKS)
    + """
END;
"""
)
