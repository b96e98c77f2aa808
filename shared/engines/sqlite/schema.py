"""The database schema and its migrations (tracked with ``PRAGMA user_version``).

Claim order is ``priority DESC, run_at, created_at``: highest priority first, then the job that
became due first, then the one created first. The partial index below serves exactly that order
for pending rows, and the ``sqlite_stat1`` row written with it makes the planner use a skip-scan
over the few distinct priorities, so one claim costs the same at 1,000 or 1,000,000 pending jobs,
also when most of them are scheduled in the future (see tests/engines/test_store_plan.py).
"""

from __future__ import annotations

import sqlite3

from .flowschema import FLOWS, FLOW_CHAINS, FLOW_SETTLE
from shared.model.errors import StoreRefused

V1 = """
CREATE TABLE jobs (
    id            TEXT PRIMARY KEY,
    type          TEXT NOT NULL CHECK (length(type) > 0),
    status        TEXT NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
    payload       TEXT NOT NULL,
    result        TEXT,
    error         TEXT,
    attempts      INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts  INTEGER CHECK (max_attempts >= 1),  -- NULL: the handler's or config default
    priority      INTEGER NOT NULL DEFAULT 0,
    run_at        TEXT NOT NULL,
    started_at    TEXT,
    completed_at  TEXT,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    key           TEXT,            -- idempotency key, unique while the job is kept
    owner         TEXT,            -- 'host:pid:create_time' of the worker running it
    owner_pid     INTEGER,
    heartbeat_at  TEXT,            -- lease: refreshed while the job runs
    CHECK ((status = 'running') = (owner IS NOT NULL))
);
CREATE INDEX jobs_claim ON jobs (priority DESC, run_at, created_at) WHERE status = 'pending';
-- Delayed and retried jobs only (run_at later than creation): lets an idle worker sleep exactly
-- until the next one is due, without indexing every immediate job a second time.
CREATE INDEX jobs_delayed ON jobs (run_at) WHERE status = 'pending' AND run_at > created_at;
CREATE UNIQUE INDEX jobs_key ON jobs (key) WHERE key IS NOT NULL;
CREATE INDEX jobs_running ON jobs (owner) WHERE status = 'running';
-- Deliberately no index on finished jobs or on (type, status): every job would pay for it twice
-- (claim and completion), which costs ~30% of throughput. Ids grow with time, so retention walks
-- the primary key from the oldest job; per-type statistics scan.

CREATE TABLE control (
    name   TEXT PRIMARY KEY,
    value  TEXT NOT NULL
);

CREATE TABLE processes (
    id            TEXT PRIMARY KEY,   -- the owner token
    kind          TEXT NOT NULL CHECK (kind IN ('supervisor', 'worker')),
    pid           INTEGER NOT NULL,
    host          TEXT NOT NULL,
    slot          INTEGER,
    parent        TEXT,
    started_at    TEXT NOT NULL,
    heartbeat_at  TEXT NOT NULL
);

-- Planner statistics for the claim index, written here because ANALYZE on an empty table
-- writes none: "many rows per priority" is what makes the skip-scan win.
ANALYZE sqlite_schema;
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('jobs', 'jobs_claim', '1000000 250000 2 1');
-- Load that row into this connection's planner too (otherwise only later connections see it,
-- and the process that created the database would scan the claim index for its whole life).
ANALYZE sqlite_schema;
"""

# Schedules, per-type limits.
SCHEDULES_AND_LIMITS = """
-- The last tick each [[schedule]] entry has handled (enqueued, or skipped by catch_up), so a tick
-- is enqueued once across restarts and supervisors. A changed cron or time zone (fingerprint)
-- re-anchors the schedule at the time of the change.
CREATE TABLE schedule_marks (
    name         TEXT PRIMARY KEY,
    fingerprint  TEXT NOT NULL,
    last_tick    TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);

-- Claim times of jobs of rate-limited types within their period (a sliding log: at most
-- `count` rows per type are ever inside the window).
CREATE TABLE type_starts (
    type        TEXT NOT NULL,
    started_at  TEXT NOT NULL
);
CREATE INDEX type_starts_by_type ON type_starts (type, started_at);
"""

