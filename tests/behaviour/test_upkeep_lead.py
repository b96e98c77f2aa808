"""The upkeep lead across real supervisors on one database (a SQLite file, a PostgreSQL
schema): one takes the lead and only it runs the cluster's upkeep (its schedules), while each
polices its own children; killed with SIGKILL, the other takes over within two lease periods and
the schedule goes on, each tick enqueued once; a leader stopped gracefully hands over at once.
"""

from __future__ import annotations

import signal
import time

import pytest

from shared.runtime.clock import iso
from tests.proc import db, wait_until, write_config

pytestmark = pytest.mark.engines  # on each engine

LEASE = 3.0  # [worker] lease_timeout: the upkeep lead lasts as long
YEARLY = {
    "name": "yearly",
    "type": "test:noop",
    "cron": "0 0 1 1 *",
    "timezone": "UTC",
    "payload": {},
    "catch_up": "all",
}
TICKS = 3  # the yearly ticks missed after each rewind of the schedule's mark


def lead_lines(sup) -> int:
    return sup.output().count("upkeep.lead_taken")


def config(tmp_path):
    return write_config(
        tmp_path,
        supervisor={"workers": 1, "maintenance_interval": 0.1},
        worker={"lease_timeout": LEASE, "heartbeat_interval": 0.25},
        schedule=[YEARLY],
    )


def rewind(config_path) -> None:
    """Forget the schedule's jobs and move its mark TICKS years back: the lead's next round
    enqueues TICKS missed ticks (catch_up = "all")."""
    back = time.time() - (TICKS + 0.5) * 365.25 * 86400
    with db(config_path) as c:
        c.execute("DELETE FROM jobs WHERE key LIKE 'schedule:yearly:%'")
        c.execute("UPDATE schedule_marks SET last_tick = ? WHERE name = 'yearly'", (iso(back),))


def scheduled(config_path) -> int:
    with db(config_path) as c:
        return c.execute("SELECT count(*) FROM jobs WHERE key LIKE 'schedule:yearly:%'").fetchone()[
            0
        ]


def marked(config_path) -> bool:
    with db(config_path) as c:
        return c.execute("SELECT count(*) FROM schedule_marks").fetchone()[0] == 1


def ticks_by(sups, config_path) -> list[int]:
    """Rewind, wait for the TICKS jobs, and say how many ``schedule.enqueued`` lines each
    supervisor's log has gained."""
    before = [s.output().count("schedule.enqueued") for s in sups]
    rewind(config_path)
    for s in sups:  # the lead keeps the marks it read while none is due: an edit by hand is
        s.signal(signal.SIGHUP)  # seen at a reload (or within scheduler.MARKS_REREAD)
    wait_until(lambda: scheduled(config_path) == TICKS, timeout=20, what="the missed ticks")

    def gained() -> list[int]:
        return [s.output().count("schedule.enqueued") - b for s, b in zip(sups, before)]

    # the line is logged after the commit that the read above saw: wait for it too
    wait_until(lambda: sum(gained()) >= 1, timeout=10, what="the schedule.enqueued line")
    return gained()


def test_one_supervisor_runs_the_cluster_upkeep_and_another_takes_over_when_it_dies(
    database, tmp_path, sup_factory
):
    path = config(tmp_path)
    sups = [sup_factory(path), sup_factory(path)]
    wait_until(lambda: sum(lead_lines(s) for s in sups) == 1, timeout=20, what="a lead taken")
    wait_until(lambda: marked(path), timeout=20, what="the schedule anchored")
    leader = next(i for i, s in enumerate(sups) if lead_lines(s))
    for _ in range(10):  # the follower's rounds come as often: it would win some of the time
        gained = ticks_by(sups, path)
        assert gained[leader] == 1 and gained[1 - leader] == 0, gained
        assert scheduled(path) == TICKS
    assert sum(lead_lines(s) for s in sups) == 1  # taken once, never lost

    sups[leader].signal(signal.SIGKILL)
    killed = time.monotonic()
    other = sups[1 - leader]
    wait_until(lambda: lead_lines(other) == 1, timeout=2 * LEASE + 5, what="the lead taken over")
    assert time.monotonic() - killed < 2 * LEASE + 1.0  # within two lease periods (and a round)
    gained = ticks_by([other], path)
    assert gained == [1] and scheduled(path) == TICKS


def test_a_leader_stopped_gracefully_hands_the_lead_over_at_once(database, tmp_path, sup_factory):
    path = config(tmp_path)
    first = sup_factory(path)
    wait_until(lambda: lead_lines(first) == 1, timeout=20, what="the first supervisor leads")
    second = sup_factory(path)
    wait_until(lambda: "supervisor.started" in second.output(), timeout=20, what="a follower")
    assert lead_lines(second) == 0
    first.signal(signal.SIGTERM)
    assert first.wait(20) == 0
    assert "given up" in first.output()
    stopped = time.monotonic()
    wait_until(lambda: lead_lines(second) == 1, timeout=20, what="the lead taken over")
    # the follower asks every third of a lease: it need not wait for the lease to lapse
    assert time.monotonic() - stopped < LEASE
    assert ticks_by([second], path) == [1]
