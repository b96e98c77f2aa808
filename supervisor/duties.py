"""The bodies of the supervisor's own upkeep tasks, and their table of contents
(:meth:`Duties.tasks`; their intervals: ``supervisor.upkeep``).

    timeouts          police our children's running jobs: hard timeouts, expired leases
    recovery          re-queue what a dead child's release left, and the jobs of this host's
                      dead or silent owners that are not our children
    foreign_recovery  (cluster) re-queue the jobs of other hosts' owners whose leases expired
    processes         refresh our process row (and our idle workers'); record the types we
                      serve
    prune_here        prune this host's dead processes' rows
    prune_processes   (cluster) prune other hosts' stale process rows
    ops_requests      take a ``jobq scale`` request (``supervisor.controls``); publish our
                      counters for ``jobq status``
    unserved          once per config (boot, reload, scale): log the queues no pool serves

The cluster tasks run only on the supervisor that holds the upkeep lead (:attr:`Duties.election`,
``supervisor.election``).

``supervisor.maintenance`` decides (pure functions over what the store says); these act on it.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from shared.engines.contract import CLUSTER, Round, EngineStore, UpkeepStore, UpkeepTask
from shared.engines import upkeep_tasks
from shared.model.job import Job
from shared.runtime.processes import token_host
from shared.runtime.logs import event, get_logger
from shared.execution.policy import JobPolicy

from . import maintenance, scheduler
from .children import ProgressMarks
from .election import Election
from .slots import Slots
from .unserved import UnservedLog
from .upkeep import PROCESS_PRUNE_EVERY, PROCESS_STALE_AFTER, PROCESS_TOUCH_EVERY

log = get_logger("supervisor")


class Supervisor(Protocol):
    """What the task bodies read of the supervisor (the arbiter); read at each call, since a
    reload replaces ``config`` and ``policy``."""

    config: Any
    policy: JobPolicy
    host: str
    token: str
    clock: Any
    slots: Slots
    counters: dict[str, int]
    # shared.execution.handlers.Registry: the handler modules imported at boot or reload
    registry: Any
    deaths: Any  # supervisor.deaths.Deaths (its release_again, its unsettled dead)
    relay: Any  # supervisor.relay.Relay (its controls: supervisor.controls)
    snapshot: str  # the workers' config snapshot, beside their progress files

    def scale(self, n: int, why: str) -> None: ...
    def db(self) -> EngineStore: ...


class Duties:
    """The task bodies, and what they remember between rounds."""

    def __init__(self, sup: Supervisor) -> None:
        self.sup = sup
        self.timeout_log = maintenance.TimeoutLog()  # job.timeout once per attempt
        self.published: dict[str, int] = {}  # the counters as last saved
        self.unserved = UnservedLog()  # the config whose unserved queues were logged
        self.recorded: Any = None  # the registry whose types were last recorded
        self.election = Election(lambda: sup.token)  # do we run the cluster tasks?
        self.host_running = True  # the last read found jobs of this host running (or none yet)
        self.lead_quiet = False  # the last read, as the lead, found no job running anywhere
        self.progress = ProgressMarks()  # our children's progress files as of the last read
        self.marks = scheduler.MarksSeen()  # the schedule marks as last read, while unchanged

    def tasks(self) -> list[UpkeepTask]:
        """The upkeep table of contents (see ``supervisor.upkeep``). Each task is isolated: one
        that raises is logged and tried again next round, and never stops the others."""
        return [
            UpkeepTask("timeouts", 0.0, self.timeouts),
            UpkeepTask("recovery", 0.0, self.recovery),
            UpkeepTask("foreign_recovery", 0.0, self.foreign_recovery, CLUSTER),
            UpkeepTask("processes", PROCESS_TOUCH_EVERY, self.touch_processes),
            UpkeepTask("prune_here", PROCESS_PRUNE_EVERY, self.prune_here),
            UpkeepTask("prune_processes", PROCESS_TOUCH_EVERY, self.prune_elsewhere, CLUSTER),
            *upkeep_tasks(self.sup.config),
            UpkeepTask("schedules", 0.0, self.schedules, CLUSTER),
            UpkeepTask("ops_requests", 0.0, self.ops_requests),
            UpkeepTask("unserved", 0.0, self.log_unserved),
        ]

    def schedules(self, rnd: Round) -> None:
        """Enqueue the due ticks of the schedules; no read while the marks last read show none
        due (``scheduler.MarksSeen``)."""
        sup = self.sup
        if not self.marks.quiet(sup.config, sup.registry, rnd.now, rnd.monotonic):
            scheduler.run_due(
                rnd.store, sup.config, rnd.now, sup.registry, self.marks, rnd.monotonic
            )

    def timeouts(self, rnd: Round) -> None:
        """Police our children's running jobs: hard timeouts and expired leases. Leaves the
        running jobs and the foreign owners whose lease expired on the round, for ``recovery``
        (``rnd.running`` stays None in a round that reads nothing: :meth:`look_at_running`)."""
        sup = self.sup
        if not self.look_at_running(rnd):
            return
        groups = rnd.store.running_groups(rnd.now)
        rnd.busy = bool(groups)
        self.lead_quiet = rnd.lead and not groups
        self.host_running = any(token_host(g.owner or "") in (sup.host, None) for g in groups)
        mine = {s.owner for s in sup.slots.live()}
        if not maintenance.worth_a_look(groups, mine, sup.policy, rnd.now, sup.host, rnd.lead):
            rnd.running = []  # nothing a full read would act on (one row per owner and type read)
            return
        rnd.running = rnd.store.running()
        ages = rnd.store.lease_ages(rnd.now) if rnd.running else {}
        rnd.expired = self.police(rnd.running, ages, rnd.now)

    def look_at_running(self, rnd: Round) -> bool:
        """Read the running jobs this round? While jobs of this host run or a dead child's are
        unsettled, and when a child claimed since the last read (its progress file changed);
        as the lead (other hosts' leases are its business) every round, unless its last read
        found no job running anywhere: then every ``lease_timeout`` / 3 at most (a job claimed
        since has a lease younger than that at the next read, which sees it, so no lease
        expires unseen); a follower whose workers hold nothing reads only when a control came,
        or every ``control_poll_interval`` (``supervisor.controls``; every round where none is
        heard)."""
        sup = self.sup
        claimed = self.progress.changed(sup.snapshot, sup.slots.live())
        every, controls = sup.config.supervisor.control_poll_interval, sup.relay.controls
        if rnd.lead:
            every = min(every, sup.config.worker.lease_timeout / 3)
        if (
            (rnd.lead and not self.lead_quiet)
            or self.host_running
            or sup.deaths.unsettled
            or claimed
        ):
            controls.read("running", rnd.monotonic, every)
            return True
        if rnd.lead:
            rnd.busy = False  # (as the last read found: the engine's idle work may run)
        return bool(controls.due("running", rnd.monotonic, every))

    def recovery(self, rnd: Round) -> None:
        """What our dead children's release left; this host's dead or silent owners that are
        not our children: their jobs re-queued (or failed) directly."""
        if rnd.running is None:  # the timeouts task could not read them this round
            return
        dying = self.sup.deaths.release_again(rnd.running)
        self.recover(rnd, dying, maintenance.HERE)

    def foreign_recovery(self, rnd: Round) -> None:
        """Other hosts' owners whose every lease expired: their jobs re-queued (or failed)."""
        if rnd.running is not None:  # (None: the timeouts task could not read them this round)
            self.recover(rnd, set(), maintenance.ELSEWHERE)

    def recover(self, rnd: Round, dying: set[str], which: str) -> None:
        """``maintenance.recover_foreign`` over ``which`` hosts' owners, counted as reaped."""
        sup = self.sup
        mine = {s.owner for s in sup.slots.live()} | dying  # (the dead we know are not strangers)
        sup.counters["jobs_reaped"] += maintenance.recover_foreign(
            rnd.store, rnd.running, mine, sup.policy, rnd.now, rnd.expired, sup.host, which
        )

    def police(self, running: list[Job], ages: dict[str, float], now: float) -> set[str]:
        """Act on our children's timeouts and expired leases (``ages``: the store's
        ``lease_ages``); the foreign owners whose every lease expired (for ``recover_foreign``)."""
        sup = self.sup
        verdicts = maintenance.judge_running(running, ages, sup.policy, now, sup.host)
        unlogged = self.timeout_log.unlogged(verdicts, running)
        by_owner = {s.owner: s for s in sup.slots.live()}
        for v in verdicts:
            slot = by_owner.get(v.owner)
            if slot is None:
                continue
            if v.action in ("timeout", "cancel", "blocked"):
                if v in unlogged:
                    event(
                        log,
                        "job.cancel_killed" if v.action == "cancel" else "job.timeout",
                        logging.WARNING,
                        id=v.job.id,
                        type=v.job.type,
                        attempt=v.job.attempts,
                        slot=slot.index,
                        pid=slot.pid,
                        reason=v.reason,
                        note="the handler did not stop: its worker is killed",
                    )
                if not slot.killed:
                    sup.slots.kill(slot, v.reason, count_attempt=True)
            elif not slot.killed:
                event(
                    log,
                    "worker.lease_expired",
                    logging.WARNING,
                    id=v.job.id,
                    slot=slot.index,
                    pid=slot.pid,
                    reason=v.reason,
                )
                sup.slots.kill(slot, v.reason, count_attempt=True)
        lease = sup.config.worker.lease_timeout
        return maintenance.expired_owners(running, ages, lease) - set(by_owner)

    def touch_processes(self, rnd: Round) -> None:
        """Refresh our row and our idle workers'; record what we serve."""
        rnd.store.touch_process(self.sup.token, rnd.now)
        self.record_served(self.sup.db())

    def prune_here(self, rnd: Round) -> None:
        """Prune the rows of this host's dead processes (a read of every row)."""
        maintenance.prune_processes(
            rnd.store, rnd.now, self.stale_after(), self.sup.host, maintenance.HERE
        )

    def prune_elsewhere(self, rnd: Round) -> None:
        """Prune the rows of other hosts' processes not refreshed for a while."""
        maintenance.prune_processes(
            rnd.store, rnd.now, self.stale_after(), self.sup.host, maintenance.ELSEWHERE
        )

    def stale_after(self) -> float:
        """Seconds after which another host's process row counts as its process's death."""
        return max(self.sup.config.worker.lease_timeout, PROCESS_STALE_AFTER)

    def leave(self, store: UpkeepStore) -> None:
        """At a stop: give the upkeep lead up, if ours; delete our process row."""
        try:
            self.election.step_down(store, self.sup.clock.now())
        finally:
            store.remove_process(self.sup.token)

    def record_served(self, store: EngineStore) -> None:
        """Record the job types our handler modules serve, and their handlers' queues, for the
        producers' type check (``shared.ops.served``): at boot (the first ``processes`` round),
        and at the next round after a reload that imported new modules."""
        from shared.ops.served import record_served

        registry = self.sup.registry
        if registry is self.recorded:
            return
        queues = {t: (spec.queue if (spec := registry.get(t)) else None) for t in registry.types()}
        record_served(store, self.sup.token, list(self.sup.config.handlers), queues)
        self.recorded = registry
        warn_unserved(store)

    def log_unserved(self, rnd: Round) -> None:
        """Once per config: a warning per queue no pool of it serves (``supervisor.unserved``)."""
        self.unserved.check(self.sup.db(), rnd.config, rnd.now)

    def ops_requests(self, rnd: Round) -> None:
        """Take a `jobq scale N` request; publish our counters for `jobq status` when they changed;
        record the types we serve after a reload that imported new handler modules."""
        from shared import ops  # here: the ops layer is not needed before the first workers start

        sup, store = self.sup, self.sup.db()
        every = sup.config.supervisor.control_poll_interval
        if sup.relay.controls.due("scale", rnd.monotonic, every):  # (notified, else a backstop)
            wanted = ops.take_scale_request(store, sup.token)
            if wanted is not None:
                sup.scale(wanted, "jobq scale")
        if sup.counters != self.published:
            ops.save_counters(store, sup.token, sup.counters)
            self.published = dict(sup.counters)
        self.record_served(store)


def warn_unserved(store: EngineStore) -> None:
    """Log the job types that have jobs waiting but that no running supervisor's handler
    modules serve (a worker fails each such job it takes): at boot and after a reload, the
    supervisor's counterpart of the producers' warning. Reads the kept counts, no jobs."""
    from shared import ops
    from shared.ops.served import served_types

    served = served_types(store)
    waiting: dict[str, int] = {}
    for row in ops.counts_by_type(store):
        if row["status"] in ("pending", "waiting") and served and row["type"] not in served.queues:
            waiting[row["type"]] = waiting.get(row["type"], 0) + row["n"]
    if waiting:
        event(
            log,
            "supervisor.unserved_types",
            logging.WARNING,
            types=",".join(f"{t}:{n}" for t, n in sorted(waiting.items())),
            modules=",".join(served.modules) if served else "",
            note="no running supervisor's handler modules serve these types: a worker fails "
            "each of their jobs it takes",
        )
