"""worker.commits: outcomes are reported only once committed; a refusing database is waited
out, a bug while recording fails those jobs instead, once (batches on a real store:
tests/behaviour/test_batching.py)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from shared.execution.outcomes import Done
from shared.execution.runner import Outcome
from shared.model.errors import StoreUnavailable
from shared.model.job import Finish
from shared.runtime.clock import FakeClock
from shared.settings.config import from_dict
from worker import commits
from worker.batch import Batch
from worker.commits import Commits


def done(jid="j1"):
    return Done(
        SimpleNamespace(id=jid),
        SimpleNamespace(max_attempts=3),
        Outcome("completed"),
        Finish("completed", jid, 1, None, ended=5.0),
        0.01,
    )


class Store:
    def __init__(self, *failures):
        self.failures, self.calls = list(failures), []

    def finish_and_claim(self, finishes, owner, pid, now, limit, limits=None):
        self.calls.append([(f.kind, f.job_id) for f in finishes])
        if self.failures:
            raise self.failures.pop(0)
        return [True] * len(finishes), ["claimed"] * limit


class Worker(Commits):
    def __init__(self, store, stopping=False):
        self.store, self.held, self.clock = store, Batch(), FakeClock()
        self.config, self.registry = from_dict({}), None
        self.owner, self.pid, self.slot = "o", 1, 0
        self.heartbeat = SimpleNamespace(flush_at=9.0, orphaned=threading.Event())
        self.stopping, self.waits, self.renewals = stopping, [], []
        self.signals = SimpleNamespace(wait=self.waits.append)

    def renewed(self, sent, jobs):
        self.renewals.append(jobs)

    def handle_signals(self):
        pass


@pytest.fixture
def reported(monkeypatch):
    out = []
    monkeypatch.setattr(
        commits,
        "after_commit_all",
        lambda dones, ok, registry, slot, pid: out.append(([d.finish.kind for d in dones], ok)),
    )
    return out


def test_a_commit_reports_its_outcomes_after_it_and_claims(reported):
    w = Worker(Store())
    w.held.done = [done("a"), done("b")]
    assert w.commit(2) == ["claimed", "claimed"]
    assert reported == [(["completed", "completed"], [True, True])] and w.held.done == []
    assert w.heartbeat.flush_at is None and w.renewals == [["claimed", "claimed"]]


def test_a_refusing_database_is_waited_out_keeping_the_outcomes(reported):
    store = Store(StoreUnavailable("disk full"), StoreUnavailable("disk full"))
    w = Worker(store)
    w.held.done = [done()]
    assert w.commit(1) == ["claimed"]
    assert len(store.calls) == 3 and w.waits == [commits.RETRY_WRITE] * 2
    assert reported == [(["completed"], [True])]


def test_stopping_gives_up_unless_it_must(reported):
    w = Worker(Store(StoreUnavailable("locked")), stopping=True)
    w.held.done = [done()]
    assert w.commit(1) == [] and reported == [] and len(w.held.done) == 1
    w.store = Store(StoreUnavailable("locked"))
    assert w.commit(0, must=True) == [] and reported == [(["completed"], [True])]
    w = Worker(Store(StoreUnavailable("locked")), stopping=True)
    w.heartbeat.orphaned.set()
    w.held.done = [done()]
    assert w.commit(0, must=True) == []  # orphaned: the next supervisor re-queues


def test_a_bug_while_recording_fails_those_jobs_instead_once(reported):
    store = Store(TypeError("cannot bind"))
    w = Worker(store)
    w.held.done = [done("a")]
    w.commit(1)
    assert store.calls == [[("completed", "a")], [("failed", "a")]]
    [(kinds, ok)] = reported
    assert kinds == ["failed"]
    w = Worker(Store(TypeError("cannot bind"), TypeError("still")))
    w.held.done = [done("a")]
    with pytest.raises(TypeError, match="still"):
        w.commit(1)
    with pytest.raises(TypeError, match="nothing held"):
        Worker(Store(TypeError("nothing held"))).commit(1)


def test_the_heartbeat_flushes_on_its_own_connection_and_the_loop_reports(reported):
    w = Worker(Store())
    w.held.queue.extend([SimpleNamespace(id="a"), SimpleNamespace(id="b")])
    w.held.take()
    w.held.ran(done("a"))
    w.held.take()  # "b" runs long: "a"'s outcome waits for the heartbeat
    other = Store()
    w.flush_outcomes(other)
    assert other.calls == [[("completed", "a")]] and w.store.calls == []
    assert w.after_flushed() and reported == [(["completed"], [True])]
    assert not w.after_flushed()
