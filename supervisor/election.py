"""The upkeep lead: of the supervisors sharing a database (on one host or many), one at a time
runs the cluster's upkeep, the ``CLUSTER`` tasks (other hosts' dead owners and process rows,
schedules, the engine's bookkeeping: the count fold, ANALYZE, the WAL checkpoint), while every
supervisor still polices, reaps and replaces its own children each round (the ``HOST`` tasks;
``supervisor.upkeep`` runs both).

The lead is a lease the store keeps (``UpkeepStore.lead_upkeep``: one guarded statement, judged
on the engine's lease clock, the server's where many hosts share it). Its length is the workers'
``lease_timeout`` (:func:`lead_hold`); the holder renews it, and every other supervisor asks for
it, every third of that (:func:`lead_every`, at least once a maintenance round): one statement
per ten seconds per supervisor at the default lease. A leader that dies, or is cut off from the
database, is replaced within ``hold + hold / 3`` plus a round: under two lease periods. One that
stops gracefully gives the lead up (:meth:`Election.step_down`): the next to ask takes it.

Two leaders for a moment (one cut off whose lease lapsed while it still finished a round) are
harmless: every cluster task is guarded in the store as before (a schedule's tick is enqueued
once, a dead owner's job released once); the lead only spares the database the same work done
by every supervisor. Each change is logged once: ``upkeep.lead_taken``, ``upkeep.lead_lost``.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from shared.engines.contract import Round, UpkeepStore
from shared.runtime.logs import event, get_logger

log = get_logger("supervisor")


def lead_hold(config: Any) -> float:
    """How long the lead lasts unless renewed (seconds): the workers' ``lease_timeout``, the
    bound the cluster already waits for a silent worker."""
    return float(config.worker.lease_timeout)


def lead_every(config: Any) -> float:
    """How often the lead is renewed, or asked for (seconds): a third of :func:`lead_hold`, so a
    holder misses two renewals before it lapses; never more often than the maintenance rounds."""
    return max(lead_hold(config) / 3.0, config.supervisor.maintenance_interval)


class Election:
    """Whether this supervisor (``token()``: its owner token, known once it booted) holds the
    upkeep lead; asks the store when due (:meth:`lead`), gives it up (:meth:`step_down`)."""

    def __init__(self, token: Callable[[], str]) -> None:
        self.token = token
        self.held = False
        self.next_at = 0.0  # monotonic: when to renew, or ask, again
        self.valid_until = 0.0  # monotonic: our lead lapses here unless renewed

    def lead(self, rnd: Round) -> bool:
        """Do we hold the lead this round? Renews it, or asks for it, when due (one statement);
        a store error is raised (asked again next round) and the lead kept until it lapses."""
        if rnd.monotonic >= self.next_at:
            self.ask(rnd)
        elif self.held and rnd.monotonic >= self.valid_until:  # renewals failed: it lapsed
            self.changed(False, "not renewed in time", rnd.config)
        return self.held

    def ask(self, rnd: Round) -> None:
        """Take or renew the lead (one guarded statement)."""
        self.next_at = rnd.monotonic + lead_every(rnd.config)
        try:
            held = rnd.store.lead_upkeep(self.token(), rnd.now, lead_hold(rnd.config))
        except Exception:
            self.next_at = 0.0  # ask again next round
            if self.held and rnd.monotonic >= self.valid_until:
                self.changed(False, "not renewed in time", rnd.config)
            raise
        if held:
            self.valid_until = rnd.monotonic + lead_hold(rnd.config)
        self.changed(held, "another supervisor took it", rnd.config)

    def changed(self, held: bool, why: str, config: Any) -> None:
        """Note whether we hold the lead; log a change once."""
        if held == self.held:
            return
        self.held = held
        if held:
            event(log, "upkeep.lead_taken", token=self.token(), hold=lead_hold(config))
        else:
            event(log, "upkeep.lead_lost", logging.WARNING, token=self.token(), reason=why)

    def step_down(self, store: UpkeepStore, now: float) -> None:
        """Give the lead up, if held (a graceful stop): the next supervisor to ask takes it at
        once instead of a lease period later."""
        if not self.held:
            return
        store.lead_upkeep(self.token(), now, 0)
        self.held = False
        event(log, "upkeep.lead_lost", token=self.token(), reason="stopping: given up")
