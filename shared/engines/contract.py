"""The store contract: the transitions jobq needs from a database engine, each with its
guarantee, grouped by who makes them (:class:`Store`: at most 30 methods, counted by
``tests/engines/test_store_contract.py``).

What is not a transition is not here: the reads, written once for every engine
(:class:`shared.engines.reads.Reads`), and running the read layer's SQL
(:class:`shared.engines.opsaccess.OpsAccess`, for :mod:`shared.ops` only). An engine
(``shared.engines.sqlite``, ``shared.engines.postgres``) implements all three in one store class
(:class:`EngineStore`); code outside ``shared.engines`` types its store with the view it uses
(:class:`ProducerStore`, :class:`WorkerStore`, :class:`UpkeepStore`, :class:`TransferStore`,
:class:`OpsStore`) and opens it through the factory (:func:`shared.engines.open_store`). The
rules every engine keeps:

- Every write is one guarded statement or one short transaction; reads never turn into writes.
- ``claim`` takes pending, due jobs atomically: ``running``, ``attempts + 1``, the caller as
  owner. Outcomes (``finish_and_claim``, ``release_*``) are guarded by id, ``running``, attempt
  and owner; an outcome that matches no row is dropped (the lease was lost) and reported so.
- Times cross this boundary as Unix seconds (floats) and come from the caller's clock, except
  leases: an engine that many hosts share writes ``heartbeat_at`` (jobs and process rows) with
  its server's clock and judges lease ages on it, so no two hosts' clocks are ever compared.
  (A :class:`shared.model.job.Job` shows its times as ISO text: public output.)
- Failures are :mod:`shared.model.errors` exceptions (``StoreBusy``, ``StoreUnavailable``), naming
  the database and the cause; a driver's own exceptions never leave the engine.
- A store belongs to the process and thread that opened it: open after ``fork()``.

The tests in ``tests/engines/test_store_contract.py`` and ``tests/engines/test_store_stateful.py`` run against
every engine fixture in ``tests/engines/__init__.py``: a new engine gets them by adding one fixture.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

from shared.engines.opsaccess import OpsAccess
from shared.engines.reads import Reads
from shared.model.job import Finish, Job, NewJob, Released, RunningGroup

# the rows jobq copy moves
from shared.engines.transfer import ATTEMPT_FIELDS, EDGE_FIELDS, JOB_FIELDS, Imported

# the supervisor's upkeep: what engines add to it
from shared.engines.upkeep import CLUSTER, HOST, Round, UpkeepTask

Plan = Callable[[float], "tuple[list[NewJob], float | None]"]


class Connection(Protocol):
    """What every store has: where it points, and closing."""

    location: str  # the file or server, for messages and ``jobq status``

    def close(self) -> None:
        """Let go of the connection; every later call raises ``StoreUnavailable`` (idempotent)."""
        ...

    def for_thread(self) -> Any:
        """A store of this engine for another thread of this process (the worker's heartbeat
        thread), called in that thread, which closes it: a new connection where connections belong to one
        thread (SQLite), or this one shared, its calls taking turns, where a connection is a
        server's scarce resource (PostgreSQL: one connection per worker process)."""
        ...

    @property
    def closed(self) -> bool:
        """Has :meth:`close` been called?"""
        ...

    def __enter__(self) -> Any:
        """The store itself, for a ``with`` block that closes it."""
        ...

    def __exit__(self, *exc: object) -> None:
        """:meth:`close`."""
        ...


class ProducerTransitions(Connection, Protocol):
    """What ``JobQueue`` changes: jobs in, the pause flags."""

    def enqueue(self, jobs: Sequence[NewJob], now: float, conn: Any = None) -> list[str]:
        """Insert jobs, pending and due at their ``run_at``, all or none; their ids in order (a
        kept job's id where its ``key`` is taken: never two jobs with one key). A job with a
        ``unique`` scope that can lapse first frees its key from a kept job outside that scope
        (that job's key becomes NULL), in the same transaction (shared.engines.sql.uniquescope).
        Idle workers learn of them (see :class:`Wakeup`). ``conn``: the application's own
        connection of this engine, whose transaction the rows join (nothing is committed here)."""
        ...

    def enqueue_flow(self, jobs: Sequence[NewJob], now: float, conn: Any = None) -> list[str]:
        """``enqueue`` for jobs that wait for others (``NewJob.after``: existing jobs or earlier
        ones of ``jobs``): one transaction; each ``waiting`` until its parents end, settled by
        the statement that ends each parent. An unknown or later parent (a cycle) raises
        ``FlowError`` and nothing is written (shared.engines.sql.flows)."""
        ...

    def set_paused(self, paused: bool) -> None:
        """Set the pause flag (one statement): while set, every claim returns nothing."""
        ...

    def set_queue_paused(self, queue: str, paused: bool) -> None:
        """Pause or resume one named queue (one statement): while paused, no claim takes its jobs."""
        ...


