"""worker.batch: what a worker holds (the unstarted batch, the job in hand, outcomes not
committed), as the heartbeat thread reads it; the batch's sizing is in
tests/behaviour/test_batching.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from worker import batch as batchmod
from worker.batch import Batch


def job(i: str):
    return SimpleNamespace(id=i)


def done(i: str):
    return SimpleNamespace(finish=SimpleNamespace(job_id=i))


def claimed(*ids: str) -> Batch:
    b = Batch()
    with b.claiming() as got:
        got.extend(job(i) for i in ids)
    b.claimed_now(len(ids))
    return b


def test_a_claim_in_flight_renews_everything_and_gives_nothing_back():
    b = Batch()
    with b.claiming() as got:
        with b.held_ids() as ids:
            assert ids is None
        got.append(job("a"))
    with b.held_ids() as ids:
        assert ids == ["a"]


def test_a_failed_claim_calls_slow_and_keeps_what_it_got():
    b, slow = Batch(), []
    with pytest.raises(ConnectionError):
        with b.claiming(lambda: slow.append(1)) as got:
            got.append(job("a"))
            raise ConnectionError("cut")
    assert slow == [1] and not b.in_flight and [j.id for j in b.queue] == ["a"]
    with b.claiming(lambda: slow.append(2)):
        pass
    assert slow == [1]  # a quick claim that worked is not slow


def test_held_ids_are_outcomes_queue_running_and_the_job_in_hand():
    b = claimed("a", "b", "c")
    first, started = b.take()
    assert first.id == "a" and started == 1
    b.ran(done("a"))
    b.running.add("x")
    with b.held_ids() as ids:
        assert sorted(ids) == ["a", "a", "b", "c", "x"]  # "a": its outcome and in hand


def test_take_counts_started_jobs_and_give_back_puts_it_first():
    b = claimed("a", "b")
    j, _ = b.take()
    b.give_back(j)
    assert b.job_t0 is None
    assert [b.take()[0].id, b.take()[0].id] == ["a", "b"]
    assert b.take() == (None, 2)


def test_shed_takes_the_rest_only_once_the_job_in_hand_ran_long_enough():
    b = claimed("a", "b", "c")
    assert b.shed(0.0) == []  # no job in hand yet
    b.take()
    assert b.shed(3600.0) == []
    assert [j.id for j in b.shed(0.0)] == ["b", "c"]
    assert b.take() == (None, 3)


def test_take_unstarted_empties_the_queue():
    b = claimed("a", "b")
    assert b.take_unstarted() == ["a", "b"] and b.take_unstarted() == []


def test_flush_commits_only_while_a_job_runs_and_keeps_outcomes_on_error():
    b = claimed("a", "b")
    b.take()
    b.ran(done("a"))
    b.flush(lambda dones: pytest.fail("between jobs the main thread commits"))
    b.take()

    def broken(dones):
        raise ConnectionError("down")

    with pytest.raises(ConnectionError):
        b.flush(broken)
    assert len(b.done) == 1
    b.flush(lambda dones: [True] * len(dones))
    assert b.done == [] and b.take_flushed()[0][1] == [True]
    assert b.take_flushed() == []


def test_cpu_wait_is_zero_where_schedstat_cannot_be_read(tmp_path, monkeypatch):
    monkeypatch.setattr(batchmod, "SCHEDSTAT", str(tmp_path / "missing"))
    assert batchmod.cpu_wait() == 0.0
    garbage = tmp_path / "schedstat"
    garbage.write_text("12 x 3")
    monkeypatch.setattr(batchmod, "SCHEDSTAT", str(garbage))
    assert batchmod.cpu_wait() == 0.0
    garbage.write_text("12 2500000000 3")
    assert batchmod.cpu_wait() == 2.5