# The trigger that records each attempt that ended, in the statement that ends it; ``{started}``
# and ``{ended}`` are its times (see ATTEMPT_HISTORY, then RUN_TIMES).
_ATTEMPT_ENDED = """CREATE TRIGGER jobs_attempt_ended AFTER UPDATE OF status ON jobs
WHEN OLD.status = 'running' AND NEW.status <> 'running' AND NEW.attempts >= OLD.attempts
BEGIN
    INSERT INTO job_attempts (job_id, type, attempt, outcome, due_at, started_at, ended_at, owner, error)
    VALUES (OLD.id, OLD.type, OLD.attempts,
            CASE NEW.status WHEN 'pending' THEN 'retry' ELSE NEW.status END,
            max(OLD.run_at, OLD.created_at), {started}, {ended}, OLD.owner,
            CASE WHEN NEW.status <> 'completed' THEN NEW.error END);
END;"""

# Attempt history (`jobq show ID`, metrics). Triggers write it, so every path that ends an
# attempt records it in the same statement: complete/retry/fail, a batched finish, the
# supervisor's release of a dead worker's jobs, and any later one.
ATTEMPT_HISTORY = (
    """
-- One row per attempt that ended. outcome: 'completed', 'failed' or 'retry' (pending again, the
-- attempt counted: a handler error, RetryAfter, or a dead worker's job re-queued). An attempt
-- given back (attempts decreased: a shutdown the supervisor ordered, a claimed job never started)
-- leaves no row here (the release writes an 'interrupted' row for a run it interrupted).
-- due_at: when the attempt became runnable (later of created_at and run_at);
-- ended_at: the writer's `now` (NEW.updated_at), never SQLite's clock. seq grows with commit
-- order (INTEGER PRIMARY KEY: max + 1), so readers can follow the table incrementally.
CREATE TABLE job_attempts (
    seq         INTEGER PRIMARY KEY,
    job_id      TEXT NOT NULL,
    type        TEXT NOT NULL,
    attempt     INTEGER NOT NULL,
    outcome     TEXT NOT NULL,
    due_at      TEXT,
    started_at  TEXT,
    ended_at    TEXT NOT NULL,
    owner       TEXT,
    error       TEXT
);
CREATE INDEX job_attempts_job ON job_attempts (job_id);
"""
    + _ATTEMPT_ENDED.format(started="OLD.started_at", ended="NEW.updated_at")
    + """
-- Deleting a job (purge, retention) deletes its history.
CREATE TRIGGER jobs_deleted AFTER DELETE ON jobs
BEGIN
    DELETE FROM job_attempts WHERE job_id = OLD.id;
END;
"""
)

# Job counts by (type, status), kept by triggers: `status`, `top` and the dashboard read
# a few rows instead of counting a million. Each status change costs one upsert of a row that
# stays in cache; a job's type never changes. Failed and cancelled jobs (rare, off the hot path)
# get an index so the dashboard can list them newest first without a scan; the delayed-job index
# covers the count of delayed jobs already due (per type, from the index alone).
JOB_COUNTS = """
CREATE TABLE job_counts (
    type    TEXT NOT NULL,
    status  TEXT NOT NULL,
    n       INTEGER NOT NULL,
    PRIMARY KEY (type, status)
) WITHOUT ROWID;
INSERT INTO job_counts (type, status, n) SELECT type, status, count(*) FROM jobs GROUP BY type, status;
CREATE TRIGGER job_counts_insert AFTER INSERT ON jobs
BEGIN
    INSERT INTO job_counts (type, status, n) VALUES (NEW.type, NEW.status, 1)
    ON CONFLICT (type, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER job_counts_update AFTER UPDATE OF status ON jobs
WHEN OLD.status <> NEW.status
BEGIN
    UPDATE job_counts SET n = n - 1 WHERE type = OLD.type AND status = OLD.status;
    INSERT INTO job_counts (type, status, n) VALUES (NEW.type, NEW.status, 1)
    ON CONFLICT (type, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER job_counts_delete AFTER DELETE ON jobs
BEGIN
    UPDATE job_counts SET n = n - 1 WHERE type = OLD.type AND status = OLD.status;
END;
-- Pseudo-status 'delayed': pending jobs whose run_at is later than their creation (the rows of
-- jobs_delayed). Jobs not due yet = delayed minus the delayed ones already due, and the latter
-- are few unless workers fall behind, so "scheduled" is counted without reading every future job.
CREATE TRIGGER job_counts_delayed_insert AFTER INSERT ON jobs
WHEN NEW.status = 'pending' AND NEW.run_at > NEW.created_at
BEGIN
    INSERT INTO job_counts (type, status, n) VALUES (NEW.type, 'delayed', 1)
    ON CONFLICT (type, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER job_counts_delayed_update AFTER UPDATE OF status, run_at ON jobs
WHEN (OLD.status = 'pending' AND OLD.run_at > OLD.created_at) <> (NEW.status = 'pending' AND NEW.run_at > NEW.created_at)
BEGIN
    INSERT INTO job_counts (type, status, n)
    VALUES (NEW.type, 'delayed', CASE WHEN NEW.status = 'pending' THEN 1 ELSE -1 END)
    ON CONFLICT (type, status) DO UPDATE SET n = n + excluded.n;
END;
CREATE TRIGGER job_counts_delayed_delete AFTER DELETE ON jobs
WHEN OLD.status = 'pending' AND OLD.run_at > OLD.created_at
BEGIN
    UPDATE job_counts SET n = n - 1 WHERE type = OLD.type AND status = 'delayed';
END;
INSERT INTO job_counts (type, status, n)
SELECT type, 'delayed', count(*) FROM jobs WHERE status = 'pending' AND run_at > created_at GROUP BY type;
CREATE INDEX jobs_dead ON jobs (status, id) WHERE status IN ('failed', 'cancelled');
-- The delayed-job index gains the type, so "scheduled by type" is counted from the index alone.
DROP INDEX jobs_delayed;
CREATE INDEX jobs_delayed ON jobs (run_at, type, status, created_at) WHERE status = 'pending' AND run_at > created_at;
"""

