"""supervisor.deaths: re-queueing a dead worker's jobs, charging only the job it was running,
and again while some of them are left (reaping real children: tests/behaviour/test_faults.py
and tests/process)."""

from __future__ import annotations

from types import SimpleNamespace

from shared.runtime.clock import FakeClock
from supervisor.deaths import Dead, Deaths


class Db:
    def __init__(self, fail=False, released=1):
        self.fail, self.released, self.calls, self.removed = fail, released, [], []

    def release_owner(self, owner, reason, now, max_attempts_for, count_attempt, unstarted):
        self.calls.append((owner, reason, count_attempt, tuple(unstarted)))
        if self.fail:
            raise ConnectionError("down")
        return [
            SimpleNamespace(id=f"r{i}", type="t", attempts=1, status="pending")
            for i in range(self.released)
        ]

    def remove_process(self, owner):
        self.removed.append(owner)


def sup(db, gone=False):
    s = SimpleNamespace(
        clock=FakeClock(),
        counters={"jobs_reaped": 0},
        policy=SimpleNamespace(max_attempts=lambda job: 3),
        closed=[],
    )
    s.db = lambda: db
    s.check_health = lambda: gone
    s.close_db = lambda: s.closed.append(True)
    return s


def dead(owner="w:1:1"):
    return Dead(
        0, 1, owner, True, 2.5, "worker 1 killed by SIGKILL while running the job", ["u1", "u2"]
    )


def test_release_charges_as_the_dead_worker_says_and_drops_its_process_row():
    db = Db(released=2)
    s = sup(db)
    released = Deaths(s).release(dead())
    assert len(released) == 2 and s.counters["jobs_reaped"] == 2
    assert db.calls == [
        ("w:1:1", "worker 1 killed by SIGKILL while running the job", True, ("u1", "u2"))
    ]
    assert db.removed == ["w:1:1"]


def test_a_failed_release_is_logged_and_the_connection_dropped():
    s = sup(Db(fail=True))
    assert Deaths(s).release(dead()) == [] and s.closed == [True]
    assert s.counters["jobs_reaped"] == 0


def test_nothing_is_released_into_a_database_that_was_replaced():
    db = Db()
    assert Deaths(sup(db, gone=True)).release(dead()) == [] and db.calls == []


def test_left_jobs_are_released_again_until_none_is_running():
    db = Db()
    deaths = Deaths(sup(db))
    deaths.unsettled = {"w:1:1": dead("w:1:1"), "w:2:2": dead("w:2:2")}
    still = deaths.release_again([SimpleNamespace(owner="w:1:1")])
    assert still == {"w:1:1"} and [c[0] for c in db.calls] == ["w:1:1"]
    assert deaths.release_again([]) == set() and deaths.unsettled == {}
