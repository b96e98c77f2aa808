"""The PostgreSQL engine's SQL for leases, schedules, retention and per-type limits (issue 6, 14).

:class:`PgLifecycle` is a mixin of ``PgStore``: it uses the store's ``conn``, ``_tx``,
``schema`` and ``enqueue``, and keeps the store's contract (every write is one statement or
one short transaction; ``now`` comes from the caller, the lease from the database's clock).

- Leases: :meth:`heartbeat` renews the jobs a worker holds and gives back, in the same
  statement, the running jobs of that owner it does not hold (a claim whose answer was lost);
  :meth:`release_owner` re-queues a dead owner's jobs and never waits on another session's row
  locks (``SKIP LOCKED``: the transaction of a host cut off mid-way holds them until the server
  ends it, see ``connection.session_limits``; what it skips is released by a later round).
- Schedules: ``schedule_marks`` remembers the last tick each ``[[schedule]]`` entry handled.
  :meth:`run_schedule` makes sure the mark's row exists (``ON CONFLICT DO NOTHING``), locks it
  (``FOR UPDATE``), enqueues the due ticks and advances it in one transaction: supervisors on
  several hosts take turns on the row lock, and the second one sees the first one's tick.
- Retention: :meth:`delete_finished` walks the primary key (ids grow with time) one bounded
  chunk per statement, as the SQLite engine does; :meth:`pacer` runs those chunks in short
  transactions of their own (PostgreSQL locks rows, not the database: no pauses are needed).
- Limits: PostgreSQL does not serialize writers the way SQLite's single write lock does, so
  :meth:`claim_limited_in` first takes a transaction-level advisory lock on a key of this
  schema: limited claims on every host take turns, and each one counts the running jobs and
  recent starts with every earlier limited claim committed. The plain ``claim`` never takes
  it (it is only used while no type has a limit).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence, TypeVar

from ...clock import iso, parse_iso
from ...job import TERMINAL, Job, NewJob, Released, ScheduleMark, release_outcome
from ...limits import pick_claims

if TYPE_CHECKING:
    import psycopg

    from ...limits import TypeLimit

T = TypeVar("T")

RELEASE = "owner = NULL, owner_pid = NULL, heartbeat_at = NULL "  # a job no worker holds

# One statement: the process row and the held jobs' leases renewed on the server's clock; the
# owner's other running jobs (claimed, answer lost: never started) pending again, due now,
# their attempt given back, idle workers notified. ``held`` NULL: renew every running job.
_BEAT = ("WITH p AS (UPDATE processes SET heartbeat_at = db_now() WHERE id = %(o)s), "
         "r AS (UPDATE jobs SET status = 'pending', attempts = attempts - 1, run_at = %(now)s, "
         "updated_at = %(now)s, " + RELEASE + "WHERE status = 'running' AND owner = %(o)s "
         "AND id <> ALL(%(held)s::text[]) RETURNING 1), "
         "u AS (UPDATE jobs SET heartbeat_at = db_now() WHERE status = 'running' AND owner = %(o)s "
         "AND (%(held)s::text[] IS NULL OR id = ANY(%(held)s::text[])) RETURNING 1) "
         "SELECT (SELECT count(*) FROM u) AS renewed, "
         "(SELECT count(*) FROM (SELECT pg_notify(%(channel)s, '') FROM r LIMIT 1) n) AS notified")
# A dead owner's running jobs, without waiting for rows another session has locked.
_OWNED = "SELECT * FROM jobs WHERE status = 'running' AND owner = %s FOR UPDATE SKIP LOCKED"
_REQUEUE = ("UPDATE jobs SET status = %(status)s, attempts = %(attempts)s, error = %(reason)s, "
            "run_at = CASE WHEN %(status)s = 'pending' THEN %(now)s ELSE run_at END, "
            "completed_at = CASE WHEN %(status)s = 'failed' THEN %(now)s END, "
            "max_attempts = coalesce(max_attempts, %(limit)s), updated_at = %(now)s, "
            + RELEASE + "WHERE id = %(id)s AND status = 'running' AND owner = %(owner)s")
_ENDED = ("INSERT INTO job_attempts (job_id, type, attempt, outcome, due_at, started_at, ended_at, owner, "
          "error) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)")

_PAUSED = "SELECT 1 FROM control WHERE name = 'paused' AND value = '1'"
_LATEST_START = "SELECT max(started_at) AS t FROM type_starts"
# One key per schema (hashtext of a name of jobq's own), held until the transaction ends.
_LIMITS_LOCK = "SELECT pg_advisory_xact_lock(hashtext(%s))"

_RUNNING_BY_TYPE = "SELECT type, count(*) AS n FROM jobs WHERE status = 'running' GROUP BY type"
# The claim order of the plain claim (index jobs_claim); types with no room are filtered out.
_CANDIDATES = ("SELECT id, type FROM jobs WHERE status = 'pending' AND run_at <= %s {skip}"
               "ORDER BY priority DESC, run_at, created_at LIMIT %s")
# started_at/updated_at: the caller's clock; the lease: the database's (hosts judge it alike).
_CLAIM_IDS = ("UPDATE jobs SET status = 'running', attempts = attempts + 1, owner = %s, owner_pid = %s, "
              "started_at = %s, heartbeat_at = db_now(), updated_at = %s "
              "WHERE id = ANY(%s) AND status = 'pending' RETURNING *")
CANDIDATES_PER_SLOT = 4   # candidates read per job wanted, for batches that fill a type's room

_MARK = "SELECT fingerprint, last_tick FROM schedule_marks WHERE name = %s FOR UPDATE"
_NEW_MARK = ("INSERT INTO schedule_marks (name, fingerprint, last_tick, updated_at) VALUES (%s, %s, %s, %s) "
             "ON CONFLICT (name) DO NOTHING RETURNING name")
_ANCHOR = "UPDATE schedule_marks SET fingerprint = %s, last_tick = %s, updated_at = %s WHERE name = %s"
_ADVANCE = "UPDATE schedule_marks SET last_tick = %s, updated_at = %s WHERE name = %s"

# Retention walks the primary key (ids grow with time): one bounded range per statement.
_CHUNK_END = "SELECT id FROM jobs WHERE id > %s ORDER BY id LIMIT 1 OFFSET %s"
_LAST_ID = "SELECT max(id) AS id FROM jobs WHERE id > %s"
_DELETE_FINISHED = ("DELETE FROM jobs WHERE id > %(after)s AND id <= %(upto)s AND ("
                    "(status = 'completed' AND coalesce(completed_at, updated_at) < %(completed)s) OR "
                    "(status = 'cancelled' AND coalesce(completed_at, updated_at) < %(cancelled)s) OR "
                    "(status = 'failed' AND coalesce(completed_at, updated_at) < %(failed)s)) "
                    "RETURNING status")


Plan = Callable[[float], "tuple[list[NewJob], float | None]"]  # see shared.contract


class Chunks:
    """The PostgreSQL engine's pacer for a bulk write (``shared.retention.purge``): each chunk
    of ``rows`` is one transaction of its own, run at once. Row locks let other writers work
    meanwhile, so there is nothing to pace; the chunks only keep each transaction short."""

    def __init__(self, rows: int = 500) -> None:
        self.rows = max(1, int(rows))

    def chunk(self, store: Any, fn: Callable[[Any, int], T]) -> T:
        """Run ``fn(conn, rows)`` in one transaction of ``store``; what ``fn`` returned."""
        rows = self.rows
        return store._tx(lambda c: fn(c, rows))


def pg_text(text: str | None) -> str | None:
    """PostgreSQL text cannot hold NUL: keep it visible as an escape instead."""
    return text if text is None or "\x00" not in text else text.replace("\x00", "\\x00")


class PgLifecycle:
    """Leases, schedules, retention and limited claims (mixed into ``PgStore``)."""

    conn: "psycopg.Connection"
    schema: str
    channel: str
    _tx: Callable[..., Any]
    enqueue: Callable[..., list[str]]

    # -- leases ---------------------------------------------------------------------------------

    def heartbeat(self, owner: str, now: float | Callable[[], float],
                  holding: Sequence[str] | None = None) -> int:
        """Renew the leases of the running jobs of ``owner`` in ``holding`` and its process row,
        on the server's clock (hosts' clocks may disagree), in one statement; with ``holding``
        the owner's other running jobs are given back (see the contract). Renewed job count."""
        stamp = iso(now() if callable(now) else now)
        held = None if holding is None else list(holding)
        row = self.conn.execute(_BEAT, {"o": owner, "now": stamp, "held": held, "channel": self.channel})
        return row.fetchone()["renewed"]

    def release_owner(self, owner: str, reason: str, now: float, *,
                      max_attempts_for: Callable[[Job], int], count_attempt: bool = True,
                      unstarted: Iterable[str] = ()) -> list[Released]:
        """Re-queue (or fail, attempts used up) the running jobs of a dead or fenced ``owner``,
        in one transaction; every update guarded by ``running`` and the owner. Rows locked by
        another session are skipped, never waited for (see the module): they are left running
        for the next call."""
        unstarted = set(unstarted)
        stamp = iso(now)
        reason = pg_text(reason)

        def tx(c: Any) -> list[Released]:
            out = []
            for row in c.execute(_OWNED, (owner,)).fetchall():
                job = Job.from_row(row)
                limit = max_attempts_for(job)
                status, attempts = release_outcome(job, limit, count_attempt and job.id not in unstarted)
                done = c.execute(_REQUEUE, {"status": status, "attempts": attempts, "reason": reason,
                                            "now": stamp, "limit": limit, "id": job.id, "owner": owner}).rowcount
                if done and attempts >= job.attempts:  # the run counted: it is an attempt that ended
                    c.execute(_ENDED, (job.id, job.type, job.attempts, "retry" if status == "pending" else "failed",
                                       max(job.run_at, job.created_at), job.started_at, stamp, owner, reason))
                out.append(Released(job.id, job.type, status, attempts))
            if any(r.status == "pending" for r in out):  # idle workers: these are due now
                c.execute("SELECT pg_notify(%s, '')", (self.channel,))
            return out
        return self._tx(tx)

    # -- schedules ------------------------------------------------------------------------------

    def schedule_marks(self) -> dict[str, ScheduleMark]:
        """Every schedule's mark, by name (a plain read)."""
        rows = self.conn.execute("SELECT name, fingerprint, last_tick FROM schedule_marks").fetchall()
        return {r["name"]: ScheduleMark(r["fingerprint"], parse_iso(r["last_tick"])) for r in rows}

    def run_schedule(self, name: str, fingerprint: str, now: float, plan: Plan) -> list[str] | None:
        """Enqueue a schedule's due ticks exactly once, in one transaction holding the mark's
        row lock (see the SQLite engine's ``run_schedule`` for the contract).

        A schedule without a mark, or whose mark has another ``fingerprint``, is anchored at
        ``now`` and None is returned. Otherwise ``plan(last_tick)`` (pure, no I/O) returns the
        jobs to enqueue and the new last tick (None: nothing due, ``[]`` returned); the jobs'
        ids are returned. A supervisor that waited for the lock reads the mark as the one
        before it left it, so a tick is enqueued once however many supervisors run.
        """
        stamp = iso(now)

        def tx(c: "psycopg.Connection") -> list[str] | None:
            if c.execute(_NEW_MARK, (name, fingerprint, stamp, stamp)).fetchone() is not None:
                return None   # a new mark, anchored at now
            row = c.execute(_MARK, (name,)).fetchone()
            if row["fingerprint"] != fingerprint:
                c.execute(_ANCHOR, (fingerprint, stamp, stamp, name))
                return None
            jobs, advance_to = plan(parse_iso(row["last_tick"]))
            if advance_to is None:
                return []
            ids = self.enqueue(jobs, now, conn=c) if jobs else []
            c.execute(_ADVANCE, (iso(advance_to), stamp, name))
            return ids
        return self._tx(tx)

    # -- retention ------------------------------------------------------------------------------

    def pacer(self, rows: int = 500) -> Chunks:
        """The chunks of a bulk write (``shared.retention.purge``): ``rows`` per transaction."""
        return Chunks(rows)

    def delete_finished(self, cutoffs: Mapping[str, float | None], after: str = "",
                        chunk: int = 500) -> tuple[dict[str, int], str | None]:
        """:meth:`delete_finished_in` in a transaction of its own."""
        return self._tx(lambda c: self.delete_finished_in(c, cutoffs, after, chunk))

    def delete_finished_in(self, c: "psycopg.Connection", cutoffs: Mapping[str, float | None],
                           after: str = "", chunk: int = 500) -> tuple[dict[str, int], str | None]:
        """Look at the next ``chunk`` jobs by id after ``after`` ("" = the first) and delete those
        whose terminal status has a cutoff (``cutoffs``: 'completed', 'cancelled', 'failed' ->
        time, or None to keep) and that finished before it (no ``completed_at``: ``updated_at``).

        Runs on ``c`` inside the caller's transaction: one statement over one primary-key range
        (their attempt history goes with them, by trigger). Returns the deletions per status and
        the id to continue after (None: that was the end).
        """
        row = c.execute(_CHUNK_END, (after, max(0, chunk - 1))).fetchone()
        upto = row["id"] if row else c.execute(_LAST_ID, (after,)).fetchone()["id"]
        if upto is None:
            return {}, None
        params = {"after": after, "upto": upto, **{s: None if cutoffs.get(s) is None else iso(cutoffs[s])
                                                   for s in TERMINAL}}
        deleted: dict[str, int] = {}
        for r in c.execute(_DELETE_FINISHED, params).fetchall():
            deleted[r["status"]] = deleted.get(r["status"], 0) + 1
        return deleted, upto if row else None

    # -- limits ---------------------------------------------------------------------------------

    def claim_limited(self, owner: str, owner_pid: int, now: float, limits: Mapping[str, "TypeLimit"],
                      limit: int = 1, *, types: Sequence[str] | None = None,
                      ids: Sequence[str] | None = None) -> list[Job]:
        """Like ``claim``, but never past a type's ``concurrency`` or ``rate`` (across every
        host on the database), in one transaction. See :meth:`claim_limited_in`."""
        return self._tx(lambda c: self.claim_limited_in(c, owner, owner_pid, now, limits, limit,
                                                        types=types, ids=ids))

    def claim_limited_in(self, c: "psycopg.Connection", owner: str, owner_pid: int, now: float,
                         limits: Mapping[str, "TypeLimit"], limit: int = 1, *,
                         types: Sequence[str] | None = None, ids: Sequence[str] | None = None) -> list[Job]:
        """The limited claim, inside the caller's transaction on ``c``.

        Takes this schema's limits lock (held to the end of the transaction: the limited
        claims of every host take turns; each statement after it, in READ COMMITTED, sees the
        claims committed before). Then takes up to ``limit`` due pending jobs in claim order
        (priority, then first due, then first created), skipping the types with no room:
        ``running < concurrency`` and fewer than ``count`` claims in the last ``period``
        seconds. A held-back job stays pending and blocks nothing else. A job of a
        rate-limited type is only ever claimed first in a batch and ends it, so it starts at
        once: its start is counted now (in ``type_starts``). Returns nothing while the queue is
        paused. ``types`` and ``ids`` (``shared.inline``) take only jobs of those types or with
        those ids.
        """
        if limit < 1:
            return []
        c.execute(_LIMITS_LOCK, (f"jobq.limits.{self.schema}",))
        if c.execute(_PAUSED).fetchone():
            return []
        # ``now`` was read before this transaction won the lock: a claim committed meanwhile
        # may carry a later time. Never count with an earlier one (see the SQLite engine).
        latest = c.execute(_LATEST_START).fetchone()["t"]
        if latest is not None:
            now = max(now, parse_iso(latest))
        stamp = iso(now)
        running = {r["type"]: r["n"] for r in c.execute(_RUNNING_BY_TYPE).fetchall()}
        room = {t: _room(c, lim, running.get(t, 0), now) for t, lim in limits.items()}
        rated = {t for t, lim in limits.items() if lim.rate}
        full = [t for t, n in room.items() if n <= 0]
        skip, only = "", []
        for cond, values in (("type <> ALL(%s)", full or None), ("type = ANY(%s)", types),
                             ("id = ANY(%s)", ids)):
            if values is not None:
                skip += f"AND {cond} "
                only.append(list(values))
        rows = c.execute(_CANDIDATES.format(skip=skip), (stamp, *only, limit * CANDIDATES_PER_SLOT)).fetchall()
        picked = pick_claims([(r["id"], r["type"]) for r in rows], room, rated, limit)
        if not picked:
            return []
        claimed = c.execute(_CLAIM_IDS, (owner, owner_pid, stamp, stamp, picked)).fetchall()
        order = {job_id: i for i, job_id in enumerate(picked)}
        jobs = sorted((Job.from_row(r) for r in claimed), key=lambda j: order[j.id])
        starts = [(j.type, stamp) for j in jobs if j.type in rated]
        if starts:
            with c.cursor() as cur:
                cur.executemany("INSERT INTO type_starts (type, started_at) VALUES (%s, %s)", starts)
        return jobs


def _room(c: "psycopg.Connection", lim: "TypeLimit", running: int, now: float) -> float:
    """How many more jobs of one type may be claimed now (inf when unlimited)."""
    room = math.inf if lim.concurrency is None else lim.concurrency - running
    if lim.rate is not None:
        count, period = lim.rate
        c.execute("DELETE FROM type_starts WHERE type = %s AND started_at <= %s", (lim.type, iso(now - period)))
        used = c.execute("SELECT count(*) AS n FROM type_starts WHERE type = %s", (lim.type,)).fetchone()["n"]
        room = min(room, count - used)
    return room

