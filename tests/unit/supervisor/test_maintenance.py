"""supervisor.maintenance: the supervisor's verdicts on running jobs and owners (who is
judged on which clock: tests/proofs/test_multihost.py)."""

from __future__ import annotations

from types import SimpleNamespace

from shared.execution.handlers import HandlerSpec, Registry
from shared.execution.policy import JobPolicy
from shared.runtime.clock import iso
from shared.runtime.processes import host_id, owner_token
from shared.settings.config import from_dict
from supervisor import maintenance as m

NOW = 1_767_225_600.0
HERE = "here/1/2"


async def coro(payload, job):
    return None


def policy():
    config = from_dict(
        {
            "worker": {"job_timeout": 10, "cancel_grace": 3, "lease_timeout": 20},
            "supervisor": {"kill_grace": 2},
        }
    )
    return JobPolicy(
        config, Registry([HandlerSpec("aio", coro, is_async=True, async_concurrency=4)])
    )


def job(jid="j1", owner=f"{HERE}:1:1", type="t", started=None, cancel=None, attempts=1):
    return SimpleNamespace(
        id=jid,
        owner=owner,
        type=type,
        attempts=attempts,
        started_at=None if started is None else iso(NOW - started),
        cancel_requested_at=None if cancel is None else iso(NOW - cancel),
    )


def test_stop_verdict_waits_for_timeout_plus_kill_grace():
    p = policy()
    assert m.stop_verdict(job(started=12), p, NOW) is None
    v = m.stop_verdict(job(started=12.5), p, NOW)
    assert (v.action, v.reason) == ("timeout", "timed out after 10 s")
    assert m.stop_verdict(job(), p, NOW) is None  # not started


def test_an_async_job_past_its_timeout_blocked_its_loop():
    v = m.stop_verdict(job(type="aio", started=13), policy(), NOW)
    assert v.action == "blocked" and "kill_grace (2 s)" in v.reason


def test_a_cancel_not_obeyed_within_cancel_grace_comes_first():
    p = policy()
    assert m.stop_verdict(job(started=1, cancel=3), p, NOW) is None
    v = m.stop_verdict(job(started=100, cancel=3.5), p, NOW)
    assert v.action == "cancel" and "cancel_grace (3 s)" in v.reason


def test_timeout_log_logs_each_attempt_once_and_forgets_ended_ones():
    log, p = m.TimeoutLog(), policy()
    a1, b = job("a", started=20), job("b", started=20)
    verdicts = [
        m.stop_verdict(a1, p, NOW),
        m.stop_verdict(b, p, NOW),
        m.Verdict(b.owner, b, "lease", "lease expired"),
    ]
    assert [v.job.id for v in log.unlogged(verdicts, [a1, b])] == ["a", "b"]
    assert log.unlogged(verdicts, [a1, b]) == []
    a2 = job("a", started=20, attempts=2)  # a's next attempt timed out too
    assert [v.job.id for v in log.unlogged([m.stop_verdict(a2, p, NOW)], [a2])] == ["a"]
    assert log.logged == {("a", 2)}


def test_an_owner_expires_only_when_every_lease_of_it_is_old():
    jobs = [job("1", owner="A"), job("2", owner="A"), job("3", owner="B"), job("4", owner=None)]
    ages = {"1": 30.0, "2": 5.0, "3": 30.0, "4": 99.0}
    assert m.expired_owners(jobs, ages, 20.0) == {"B"}
    assert m.expired_owners(jobs, {"1": 30.0, "2": 30.0}, 20.0) == {"A"}  # no age: fresh


class Store:
    def __init__(self, processes=(), ages=None):
        self.rows, self.ages = [{"id": p} for p in processes], ages or {}
        self.removed, self.released = [], []

    def process_ages(self, now):
        return self.ages

    def processes(self):
        return self.rows

    def remove_process(self, token):
        self.removed.append(token)

    def release_owner(self, owner, reason, now, max_attempts_for):
        self.released.append((owner, reason))
        return [SimpleNamespace(id="r", type="t", attempts=1, status="pending")]


def test_prune_removes_dead_local_rows_and_stale_foreign_ones():
    here = host_id()
    alive, dead = owner_token(1, here), f"{here}:1:0"  # pid 1's start time is not 0
    store = Store(
        [alive, dead, "far:1:1", "near:2:2", "not a token"], {"far:1:1": 100.0, "near:2:2": 5.0}
    )
    m.prune_processes(store, NOW, 60.0, here)
    assert store.removed == [dead, "far:1:1", "not a token"]


def test_recover_foreign_releases_gone_owners_and_expired_other_hosts_only():
    here = host_id()
    gone, mine = f"{here}:1:0", owner_token(1, here)
    far, far_fresh = "far:7:7", "far:8:8"
    jobs = [job(owner=o) for o in (gone, mine, far, far_fresh)]
    store = Store()
    n = m.recover_foreign(store, jobs, {mine}, policy(), NOW, {far}, here)
    assert n == 2
    assert [o for o, _ in store.released] == sorted([gone, far])
    reasons = dict(store.released)
    assert "is gone" in reasons[gone] and "another host" in reasons[far]


def test_recovery_and_prune_split_between_this_host_and_the_others():
    """``which``: every supervisor looks after this host's owners and rows (HERE, by pid); the
    upkeep lead after other hosts' (ELSEWHERE, by age); ALL is both."""
    here = host_id()
    gone, far = f"{here}:1:0", "far:7:7"
    jobs = [job(owner=o) for o in (gone, far)]
    for which, released in ((m.HERE, [gone]), (m.ELSEWHERE, [far]), (m.ALL, sorted([gone, far]))):
        store = Store()
        assert m.recover_foreign(store, jobs, set(), policy(), NOW, {far}, here, which) == len(
            released
        )
        assert [o for o, _ in store.released] == released
    rows = [f"{here}:1:0", "far:1:1"]
    for which, removed in ((m.HERE, rows[:1]), (m.ELSEWHERE, rows[1:]), (m.ALL, rows)):
        store = Store(rows, {"far:1:1": 100.0})
        m.prune_processes(store, NOW, 60.0, here, which)
        assert store.removed == removed


def test_a_follower_does_not_read_every_running_job_for_other_hosts_expired_leases():
    """``worth_a_look`` with ``elsewhere`` False (another supervisor leads the upkeep): another
    host's expired lease is not ours to act on; this host's still is."""
    from shared.model.job import RunningGroup

    here = host_id()
    far = RunningGroup("far:7:7", "t", 1, iso(NOW), 100.0, 0)
    assert m.worth_a_look([far], set(), policy(), NOW, here)
    assert not m.worth_a_look([far], set(), policy(), NOW, here, elsewhere=False)
    near = RunningGroup(owner_token(1, here), "t", 1, iso(NOW), 100.0, 0)
    assert m.worth_a_look([near], {near.owner}, policy(), NOW, here, elsewhere=False)