# Each attempt's own run time: a batch's jobs share one claim and one commit, so the
# claim time and the commit time are not their start and end. An outcome writes its run's own
# start (started_at) and end (ended_at, new: when the handler returned, the worker's clock), and
# the history takes them; a path that ends an attempt without writing them (the supervisor's
# release of a dead worker's jobs) still ends it at its own `now` (NEW.updated_at), as before.
# (A trigger cannot see which columns a statement set: an outcome is known by changing its end,
# or its start to one its end follows; anything else, such as a writer around jobq that clears
# started_at, ends the attempt at NEW.updated_at.)
RUN_TIMES = """
ALTER TABLE jobs ADD COLUMN ended_at TEXT;
DROP TRIGGER jobs_attempt_ended;
""" + _ATTEMPT_ENDED.format(
    started="NEW.started_at",
    ended=(
        "coalesce(CASE WHEN NEW.ended_at IS NOT OLD.ended_at OR (NEW.started_at IS NOT OLD.started_at "
        "AND NEW.ended_at >= NEW.started_at) THEN NEW.ended_at END, NEW.updated_at)"
    ),
)

# The W3C trace context of the request that enqueued a job (OpenTelemetry), as compact
# JSON ({"traceparent": ..., "tracestate": ...}); NULL when no span was active.
TRACE = """
ALTER TABLE jobs ADD COLUMN trace TEXT;
"""

# Named queues: every job belongs to one (``'default'`` unless named); a worker of a
# queue's own pool claims with ``queue = ?`` from an index in claim order within the queue, so
# its claim costs what the plain one does. The planner row makes SQLite take that index for the
# queue's claim (not the plain claim index and a filter).
QUEUES = """
ALTER TABLE jobs ADD COLUMN queue TEXT NOT NULL DEFAULT 'default' CHECK (length(queue) > 0);
CREATE INDEX jobs_queue_claim ON jobs (queue, priority DESC, run_at, created_at) WHERE status = 'pending';
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('jobs', 'jobs_queue_claim', '1000000 100000 25000 2 1');
ANALYZE sqlite_schema;
"""

# Per-key limits: a job's limit key; the fair claim walks the keys of a type in order
# (jobs_key_claim: one seek per key), remembering the last key served per type (key_turns);
# the starts of each key within its rate's period (key_starts, as type_starts per type).
KEYS = """
ALTER TABLE jobs ADD COLUMN limit_key TEXT;
CREATE INDEX jobs_key_claim ON jobs (type, limit_key, priority DESC, run_at, created_at)
    WHERE status = 'pending' AND limit_key IS NOT NULL;
CREATE TABLE key_starts (
    type        TEXT NOT NULL,
    limit_key   TEXT NOT NULL,
    started_at  TEXT NOT NULL
);
CREATE INDEX key_starts_by_key ON key_starts (type, limit_key, started_at);
CREATE TABLE key_turns (
    type      TEXT PRIMARY KEY,
    last_key  TEXT NOT NULL
);
"""

