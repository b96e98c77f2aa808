"""The PostgreSQL engine's tables and their migrations, in a schema of jobq's own.

The tables and columns are those of the SQLite engine (so every reader sees the same rows). Up
to FLOW_CHAINS times were fixed-width ISO-8601 UTC text (``shared.runtime.clock.iso``) in the "C"
collation and JSON was text; the step NATIVE (:mod:`.nativeschema`) makes them ``timestamptz``
and ``jsonb``, which jobq's connections read back as that text (:mod:`.loaders`). Two columns
are written with the database's clock (``db_now()``), never a host's: the lease
(``jobs.heartbeat_at``) and a process row's ``heartbeat_at``, so that hosts whose clocks
disagree judge leases alike.

Bookkeeping that SQLite keeps with row triggers: the per-(type, status) counts are kept by
statement triggers over transition tables as appended deltas (``job_count_deltas``) that upkeep
folds into ``job_counts`` (a row counter that every claim updated would serialize all claims of
all hosts on its row lock); ended attempts (``job_attempts``) are written by the statements that
end them (the store's SQL), deletions' history by a statement trigger.

Migrations run in one transaction under an advisory lock on the schema's name, so two
supervisors starting at once migrate once; ``meta.version`` records the step reached.
"""

from __future__ import annotations

from .flowsettle import FLOW_SETTLE, UPDATED_COUNTS
from .nativeschema import AFTER, ID_AFTER, IDS, NATIVE
from .settle import CHAIN_LINKS, FIRST_LINKS, settle_function

# The database's clock as jobq's time text (statement time: stable within one statement), as V1
# wrote db_now(); NATIVE makes it a timestamptz (.nativeschema.DB_NOW).
DB_NOW = """to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')"""

# The delete trigger's count deltas (V1 and ATTEMPTS_BY_INDEX)
_UNCOUNT_DELETED = """    INSERT INTO job_count_deltas (type, status, n)
    SELECT type, status, -count(*) FROM old_rows GROUP BY type, status
    UNION ALL
    SELECT type, 'delayed', -count(*) FROM old_rows
    WHERE status = 'pending' AND run_at > created_at GROUP BY type;
"""

V1 = f"""
CREATE TABLE meta (version integer NOT NULL);
INSERT INTO meta (version) VALUES (0);

CREATE FUNCTION db_now() RETURNS text LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT {DB_NOW} $$;

CREATE TABLE jobs (
    id            text COLLATE "C" PRIMARY KEY,
    type          text COLLATE "C" NOT NULL CHECK (length(type) > 0),
    status        text COLLATE "C" NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
    payload       text NOT NULL,
    result        text,
    error         text,
    attempts      integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts  integer CHECK (max_attempts >= 1),
    priority      integer NOT NULL DEFAULT 0,
    run_at        text COLLATE "C" NOT NULL,
    started_at    text COLLATE "C",
    completed_at  text COLLATE "C",
    created_at    text COLLATE "C" NOT NULL,
    updated_at    text COLLATE "C" NOT NULL,
    key           text COLLATE "C",
    owner         text COLLATE "C",
    owner_pid     integer,
    heartbeat_at  text COLLATE "C",   -- the lease, on the database's clock (db_now())
    CHECK ((status = 'running') = (owner IS NOT NULL))
);
-- Claims walk this index in claim order; finished rows are not in it.
CREATE INDEX jobs_claim ON jobs (priority DESC, run_at, created_at) WHERE status = 'pending';
CREATE INDEX jobs_delayed ON jobs (run_at, type) WHERE status = 'pending' AND run_at > created_at;
CREATE UNIQUE INDEX jobs_key ON jobs (key) WHERE key IS NOT NULL;
CREATE INDEX jobs_running ON jobs (owner) WHERE status = 'running';
CREATE INDEX jobs_dead ON jobs (status, id) WHERE status IN ('failed', 'cancelled');
CREATE INDEX jobs_finished ON jobs (completed_at) WHERE status IN ('completed', 'failed', 'cancelled');

CREATE TABLE control (
    name   text COLLATE "C" PRIMARY KEY,
    value  text NOT NULL
);

CREATE TABLE processes (
    id            text COLLATE "C" PRIMARY KEY,
    kind          text NOT NULL CHECK (kind IN ('supervisor', 'worker')),
    pid           integer NOT NULL,
    host          text NOT NULL,
    slot          integer,
    parent        text,
    started_at    text COLLATE "C" NOT NULL,
    heartbeat_at  text COLLATE "C" NOT NULL   -- the database's clock
);

CREATE TABLE schedule_marks (
    name         text COLLATE "C" PRIMARY KEY,
    fingerprint  text NOT NULL,
    last_tick    text COLLATE "C" NOT NULL,
    updated_at   text COLLATE "C" NOT NULL
);

CREATE TABLE type_starts (
    type        text COLLATE "C" NOT NULL,
    started_at  text COLLATE "C" NOT NULL
);
CREATE INDEX type_starts_by_type ON type_starts (type, started_at);

-- One row per attempt that ended (see the SQLite engine's schema for the meaning of each
-- column). seq grows with insertion, not strictly with commit order across sessions.
CREATE TABLE job_attempts (
    seq         bigserial PRIMARY KEY,
    job_id      text COLLATE "C" NOT NULL,
    type        text COLLATE "C" NOT NULL,
    attempt     integer NOT NULL,
    outcome     text NOT NULL,
    due_at      text COLLATE "C",
    started_at  text COLLATE "C",
    ended_at    text COLLATE "C" NOT NULL,
    owner       text,
    error       text
);
CREATE INDEX job_attempts_job ON job_attempts (job_id);

CREATE TABLE job_counts (
    type    text COLLATE "C" NOT NULL,
    status  text COLLATE "C" NOT NULL,
    n       bigint NOT NULL,
    PRIMARY KEY (type, status)
);
-- Appended by the statement triggers below, folded into job_counts by upkeep (fold_counts).
CREATE TABLE job_count_deltas (
    type    text COLLATE "C" NOT NULL,
    status  text COLLATE "C" NOT NULL,
    n       bigint NOT NULL
);

CREATE FUNCTION jobs_inserted() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO job_count_deltas (type, status, n)
    SELECT type, status, count(*) FROM new_rows GROUP BY type, status
    UNION ALL
    SELECT type, 'delayed', count(*) FROM new_rows
    WHERE status = 'pending' AND run_at > created_at GROUP BY type;
    RETURN NULL;
END $$;

-- Counts only (no join of old and new rows: PL/pgSQL plans it once, for the first statement's
-- row counts, which made a later 500-row completion quadratic). Rows whose status did not change
-- cancel out. Ended attempts are written by the statements that end them (the store's SQL).
CREATE FUNCTION jobs_updated() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
{UPDATED_COUNTS}    RETURN NULL;
END $$;

CREATE FUNCTION jobs_deleted() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM job_attempts WHERE job_id IN (SELECT id FROM old_rows);
{_UNCOUNT_DELETED}    RETURN NULL;
END $$;

CREATE TRIGGER jobs_inserted AFTER INSERT ON jobs REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION jobs_inserted();
CREATE TRIGGER jobs_updated AFTER UPDATE ON jobs REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION jobs_updated();
CREATE TRIGGER jobs_deleted AFTER DELETE ON jobs REFERENCING OLD TABLE AS old_rows
FOR EACH STATEMENT EXECUTE FUNCTION jobs_deleted();
"""

