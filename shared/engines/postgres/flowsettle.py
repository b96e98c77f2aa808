"""The PostgreSQL engine's settle of completed parents, once per statement (the migration
FLOW_SETTLE, appended to ``.schema.MIGRATIONS``).

Until FLOW_SETTLE a row trigger settled each parent that ended (``jobs_settle``): for a
completion it ran a cancelling ``UPDATE jobs`` that could match nothing (its plan a constant
false) and the releasing one, each a statement on ``jobs`` with its own executor start (every
index of ``jobs`` opened) and its own firing of the count trigger: about 0.25 ms per parent, six
times a plain job's completion. Now:

- a failure, a cancel or a delete settles as before (the row triggers, with the cancelled
  children's error texts and the after_failure policies);
- a completion is settled by the statement trigger that already keeps the counts
  (``jobs_updated``): the completed parents among its new rows, their edges not done yet marked
  done and their waiting children counted off, each child once by the number of its parents the
  statement completed, in one statement whatever the batch; idle workers are notified once if a
  child became pending. The parents' ids go in as an array (``= ANY``), so the edges are found by
  their index whatever plan PL/pgSQL keeps for the transition table (as ATTEMPTS_BY_INDEX), and
  no variable names the ids' type (the native column types may change it).

A completed parent's edges are all done once settled, so a later update of its row settles
nothing; an edge written done at enqueue (its parent had completed) is never counted. The
children's ``updated_at`` is the latest of their completed parents' in the statement (a worker's
batch shares one).
"""

from __future__ import annotations

# The count deltas of an update of jobs (old_rows, new_rows), as the statement trigger
# jobs_updated has written them since the schema's first step (.schema.V1), and still does here.
UPDATED_COUNTS = """    INSERT INTO job_count_deltas (type, status, n)
    SELECT type, status, sum(n) FROM (
        SELECT type, status, -1 AS n FROM old_rows
        UNION ALL SELECT type, status, 1 FROM new_rows
        UNION ALL SELECT type, 'delayed', -1 FROM old_rows WHERE status = 'pending' AND run_at > created_at
        UNION ALL SELECT type, 'delayed', 1 FROM new_rows WHERE status = 'pending' AND run_at > created_at
    ) d GROUP BY type, status HAVING sum(n) <> 0;
"""

FLOW_SETTLE = f"""
DROP TRIGGER jobs_settle_children ON jobs;
CREATE TRIGGER jobs_settle_children AFTER UPDATE OF status ON jobs FOR EACH ROW
WHEN (NEW.has_children <> 0 AND OLD.status IS DISTINCT FROM NEW.status
      AND NEW.status IN ('failed', 'cancelled'))
EXECUTE FUNCTION jobs_settle();
CREATE OR REPLACE FUNCTION jobs_updated() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    stamp jobs.updated_at%TYPE;
BEGIN
{UPDATED_COUNTS}    SELECT max(updated_at) INTO stamp FROM new_rows WHERE has_children <> 0 AND status = 'completed';
    IF stamp IS NULL THEN  -- no completed parent (updated_at is never NULL)
        RETURN NULL;
    END IF;
    WITH e AS (UPDATE job_deps SET done = 1
               WHERE parent = ANY (ARRAY(SELECT id FROM new_rows
                                         WHERE has_children <> 0 AND status = 'completed'))
                 AND done = 0
               RETURNING child),
         n AS (SELECT child, count(*)::integer AS k FROM e GROUP BY child)
    UPDATE jobs SET waiting_on = waiting_on - n.k, updated_at = stamp,
           status = CASE WHEN waiting_on <= n.k THEN 'pending' ELSE status END
    FROM n WHERE jobs.id = n.child AND jobs.status = 'waiting';
    IF FOUND THEN
        PERFORM pg_notify('jobq_' || current_schema(), '');
    END IF;
    RETURN NULL;
END $$;
"""