# Stopping a running job: when a cancel of the running job was asked (its worker stops
# it; the supervisor kills it after cancel_grace, and a released job with a request ends
# cancelled), and the small JSON progress its handler last reported.
CANCEL_AND_PROGRESS = """
ALTER TABLE jobs ADD COLUMN cancel_requested_at TEXT;
ALTER TABLE jobs ADD COLUMN progress TEXT;
"""

# Counts per statement: the hot path's statements (a batched enqueue, the claim and the
# completions of a worker's batch) keep job_counts themselves, one upsert per (type, status) per
# transaction (``.tally``), instead of two statements per row in the triggers. Such a statement
# marks its rows by writing ``tally`` (1 on insert; ``1 - tally`` on update: integers 0 and 1 take
# no bytes in a row), and the count triggers skip exactly those rows; every other writer (an
# operator, the supervisor, a trigger, a tool around jobq) leaves ``tally`` alone and is counted
# by the triggers as before. Deletes are always counted by the trigger.
TALLY = """
ALTER TABLE jobs ADD COLUMN tally INTEGER NOT NULL DEFAULT 0;
DROP TRIGGER job_counts_insert;
CREATE TRIGGER job_counts_insert AFTER INSERT ON jobs
WHEN NEW.tally = 0
BEGIN
    INSERT INTO job_counts (type, status, n) VALUES (NEW.type, NEW.status, 1)
    ON CONFLICT (type, status) DO UPDATE SET n = n + 1;
END;
DROP TRIGGER job_counts_update;
CREATE TRIGGER job_counts_update AFTER UPDATE OF status ON jobs
WHEN OLD.status <> NEW.status AND NEW.tally = OLD.tally
BEGIN
    UPDATE job_counts SET n = n - 1 WHERE type = OLD.type AND status = OLD.status;
    INSERT INTO job_counts (type, status, n) VALUES (NEW.type, NEW.status, 1)
    ON CONFLICT (type, status) DO UPDATE SET n = n + 1;
END;
DROP TRIGGER job_counts_delayed_insert;
CREATE TRIGGER job_counts_delayed_insert AFTER INSERT ON jobs
WHEN NEW.tally = 0 AND NEW.status = 'pending' AND NEW.run_at > NEW.created_at
BEGIN
    INSERT INTO job_counts (type, status, n) VALUES (NEW.type, 'delayed', 1)
    ON CONFLICT (type, status) DO UPDATE SET n = n + 1;
END;
DROP TRIGGER job_counts_delayed_update;
CREATE TRIGGER job_counts_delayed_update AFTER UPDATE OF status, run_at ON jobs
WHEN NEW.tally = OLD.tally
 AND (OLD.status = 'pending' AND OLD.run_at > OLD.created_at) <> (NEW.status = 'pending' AND NEW.run_at > NEW.created_at)
BEGIN
    INSERT INTO job_counts (type, status, n)
    VALUES (NEW.type, 'delayed', CASE WHEN NEW.status = 'pending' THEN 1 ELSE -1 END)
    ON CONFLICT (type, status) DO UPDATE SET n = n + excluded.n;
END;
"""

MIGRATIONS: list[str] = [
    V1,
    SCHEDULES_AND_LIMITS,
    ATTEMPT_HISTORY,
    JOB_COUNTS,
    RUN_TIMES,
    TRACE,
    QUEUES,
    KEYS,
    FLOWS,
    CANCEL_AND_PROGRESS,
    TALLY,
    FLOW_CHAINS,
    FLOW_SETTLE,
]
VERSION = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the schema to :data:`VERSION` in one ``BEGIN IMMEDIATE`` transaction per step.

    Safe to call from many processes at once: the version is read inside the write lock.
    Returns the version found before migrating. Refuses a database newer than this code.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = conn.execute("PRAGMA user_version").fetchone()[0]
        if found > VERSION:
            raise StoreRefused(
                f"database schema version {found} is newer than this jobq ({VERSION})"
            )
        for version in range(found, VERSION):
            for statement in _statements(MIGRATIONS[version]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version + 1}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return found


def _statements(script: str) -> list[str]:
    out, buf = [], ""
    for line in script.splitlines(keepends=True):
        if line.lstrip().startswith("--"):
            continue
        buf += line
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    return [s for s in out if s]
