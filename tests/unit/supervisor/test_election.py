"""supervisor.election: the upkeep lead on a real (SQLite) store with a FakeClock: who holds it,
when it is renewed or asked for, the hand-over when a leader stops renewing or steps down, and
one log line per change. (Both engines' ``lead_upkeep``: tests/engines/test_store_contract.py;
two supervisors: tests/behaviour/test_upkeep_lead.py.)"""

from __future__ import annotations

import logging

import pytest

from shared.engines import open_store
from shared.engines.contract import Round
from shared.runtime.clock import FakeClock
from shared.settings.config import from_dict
from supervisor.election import Election, lead_every, lead_hold

CONFIG = from_dict({"worker": {"lease_timeout": 30}, "supervisor": {"maintenance_interval": 1}})


@pytest.fixture
def store(tmp_path):
    with open_store(from_dict({"database": str(tmp_path / "q.db")})) as s:
        yield s


def at(store, clock: FakeClock) -> Round:
    return Round(store, CONFIG, clock.now(), clock.monotonic())


def lines(caplog, name: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if name in r.getMessage()]


def test_the_lead_lasts_a_worker_lease_and_is_renewed_every_third_of_it():
    assert lead_hold(CONFIG) == 30.0 and lead_every(CONFIG) == 10.0
    fast = from_dict(
        {
            "worker": {"lease_timeout": 3, "heartbeat_interval": 0.5},
            "supervisor": {"maintenance_interval": 2},
        }
    )
    assert lead_every(fast) == 2.0  # never more often than the rounds


def test_one_leads_the_other_takes_over_once_it_stops_renewing(store, caplog):
    caplog.set_level(logging.INFO)
    clock = FakeClock()
    a, b = Election(lambda: "h:1:1"), Election(lambda: "h:2:2")
    assert a.lead(at(store, clock)) and not b.lead(at(store, clock))
    assert len(lines(caplog, "upkeep.lead_taken")) == 1
    for _ in range(5):  # a renews every 10 s; b asks as often and is refused
        clock.advance(10)
        assert a.lead(at(store, clock)) and not b.lead(at(store, clock))
    assert len(lines(caplog, "upkeep.lead_taken")) == 1  # once per change
    clock.advance(5)
    assert a.lead(at(store, clock))  # not due: no statement, still ours
    clock.advance(26)  # a is gone (no more rounds): its lease lapses 30 s after its renewal
    assert b.lead(at(store, clock))
    assert len(lines(caplog, "upkeep.lead_taken")) == 2
    clock.advance(10)
    assert not a.lead(at(store, clock))  # back: refused, and it says so once
    assert len(lines(caplog, "upkeep.lead_lost")) == 1


def test_a_leader_that_steps_down_is_replaced_at_once(store, caplog):
    caplog.set_level(logging.INFO)
    clock = FakeClock()
    a, b = Election(lambda: "h:1:1"), Election(lambda: "h:2:2")
    assert a.lead(at(store, clock)) and not b.lead(at(store, clock))
    a.step_down(store, clock.now())
    assert not a.held and "given up" in lines(caplog, "upkeep.lead_lost")[-1].jobq_fields["reason"]
    clock.advance(10)  # b's next ask
    assert b.lead(at(store, clock))
    b.step_down(store, clock.now())
    b.step_down(store, clock.now())  # not held: nothing
    assert len(lines(caplog, "upkeep.lead_lost")) == 2


def test_a_leader_whose_renewals_fail_stops_leading_once_its_lease_lapsed(store, caplog):
    caplog.set_level(logging.INFO)
    clock = FakeClock()
    a = Election(lambda: "h:1:1")
    assert a.lead(at(store, clock))
    store.close()  # every call raises now
    clock.advance(10)
    with pytest.raises(Exception):
        a.lead(at(store, clock))
    assert a.held  # still ours until it lapses
    clock.advance(21)
    with pytest.raises(Exception):
        a.lead(at(store, clock))
    assert (
        not a.held and "not renewed" in lines(caplog, "upkeep.lead_lost")[-1].jobq_fields["reason"]
    )
