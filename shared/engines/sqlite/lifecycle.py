"""The SQLite engine's SQL for leases, schedules, retention and per-type limits (issue 6).

:class:`LifecycleStore` is a mixin of :class:`SqliteStore`: it uses the store's
``conn``, ``_write``, ``_immediate`` and ``enqueue``, and keeps the store's contract (every write
is one statement or a ``BEGIN IMMEDIATE`` transaction; RETURNING cursors are fetched fully;
times come from the caller).

- Leases: :meth:`heartbeat` renews the jobs a worker holds and gives back, in the same
  transaction, the running jobs of that owner it does not hold (a claim whose answer was
  lost); :meth:`release_owner` re-queues a dead owner's jobs.
- Schedules: ``schedule_marks`` remembers the last tick each ``[[schedule]]`` entry handled;
  :meth:`run_schedule` reads it, enqueues the due ticks (idempotency key per schedule and tick)
  and advances it in one transaction, so two supervisors never enqueue a tick twice.
- Retention: :meth:`delete_finished` walks the primary key (ids grow with time) one bounded
  chunk per statement, so the write lock is never held long and no index on finished jobs is
  needed (every job would pay for one).
- Limits: :meth:`claim_limited` is the claim used when some type has a ``concurrency`` or
  ``rate`` limit. Types at their limit are skipped, not waited for: other types keep flowing.
  The fast, unlimited ``claim`` statement is untouched, and no index is added to ``jobs``.
"""
from __future__ import annotations

import json
import math
import sqlite3
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from ...clock import iso, parse_iso
from ...job import TERMINAL, Job, NewJob, Released, ScheduleMark, release_outcome
from ...limits import pick_claims

if TYPE_CHECKING:
    from ...limits import TypeLimit

RELEASE = "owner = NULL, owner_pid = NULL, heartbeat_at = NULL "  # a job no worker holds

_HELD = "(SELECT value FROM json_each(?))"  # the ids a worker holds, as one JSON array
_RENEW = "UPDATE jobs SET heartbeat_at = ? WHERE status = 'running' AND owner = ?"
# claimed but not held (the claim's answer was lost, never started): pending, due now, attempt back
_GIVE_BACK = ("UPDATE jobs SET status = 'pending', attempts = attempts - 1, run_at = ?, updated_at = ?, "
              + RELEASE + f"WHERE status = 'running' AND owner = ? AND id NOT IN {_HELD}")
_REQUEUE = ("UPDATE jobs SET status = ?, attempts = ?, error = ?, run_at = CASE WHEN ? = 'pending' "
            "THEN ? ELSE run_at END, completed_at = CASE WHEN ? = 'failed' THEN ? END, "
            "max_attempts = coalesce(max_attempts, ?), updated_at = ?, " + RELEASE +
            "WHERE id = ? AND status = 'running' AND owner = ?")

_PAUSED = "SELECT 1 FROM control WHERE name = 'paused' AND value = '1'"
_LATEST_START = "SELECT max(started_at) AS t FROM type_starts"

# Only running rows are read (the planner would rather scan a covering index of every job).
_RUNNING_BY_TYPE = ("SELECT type, count(*) AS n FROM jobs INDEXED BY jobs_running "
                    "WHERE status = 'running' GROUP BY type")
# The claim order and index of the plain claim; types with no room are filtered out.
_CANDIDATES = ("SELECT id, type FROM jobs WHERE status = 'pending' AND run_at <= ? {skip}"
               "ORDER BY priority DESC, run_at, created_at LIMIT ?")
_CLAIM_IDS = ("UPDATE jobs SET status = 'running', attempts = attempts + 1, owner = ?, owner_pid = ?, "
              "started_at = ?, heartbeat_at = ?, updated_at = ? "
              "WHERE id IN ({ids}) AND status = 'pending' RETURNING *")
CANDIDATES_PER_SLOT = 4   # candidates read per job wanted, for batches that fill a type's room

# Retention walks the primary key (ids grow with time): one bounded range per statement.
_CHUNK_END = "SELECT id FROM jobs WHERE id > ? ORDER BY id LIMIT 1 OFFSET ?"
_LAST_ID = "SELECT max(id) AS id FROM jobs WHERE id > ?"
_DELETE_FINISHED = ("DELETE FROM jobs WHERE id > :after AND id <= :upto AND ("
                    "(status = 'completed' AND coalesce(completed_at, updated_at) < :completed) OR "
                    "(status = 'cancelled' AND coalesce(completed_at, updated_at) < :cancelled) OR "
                    "(status = 'failed' AND coalesce(completed_at, updated_at) < :failed)) "
                    "RETURNING status")


Plan = Callable[[float], "tuple[list[NewJob], float | None]"]  # see shared.contract