# Each attempt's own run time: an outcome writes its run's own start (started_at) and
# end (ended_at: when the handler returned, the worker's clock), and the attempt history takes
# them, not the batch's claim and commit times (see the SQLite engine's RUN_TIMES).
RUN_TIMES = """
ALTER TABLE jobs ADD COLUMN ended_at text COLLATE "C";
"""

# The W3C trace context of the request that enqueued a job (see the SQLite engine's TRACE).
TRACE = """
ALTER TABLE jobs ADD COLUMN trace text;
"""

# Named queues (see the SQLite engine's QUEUES): the queue's claim walks its own index.
QUEUES = """
ALTER TABLE jobs ADD COLUMN queue text COLLATE "C" NOT NULL DEFAULT 'default' CHECK (length(queue) > 0);
CREATE INDEX jobs_queue_claim ON jobs (queue, priority DESC, run_at, created_at) WHERE status = 'pending';
"""

# Per-key limits (see the SQLite engine's KEYS).
KEYS = """
ALTER TABLE jobs ADD COLUMN limit_key text COLLATE "C";
CREATE INDEX jobs_key_claim ON jobs (type, limit_key, priority DESC, run_at, created_at)
    WHERE status = 'pending' AND limit_key IS NOT NULL;
CREATE TABLE key_starts (
    type        text COLLATE "C" NOT NULL,
    limit_key   text COLLATE "C" NOT NULL,
    started_at  text COLLATE "C" NOT NULL
);
CREATE INDEX key_starts_by_key ON key_starts (type, limit_key, started_at);
CREATE TABLE key_turns (
    type      text COLLATE "C" PRIMARY KEY,
    last_key  text COLLATE "C" NOT NULL
);
"""