class WorkerTransitions(Connection, Protocol):
    """What a worker process (its loop and its heartbeat thread) changes."""

    def claim(self, owner: str, owner_pid: int, now: float, limit: int = 1) -> list[Job]:
        """Atomically take up to ``limit`` due pending jobs in claim order (priority, then first
        due, then first created): each ``running``, ``attempts + 1``, ``owner`` its owner, its
        lease begun. One statement; no job is ever taken by two claims; nothing while paused."""
        ...

    def serve(self, queues: Sequence[tuple[str, int]] | None) -> None:
        """Claims (every claim method) take only jobs of these named queues ((name, weight):
        one statement per queue, tried in a weighted random order drawn per claim) from now on;
        None: of every queue. A paused queue's jobs are never claimed."""
        ...

    def finish_and_claim(
        self,
        finishes: Sequence[Finish],
        owner: str,
        owner_pid: int,
        now: float | Callable[[], float],
        limit: int,
        limits: Mapping[str, Any] | None = None,
        types: Sequence[str] | None = None,
    ) -> tuple[list[bool], list[Job]]:
        """Record outcomes (each guarded by id, ``running``, attempt and owner; an outcome
        re-sent after an unknown commit is recognised, never applied twice) and claim up to
        ``limit`` more; per finish whether it is recorded (False: the lease was lost and the
        outcome dropped), and the claimed jobs. ``limits``: shared.model.limits.type_limits, when
        set (the claim is then :meth:`UpkeepStore.claim_limited`'s); ``types``: claim only jobs of
        these types (also through ``claim_limited``: the async runner's claim). ``now``: a time,
        or a clock's ``now``, which a limited claim reads once it holds its lock."""
        ...

    def release_unstarted(self, owner: str, job_ids: Sequence[str], now: float) -> int:
        """Give back claimed, never started jobs of ``owner`` (guarded by ``running`` and the
        owner): pending, due now, their attempt returned; how many."""
        ...

    def heartbeat(
        self, owner: str, now: float | Callable[[], float], holding: Sequence[str] | None = None
    ) -> int:
        """Refresh the leases of ``owner``'s running jobs that it holds (``holding``: their ids;
        None: every one) and its process row; the renewed job count. With ``holding``, the
        owner's running jobs not in it (claimed, but the claim's answer never reached the
        worker: never started) are given back in the same statement or transaction: pending,
        due now, their attempt returned. ``now`` (or a clock function, read once the write can
        proceed) times the release; the leases' time is the engine's (see ``lease_ages``)."""
        ...

    def check_in(self, owner: str, progress: Sequence[tuple[str, int, str]] = ()) -> set[str]:
        """Store the progress ``(job id, attempt, JSON)`` of ``owner``'s running jobs (guarded by
        id, ``running``, attempt and owner) and return the ids of its running jobs whose cancel
        was requested."""
        ...

    def register_process(
        self,
        token: str,
        kind: str,
        pid: int,
        host: str,
        now: float,
        *,
        slot: int | None = None,
        parent: str | None = None,
    ) -> None:
        """Insert or replace process ``token``'s row (one statement), its lease begun."""
        ...

    def remove_process(self, token: str) -> None:
        """Delete process ``token``'s row (one statement; none: nothing)."""
        ...

    def wakeup(self) -> "Wakeup":
        """How this worker's idle wait learns of new work (see :class:`Wakeup`)."""
        ...


