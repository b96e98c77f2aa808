"""What an idle pool asks the PostgreSQL server (``shared.engines.postgres.wakeup`` and
``.relay``): its lead one read per wait (whether a job is due and when the next delayed one is,
in one statement), its followers nothing; a lead whose wait ran out finds a job no wake-up
announced. The worker's own idle path (``worker.claims``: ``idle_wait`` then ``claim``) drives a
real wake-up on a real store; the statements are counted where the store sends them."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from shared.engines.postgres.relay import RelayedWakeup
from shared.engines.postgres.wakeup import (
    FOLLOWER_READ,
    RELAYED_SLEEP,
    WATCHED_SLEEP,
    Following,
    lead_wait,
)
from shared.model.exitcodes import ExitCode
from shared.producer.api import JobQueue
from shared.runtime.clock import SystemClock
from shared.settings.config import from_dict
from worker.batch import Batch
from worker.claims import Claims

from .test_pg_wakeup import lead_held_elsewhere

pytest.importorskip("psycopg")

WAITS = 4


class IdleWorker(Claims):
    """A worker's idle path on ``store`` and ``wakeup``: each wait runs out at once (its
    timeouts are kept), as after a long quiet spell."""

    def __init__(self, store: Any, wakeup: Any) -> None:
        self.config, self.clock, self.held = from_dict({}), SystemClock(), Batch()
        self.store, self.wakeup, self.health, self.heartbeat = store, wakeup, None, None
        self.read_first, self.wait_again, self.store_down, self.stopping = (
            False,
            False,
            False,
            False,
        )
        self.exit_code, self.timeouts, self.claims = ExitCode.OK, [], 0
        self.owner, self.pid, self.slot, self.progress, self.fence = "o", 1, 0, None, None
        self.signals = SimpleNamespace(wait=self.ran_out)

    def ran_out(self, timeout: float, fds: list) -> list:
        self.timeouts.append(timeout)
        return []  # (the signal wait's answer: nothing ready)

    def turn(self) -> bool:
        """One idle wait, then the claim after it (False: it found nothing, or did not look)."""
        self.idle_wait()
        return self.claim()

    def commit(self, limit: int, must: bool = False) -> list:
        self.claims += 1  # (the queue is empty: nothing to claim)
        return []


def counted(store: Any) -> list[str]:
    """The statements ``store`` sends from now on (every read goes through ``_run``)."""
    sent: list[str] = []
    run = store._run

    def counting(conn: Any, sql: str, params: Any = None) -> Any:
        sent.append(sql)
        return run(conn, sql, params)

    store._run = counting
    return sent


def wake_up(store: Any, kind: str) -> Any:
    """The wait of a worker whose supervisor's relay listens (``relayed``), or of one without a
    supervisor, which listens itself (``direct``)."""
    return RelayedWakeup(store) if kind == "relayed" else store.wakeup()


@pytest.mark.parametrize("kind", ["relayed", "direct"])
def test_an_idle_lead_reads_once_per_wait_and_a_follower_never(pg, kind):
    longest = RELAYED_SLEEP if kind == "relayed" else WATCHED_SLEEP
    with pg.open() as store:
        wakeup = wake_up(store, kind)
        try:
            w = IdleWorker(store, wakeup)
            w.turn()  # becoming the lead (direct: LISTEN, then one claim)
            sent = counted(store)
            assert not any(w.turn() for _ in range(WAITS))
            assert len(sent) == WAITS, sent  # one read per wait (it was two: due, next due)
            assert w.timeouts[-WAITS:] == [longest] * WAITS
            wakeup.claimed()  # the lead is handed on: another process takes it
            with lead_held_elsewhere(wakeup):
                del sent[:]
                assert not any(w.turn() for _ in range(WAITS))
                assert sent == []  # a follower waits for the lead, and reads nothing
        finally:
            wakeup.close()


@pytest.mark.parametrize("kind", ["relayed", "direct"])
def test_a_follower_whose_lead_is_stopped_reads_for_itself_once_a_minute(pg, kind):
    """A lead that holds the lock but never runs (stopped) must not strand the pool's jobs: a
    follower reads by itself every ``FOLLOWER_READ`` seconds, and claims what is due."""
    now = [0.0]
    with pg.open() as store:
        wakeup = wake_up(store, kind)
        follower = wakeup.relayed if kind == "direct" and wakeup.via_relay else wakeup
        wakeup.backstop = follower.backstop = Following(clock=lambda: now[0])
        q = JobQueue(config=pg.config())
        try:
            w = IdleWorker(store, wakeup)
            with lead_held_elsewhere(wakeup):
                q.enqueue("t", {})  # (no wake-up reaches this follower)
                sent = counted(store)
                assert not any(w.turn() for _ in range(WAITS)) and sent == []
                now[0] = FOLLOWER_READ
                assert w.turn() is False and w.claims == 1  # it read, found the job, claimed
                assert sent and "due" in sent[0]
                del sent[:]
                assert not w.turn() and sent == []  # and waits a minute again
        finally:
            q.close()
            wakeup.close()


def test_a_lead_whose_wait_ran_out_claims_a_job_no_wake_up_announced(pg):
    with pg.open() as store:
        wakeup = RelayedWakeup(store)  # no relay runs: nothing passes the notification on
        q = JobQueue(config=pg.config())
        try:
            w = IdleWorker(store, wakeup)
            assert not w.turn() and w.timeouts == [RELAYED_SLEEP]  # it waited it out
            q.enqueue("t", {})  # (no wake-up comes)
            w.idle_wait()  # the lead's read finds the job: claim at once, no read more
            assert w.timeouts[-1] == 0.0 and not w.wait_again and not w.read_first
            assert w.claim() is False and w.claims == 1  # (the fake claim takes nothing)
        finally:
            q.close()
            wakeup.close()


def test_a_delayed_job_bounds_the_relayed_leads_wait(pg):
    with pg.open() as store:
        wakeup = RelayedWakeup(store)
        q = JobQueue(config=pg.config())
        try:
            w = IdleWorker(store, wakeup)
            q.enqueue("t", {}, delay=3)  # (no wake-up for it comes: no relay runs)
            w.idle_wait()
            assert 0.0 < w.timeouts[-1] <= 3.0 and w.wait_again  # it wakes when the job is due
        finally:
            q.close()
            wakeup.close()


class Due:
    """A store whose read says ``due`` and a delayed job at ``nxt``."""

    def __init__(self, due: bool, nxt: float | None) -> None:
        self.due, self.nxt, self.reads = due, nxt, 0

    def idle_read(self, now: float) -> tuple[bool, float | None]:
        self.reads += 1
        return self.due, self.nxt


def test_the_leads_read_decides_when_to_claim_and_how_long_to_wait():
    now = 1000.0
    assert lead_wait(Due(True, None), now, 15.0, timed_out=True) == (True, 0.0)
    # a claim just found nothing: a due job is one this pool cannot take (no spinning on it),
    # but a rate window opens with time alone, with no notification: look again within 5 s
    assert lead_wait(Due(True, None), now, 15.0, timed_out=False) == (False, WATCHED_SLEEP)
    assert lead_wait(Due(True, now + 2.0), now, 15.0, timed_out=False) == (False, 2.0)
    assert lead_wait(Due(False, now + 4.0), now, 15.0, timed_out=True) == (False, 4.0)
    assert lead_wait(Due(False, now - 1.0), now, 15.0, timed_out=False) == (False, 0.0)
    assert lead_wait(Due(False, now + 60.0), now, 15.0, timed_out=False) == (False, 15.0)


def test_the_idle_read_answers_both_questions(pg):
    with pg.open() as store:
        now = time.time()
        assert store.idle_read(now) == (False, None)
        q = JobQueue(config=pg.config())
        try:
            q.enqueue("t", {}, delay=30)
            due, nxt = store.idle_read(time.time())
            assert not due and nxt == pytest.approx(time.time() + 30, abs=5)
            q.enqueue("t", {})
            assert store.idle_read(time.time())[0] is True
        finally:
            q.close()