# Workflows (see the SQLite engine's FLOWS for the columns, the edges and the policies).
# A row trigger settles a parent's waiting children in the statement that ends it (.settle).
FLOWS = (
    """
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check
    CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled', 'waiting'));
ALTER TABLE jobs ADD COLUMN after_failure text CHECK (after_failure IN ('cancel', 'run', 'hold'));
ALTER TABLE jobs ADD COLUMN waiting_on integer NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN has_children integer NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN flow_depth integer NOT NULL DEFAULT 0;
CREATE TABLE job_deps (
    child   text COLLATE "C" NOT NULL,
    parent  text COLLATE "C" NOT NULL,
    pos     integer NOT NULL,
    done    integer NOT NULL DEFAULT 0,
    PRIMARY KEY (child, parent)
);
CREATE INDEX job_deps_parent ON job_deps (parent, done);

"""
    + settle_function("", FIRST_LINKS)
    + """
CREATE TRIGGER jobs_settle_children AFTER UPDATE OF status ON jobs FOR EACH ROW
WHEN (NEW.has_children <> 0 AND OLD.status IS DISTINCT FROM NEW.status
      AND NEW.status IN ('completed', 'failed', 'cancelled'))
EXECUTE FUNCTION jobs_settle();
CREATE TRIGGER jobs_settle_deleted AFTER DELETE ON jobs FOR EACH ROW
WHEN (OLD.has_children <> 0 AND OLD.status <> 'completed')
EXECUTE FUNCTION jobs_settle();
CREATE FUNCTION jobs_deps_deleted() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM job_deps WHERE child = OLD.id;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_deps_deleted AFTER DELETE ON jobs FOR EACH ROW
WHEN (OLD.after_failure IS NOT NULL) EXECUTE FUNCTION jobs_deps_deleted();
"""
)

# Stopping a running job (see the SQLite engine's CANCEL_AND_PROGRESS).
CANCEL_AND_PROGRESS = """
ALTER TABLE jobs ADD COLUMN cancel_requested_at text COLLATE "C";
ALTER TABLE jobs ADD COLUMN progress text;
"""

# Inserts that count themselves (as SQLite's TALLY): the enqueue statements write their
# rows' count deltas in the statement and mark the rows (tally = 1); the insert trigger, now a row
# trigger, counts only the rows not marked (jobq copy, workflows, any other writer). A statement
# trigger fired on every insert (its transition table and function call) was about a third of a
# single enqueue's server time; a row trigger whose WHEN is false costs nothing.
COUNTED_INSERTS = """
ALTER TABLE jobs ADD COLUMN tally smallint;
DROP TRIGGER jobs_inserted ON jobs;
CREATE FUNCTION jobs_inserted_row() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO job_count_deltas (type, status, n) VALUES (NEW.type, NEW.status, 1);
    IF NEW.status = 'pending' AND NEW.run_at > NEW.created_at THEN
        INSERT INTO job_count_deltas (type, status, n) VALUES (NEW.type, 'delayed', 1);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_inserted AFTER INSERT ON jobs FOR EACH ROW WHEN (NEW.tally IS NULL)
EXECUTE FUNCTION jobs_inserted_row();
"""

# A deleted job's attempt history found by its index: with the ids in a
# transition table (no statistics) the planner hashed them and read all of job_attempts for each
# DELETE on jobs, so every chunk of a purge cost a scan of the whole history (0.3-0.4 s at 350,000
# attempts, whatever the chunk's size). An array of the ids is looked up by the index.
ATTEMPTS_BY_INDEX = f"""
CREATE OR REPLACE FUNCTION jobs_deleted() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM job_attempts WHERE job_id = ANY (ARRAY(SELECT id FROM old_rows));
{_UNCOUNT_DELETED}    RETURN NULL;
END $$;
"""

# Errors that keep the failed job at any depth (as the SQLite engine's FLOW_CHAINS): the settle
# function again, with the bounded chain.
FLOW_CHAINS = settle_function("OR REPLACE ", CHAIN_LINKS)

MIGRATIONS: list[str] = [
    V1,
    RUN_TIMES,
    TRACE,
    QUEUES,
    KEYS,
    FLOWS,
    CANCEL_AND_PROGRESS,
    COUNTED_INSERTS,
    ATTEMPTS_BY_INDEX,
    FLOW_CHAINS,
    NATIVE,  # the server's own types (see .native, .nativeschema)
    FLOW_SETTLE,  # completed parents settled once per statement (see .flowsettle)
    IDS,  # job ids as uuid (see .native)
]
VERSION = len(MIGRATIONS)
# The native conversions, which `jobq db upgrade` runs online for a large queue (.upgrade): the
# version each step reaches, and the SQL made again after its columns are converted. The steps
# between and after them are small (run as a store opens).
NATIVE_VERSION = MIGRATIONS.index(NATIVE) + 1
NATIVE_AFTER = AFTER
IDS_VERSION = MIGRATIONS.index(IDS) + 1
IDS_AFTER = ID_AFTER

# Folds the appended count deltas into job_counts (run by upkeep and before counts are read
# by ops; concurrent folds are safe: a delta row is deleted, and counted, once).
FOLD_COUNTS = """
WITH d AS (DELETE FROM job_count_deltas RETURNING type, status, n),
     s AS (SELECT type, status, sum(n) AS n FROM d GROUP BY type, status)
INSERT INTO job_counts (type, status, n) SELECT type, status, n FROM s
ON CONFLICT (type, status) DO UPDATE SET n = job_counts.n + excluded.n
"""

# Counts as of now: the folded table plus the deltas not folded yet.
COUNTS = """
SELECT type, status, sum(n)::bigint AS n FROM (
    SELECT type, status, n FROM job_counts
    UNION ALL SELECT type, status, n FROM job_count_deltas) c
GROUP BY type, status
"""