class LifecycleStore:
    """Leases, schedules, retention and limited claims (mixed into :class:`SqliteStore`)."""

    conn: sqlite3.Connection
    _write: Callable[..., Any]
    _immediate: Callable[..., Any]
    enqueue: Callable[..., list[str]]

    # -- leases ---------------------------------------------------------------------------------

    def heartbeat(self, owner: str, now: float | Callable[[], float],
                  holding: Sequence[str] | None = None) -> int:
        """Refresh the lease of the running jobs of ``owner`` in ``holding`` (None: every one)
        and its process row, in one transaction; with ``holding`` the owner's other running jobs
        are given back (see the contract). Returns the renewed job count.

        ``now`` may be a clock function: it is then read once the write lock is held, so a beat
        that waited for the lock does not record a lease older than it is."""
        def tx(c: sqlite3.Connection) -> int:
            stamp = iso(now() if callable(now) else now)
            if holding is None:
                n = c.execute(_RENEW, (stamp, owner)).rowcount
            else:
                held = json.dumps(list(holding))
                c.execute(_GIVE_BACK, (stamp, stamp, owner, held))
                n = c.execute(f"{_RENEW} AND id IN {_HELD}", (stamp, owner, held)).rowcount
            c.execute("UPDATE processes SET heartbeat_at = ? WHERE id = ?", (stamp, owner))
            return n
        return self._immediate(tx)

    def release_owner(self, owner: str, reason: str, now: float, *,
                      max_attempts_for: Callable[[Job], int], count_attempt: bool = True,
                      unstarted: Iterable[str] = ()) -> list[Released]:
        """Re-queue the running jobs of a dead or killed ``owner``, in one transaction.

        With ``count_attempt`` the interrupted run counts: a job whose attempts are used up is
        ``failed`` with ``reason``; others go back to pending, due now. Without it (a shutdown
        the supervisor itself ordered) the attempt is given back. Jobs in ``unstarted`` (claimed
        in a batch, never begun) always get their attempt back.
        """
        unstarted = set(unstarted)
        stamp = iso(now)

        def tx(c: sqlite3.Connection) -> list[Released]:
            rows = c.execute("SELECT * FROM jobs WHERE status = 'running' AND owner = ?", (owner,)).fetchall()
            out = []
            for row in rows:
                job = Job.from_row(row)
                limit = max_attempts_for(job)
                status, attempts = release_outcome(job, limit, count_attempt and job.id not in unstarted)
                c.execute(_REQUEUE, (status, attempts, reason, status, stamp, status, stamp, limit, stamp,
                                     job.id, owner))
                out.append(Released(job.id, job.type, status, attempts))
            return out
        return self._immediate(tx)

    # -- schedules ------------------------------------------------------------------------------

    def schedule_marks(self) -> dict[str, ScheduleMark]:
        """Every schedule's mark, by name (a plain read)."""
        rows = self.conn.execute("SELECT name, fingerprint, last_tick FROM schedule_marks").fetchall()
        return {r["name"]: ScheduleMark(r["fingerprint"], parse_iso(r["last_tick"])) for r in rows}

    def run_schedule(self, name: str, fingerprint: str, now: float, plan: Plan) -> list[str] | None:
        """Enqueue a schedule's due ticks exactly once, in one ``BEGIN IMMEDIATE`` transaction.

        A schedule without a mark, or whose mark has another ``fingerprint`` (its cron or time
        zone changed), is anchored at ``now`` and None is returned: ticks before that are not
        its business. Otherwise ``plan(last_tick)`` (pure, no I/O) returns the jobs to enqueue
        (each with its tick's idempotency key) and the new last tick, or None when nothing is
        due; the jobs' ids are returned (an existing job's id for a key already taken).
        """
        stamp = iso(now)

        def tx(c: sqlite3.Connection) -> list[str] | None:
            row = c.execute("SELECT fingerprint, last_tick FROM schedule_marks WHERE name = ?",
                            (name,)).fetchone()
            if row is None or row["fingerprint"] != fingerprint:
                c.execute("INSERT INTO schedule_marks (name, fingerprint, last_tick, updated_at) "
                          "VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                          "fingerprint = excluded.fingerprint, last_tick = excluded.last_tick, "
                          "updated_at = excluded.updated_at", (name, fingerprint, stamp, stamp))
                return None
            jobs, advance_to = plan(parse_iso(row["last_tick"]))
            if advance_to is None:
                return []
            ids = self.enqueue(jobs, now, conn=c) if jobs else []
            c.execute("UPDATE schedule_marks SET last_tick = ?, updated_at = ? WHERE name = ?",
                      (iso(advance_to), stamp, name))
            return ids
        return self._immediate(tx)

    # -- retention ------------------------------------------------------------------------------

    def delete_finished(self, cutoffs: Mapping[str, float | None], after: str = "",
                        chunk: int = 500) -> tuple[dict[str, int], str | None]:
        """:meth:`delete_finished_in` in a transaction of its own."""
        return self._immediate(lambda c: self.delete_finished_in(c, cutoffs, after, chunk))

    def delete_finished_in(self, c: sqlite3.Connection, cutoffs: Mapping[str, float | None],
                           after: str = "", chunk: int = 500) -> tuple[dict[str, int], str | None]:
        """Look at the next ``chunk`` jobs by id after ``after`` ("" = the first) and delete those
        whose terminal status has a cutoff (``cutoffs``: 'completed', 'cancelled', 'failed' ->
        time, or None to keep) and that finished before it (no ``completed_at``: ``updated_at``).

        Runs on ``c`` inside the caller's ``BEGIN IMMEDIATE`` (see ``shared.bulk``): one statement
        over one primary-key range. Returns the deletions per status and the id to continue
        after (None: that was the end).
        """
        row = c.execute(_CHUNK_END, (after, chunk - 1)).fetchone()
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
        process on the file), in one ``BEGIN IMMEDIATE`` transaction. See :meth:`claim_limited_in`."""
        return self._immediate(lambda c: self.claim_limited_in(c, owner, owner_pid, now, limits, limit,
                                                               types=types, ids=ids))

    def claim_limited_in(self, c: sqlite3.Connection, owner: str, owner_pid: int, now: float,
                         limits: Mapping[str, "TypeLimit"], limit: int = 1, *,
                         types: Sequence[str] | None = None, ids: Sequence[str] | None = None) -> list[Job]:
        """The limited claim, inside the caller's ``BEGIN IMMEDIATE`` transaction on ``c``.

        Takes up to ``limit`` due pending jobs in claim order (priority, then first due, then
        first created), skipping the types with no room: ``running < concurrency`` and fewer
        than ``count`` claims in the last ``period`` seconds. A held-back job stays pending and
        blocks nothing else. A job of a rate-limited type is only ever claimed first in a batch
        and ends it, so it starts at once: its start is counted now (in ``type_starts``).
        Returns nothing while the queue is paused. Cost: the plain claim's index walk, plus the
        held-back jobs it steps over (due jobs of full types ahead in claim order). ``types`` and
        ``ids`` (the in-process runner of :mod:`shared.inline`) take only jobs of those types or
        with those ids.
        """
        if limit < 1 or c.execute(_PAUSED).fetchone():
            return []
        # ``now`` was read before this transaction won the write lock: a claim that committed in
        # the meantime may carry a later time. Never count with an earlier one, or this claim
        # would see (and delete) the window as of a moment before starts it must count.
        latest = c.execute(_LATEST_START).fetchone()["t"]
        if latest is not None:
            now = max(now, parse_iso(latest))
        stamp = iso(now)
        running = {r["type"]: r["n"] for r in c.execute(_RUNNING_BY_TYPE).fetchall()}
        room = {t: _room(c, lim, running.get(t, 0), now) for t, lim in limits.items()}
        rated = {t for t, lim in limits.items() if lim.rate}
        full = [t for t, n in room.items() if n <= 0]
        skip = f"AND type NOT IN ({', '.join('?' * len(full))}) " if full else ""
        only = [*full]
        for column, values in (("type", types), ("id", ids)):
            if values is not None:
                skip += f"AND {column} IN ({', '.join('?' * len(values))}) "
                only += values
        rows = c.execute(_CANDIDATES.format(skip=skip), (stamp, *only, limit * CANDIDATES_PER_SLOT)).fetchall()
        picked = pick_claims([(r["id"], r["type"]) for r in rows], room, rated, limit)
        if not picked:
            return []
        claimed = c.execute(_CLAIM_IDS.format(ids=", ".join("?" * len(picked))),
                            (owner, owner_pid, stamp, stamp, stamp, *picked)).fetchall()
        jobs = sorted((Job.from_row(r) for r in claimed), key=lambda j: picked.index(j.id))
        c.executemany("INSERT INTO type_starts (type, started_at) VALUES (?, ?)",
                      [(j.type, stamp) for j in jobs if j.type in rated])
        return jobs


def _room(c: sqlite3.Connection, lim: "TypeLimit", running: int, now: float) -> float:
    """How many more jobs of one type may be claimed now (inf when unlimited)."""
    room = math.inf if lim.concurrency is None else lim.concurrency - running
    if lim.rate is not None:
        count, period = lim.rate
        c.execute("DELETE FROM type_starts WHERE type = ? AND started_at <= ?", (lim.type, iso(now - period)))
        used = c.execute("SELECT count(*) AS n FROM type_starts WHERE type = ?", (lim.type,)).fetchone()["n"]
        room = min(room, count - used)
    return room