class UpkeepTransitions(Connection, Protocol):
    """What the supervisor's upkeep changes: dead-owner recovery, the process registry,
    schedule marks, retention, limits' bookkeeping, the upkeep lead; and the lease ages it judges them by,
    which each engine measures on its own clock."""

    def lease_ages(self, now: float) -> dict[str, float]:
        """Job id -> seconds since each running job's lease was last renewed (claimed or
        heartbeat), measured on the engine's clock: several hosts judge these leases, and their
        clocks may disagree. An engine whose times come from the caller (SQLite: one host)
        answers ``now - heartbeat_at``; one with a server clock (PostgreSQL) answers the
        server's statement time minus ``heartbeat_at`` (which its heartbeat wrote with that
        clock) and ignores ``now``. A running job whose lease time cannot be read is left out."""
        ...

    def running_groups(self, now: float) -> list[RunningGroup]:
        """The running jobs summed up per owner and type, one row per group and no job row
        read (the supervisor's every round: it reads :meth:`running` only when a group needs a
        look). ``oldest_lease``: as :meth:`lease_ages` would give the group's oldest, None when
        no lease of the group has a time, ``inf`` when one cannot be read as a time."""
        ...

    def process_ages(self, now: float) -> dict[str, float]:
        """Process token -> seconds since its ``processes`` row was last refreshed, on the
        engine's clock as :meth:`lease_ages` (rows of other hosts are judged by this)."""
        ...

    def release_owner(
        self,
        owner: str,
        reason: str,
        now: float,
        *,
        max_attempts_for: Callable[[Job], int],
        count_attempt: bool = True,
        unstarted: Iterable[str] = (),
    ) -> list[Released]:
        """Re-queue the running jobs of a dead or killed ``owner`` in one transaction, each
        update guarded by ``running`` and the owner: with ``count_attempt`` the run counts (its
        attempts used up: ``failed`` with ``reason``; else pending, due now); without it, and
        for the jobs in ``unstarted``, the attempt is given back. What was released; rows
        another session holds locked may be left for a later call."""
        ...

    def register_process(
        self,
        token: str,
        kind: str,
        pid: int,
        host: str,
        now: float,
        *,
        slot: int | None = None,
        parent: str | None = None,
    ) -> None:
        """As :meth:`WorkerTransitions.register_process` (the supervisor's own row)."""
        ...

    def touch_process(self, token: str, now: float) -> None:
        """Renew the lease of process ``token``'s row and of its children's (the rows whose
        ``parent`` is ``token``), in one statement; none: nothing."""
        ...

    def remove_process(self, token: str) -> None:
        """As :meth:`WorkerTransitions.remove_process` (a dead child's row)."""
        ...

    def run_schedule(self, name: str, fingerprint: str, now: float, plan: Plan) -> list[str] | None:
        """Enqueue a schedule's due ticks exactly once, however many supervisors run it, in one
        transaction. A schedule without a mark, or whose mark has another ``fingerprint``, is
        anchored at ``now`` (None returned); otherwise ``plan(last_tick)`` (pure) gives the jobs
        and the new last tick (None: nothing due, ``[]`` returned): the jobs' ids."""
        ...

    def purge_finished(
        self, cutoffs: Mapping[str, float | None], chunk: int = 500, pacer: Any = None
    ) -> dict[str, int]:
        """Delete the finished jobs (with their attempt history) older than their status's
        cutoff (``cutoffs``: 'completed', 'cancelled', 'failed' -> Unix time, or None: keep):
        the number deleted per status of ``cutoffs``. Short transactions over primary-key
        ranges (about ``chunk`` jobs looked at to start with), paced by the engine (or
        ``pacer``) so other writers, and other threads sharing the connection, get in between;
        no running or pending job is touched. No cutoff at all: nothing is read."""
        ...

    def claim_limited(
        self,
        owner: str,
        owner_pid: int,
        now: float | Callable[[], float],
        limits: Mapping[str, Any],
        limit: int = 1,
        *,
        types: Sequence[str] | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[Job]:
        """A claim that keeps ``[types]`` limits, in one transaction: never past a type's
        ``concurrency`` or ``rate`` across every process and host; a type with no room is
        skipped, not waited for. Also ``JobQueue.drain``'s (filtered by type or id). ``now``: a
        clock's ``now`` (read once the claim holds its lock: a rate counts real starts), or a time."""
        ...

    def set_paused(self, paused: bool) -> None:
        """As :meth:`ProducerTransitions.set_paused`."""
        ...

    def lead_upkeep(self, token: str, now: float, hold: float) -> bool:
        """Take or renew the upkeep lead for supervisor ``token`` in one guarded statement: True
        when it is ours now (it was ours, free, or not renewed for ``hold`` seconds, judged on the
        engine's lease clock as :meth:`lease_ages`: the server's where many hosts share the
        database). At most one supervisor holds it at a time; one that stops renewing it loses
        it ``hold`` seconds later. ``hold <= 0``: give it up if ours (False returned)."""
        ...


class TransferTransitions(Connection, Protocol):
    """What ``jobq copy`` changes: jobs (every column), their attempt history and workflow
    edges into a store (read out of the other by :class:`Reads`' ``export_*``), idempotent by
    job id (dicts keyed by the ``*_FIELDS``); and the copied jobs deleted from the source."""

    def import_jobs(
        self,
        rows: Sequence[Mapping[str, Any]],
        attempts: Sequence[Mapping[str, Any]] = (),
        edges: Sequence[Mapping[str, Any]] = (),
    ) -> Imported:
        """Insert ``rows`` (every column; a few hundred a call) in one transaction, with the ``attempts``
        and ``edges`` of the jobs inserted now. Nothing here is overwritten: a job whose id is here is
        ``present`` or ``differing``, one whose key a job here holds ``key_taken``, an edge here kept.
        Columns are stored as this engine stores them (PostgreSQL: NUL in an error as ``\\x00``, in
        JSON ``\\u0000``); a row it cannot store (NUL in an id, type or key; a number out of range) is
        named in ``rejected``. Workflows end as if every job had been here: parents named are marked,
        and an ended parent with an edge not done to a waiting child, either one inserted now,
        settles it by the schema's trigger (so a settled child may then be ``present``)."""
        ...

    def delete_copied(self, rows: Sequence[Mapping[str, Any]]) -> list[str]:
        """Delete in one transaction (with history and edges) the jobs of ``rows`` unchanged since read
        (id, status, attempts, ``updated_at``), not running; the ids deleted. A parent deleted settles nothing."""
        ...


class Store(
    ProducerTransitions, WorkerTransitions, UpkeepTransitions, TransferTransitions, Protocol
):
    """The contract: every transition an engine implements, each with its guarantee."""


# What code outside the engines types a store with: a caller's transitions and the reads.
class ProducerStore(ProducerTransitions, Reads, Protocol):
    """What ``JobQueue`` needs: jobs in, a job's state out, the pause flags."""


class WorkerStore(WorkerTransitions, Reads, Protocol):
    """What a worker process (its loop and its heartbeat thread) needs."""


class UpkeepStore(UpkeepTransitions, Reads, Protocol):
    """What the supervisor's upkeep needs."""


class TransferStore(TransferTransitions, Reads, Protocol):
    """What ``jobq copy`` needs of each of its two stores."""


class OpsStore(ProducerTransitions, Reads, OpsAccess, Protocol):
    """What the read layer (:mod:`shared.ops`) needs: the reads, the pause flags and a way to
    run its own SQL."""


class EngineStore(Store, Reads, OpsAccess, Protocol):
    """What an engine's store class is, and what :func:`shared.engines.open_store` returns."""


class Wakeup(Protocol):
    """An idle worker's wait, as its engine arranges it.

    The worker loop asks :meth:`prepare` (with the worker's ``poll_interval``) for a file descriptor to ``select`` on (with its signal
    pipe) and a timeout, waits, and tells :meth:`woke` whether that descriptor was ready; the
    answer says whether this worker should claim now (True), read first and claim only if a
    job is due (False), or neither: wait again (None: the engine's own reads, if any, are in
    :meth:`prepare`). Around claims: :meth:`before_claim` just before asking for the write lock,
    :meth:`fast_claim` for an engine's quicker claim while this worker is the one to claim (None:
    use the ordinary claim), :meth:`claimed` once jobs came back."""

    def prepare(self, now: float, poll_interval: float) -> tuple[int | None, float]: ...

    def woke(self, ready: bool) -> bool | None: ...

    def before_claim(self) -> None: ...

    def fast_claim(
        self, owner: str, owner_pid: int, now: Callable[[], float], limit: int
    ) -> list[Job] | None: ...

    def claimed(self) -> None: ...

    def close(self) -> None: ...
