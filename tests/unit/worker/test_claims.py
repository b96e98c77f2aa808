"""worker.claims: the idle/claim path: a failing database is waited out, never fatal; a wait no
commit ended reads before it claims; a replaced database stops the worker; a slow claim's leases
are confirmed or doubted (claims on a real store: tests/behaviour/test_batching.py)."""

from __future__ import annotations

from types import SimpleNamespace

from shared.model.errors import StoreUnavailable
from shared.model.exitcodes import ExitCode
from shared.runtime.clock import FakeClock
from shared.settings.config import from_dict
from worker import claims
from worker.batch import Batch
from worker.claims import Claims


class Fence:
    def __init__(self):
        self.calls = []

    def renewed(self, at):
        self.calls.append(("renewed", at))

    def doubt(self, sent):
        self.calls.append(("doubt", sent))


class Worker(Claims):
    def __init__(self, due=False, problem=None):
        self.config, self.clock, self.held = from_dict({}), FakeClock(), Batch()
        self.owner, self.pid, self.slot, self.jobs_done = "o", 1, 0, 0
        self.store = SimpleNamespace(has_due=lambda now: due)
        self.health = SimpleNamespace(problem=lambda: problem)
        self.heartbeat, self.wakeup, self.progress, self.fence = None, None, None, Fence()
        self.read_first, self.store_down, self.stopping = False, False, False
        self.wait_again = False
        self.exit_code, self.waits, self.commits = ExitCode.OK, [], []
        self.signals = SimpleNamespace(wait=lambda timeout, *fds: self.waits.append(timeout))

    def commit(self, limit, must=False):
        self.commits.append(limit)
        return ["j1"][:limit]


def test_a_failing_database_is_waited_out_and_its_return_told_once():
    w = Worker()

    def down():
        raise StoreUnavailable("connection dropped")

    assert w.guarded(down) is False and w.guarded(down) is False
    assert w.store_down and w.waits == [claims.RETRY_WRITE] * 2
    assert w.guarded(lambda: True, proves=False) is True and w.store_down  # proves nothing
    assert w.guarded(lambda: True) is True and not w.store_down


def test_a_wake_no_commit_ended_reads_first_and_claims_only_a_due_job():
    w = Worker(due=False)
    w.read_first = True
    assert w.claim() is False and w.commits == [] and not w.read_first
    assert w.claim() is True and w.commits == [1]  # the next claims at once
    w = Worker(due=True)
    w.read_first = True
    assert w.claim() is True and w.commits == [1] and list(w.held.queue) == ["j1"]


def test_a_replaced_database_stops_the_worker_at_its_idle_wait():
    w = Worker(problem="the database file was replaced")
    w.idle_wait()
    assert w.stopping and w.exit_code == ExitCode.DATABASE_UNAVAILABLE and w.waits == []


def test_a_claims_leases_are_confirmed_or_doubted(monkeypatch):
    w = Worker()
    answers = [7.0, None]
    monkeypatch.setattr(claims, "after_claim", lambda *args: answers.pop(0))
    w.renewed(1.0, [])  # nothing claimed: nothing to confirm
    w.renewed(2.0, ["j1"])
    w.renewed(3.0, ["j1"])
    assert w.fence.calls == [("renewed", 7.0), ("doubt", 3.0)]
