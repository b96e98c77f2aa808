"""Workflows under a worker's batches: the claim that commits a batch's outcomes also takes the
children they released, several parents of one child completed by one statement count it off
once each, and a parent settled once settles nothing again."""

from __future__ import annotations

import pytest

from shared.model.job import Finish
from tests.behaviour.test_flows import q  # noqa: F401 (the flows' queue fixture)

pytestmark = pytest.mark.engines

OWNER, PID = "w:1:1", 1


def completed(jobs) -> list[Finish]:
    return [Finish("completed", j.id, j.attempts, "1") for j in jobs]


def test_the_claim_that_commits_a_batch_takes_the_children_it_released(q, clock):
    """A worker's next claim goes with its outcomes: it finds the children those outcomes made
    pending (a chain's next link) without waiting for another worker's wake-up."""
    a = q.enqueue("flow:ok")
    b = q.enqueue("flow:ok", after=[a])
    c = q.enqueue("flow:ok", after=[b])
    [ja] = q.store.claim(OWNER, PID, clock.now(), 5)
    done, got = q.store.finish_and_claim(completed([ja]), OWNER, PID, clock.now(), 5)
    assert done == [True] and [j.id for j in got] == [b]
    done, got = q.store.finish_and_claim(completed(got), OWNER, PID, clock.now(), 5)
    assert done == [True] and [j.id for j in got] == [c]
    assert q.counts() == {"completed": 2, "running": 1}


def test_parents_completed_in_one_batch_count_their_child_off_once_each(q, clock):
    """A fan-in's parents completed by one statement, beside a parent outside the batch: the
    join waits for that one alone, then runs; a child of two batch parents and a failed one
    that runs anyway is released once; the counts stay exact."""
    parents = [q.enqueue("flow:ok", i) for i in range(4)]
    later = q.enqueue("flow:ok", priority=-1)  # claimed after the batch
    join = q.enqueue("flow:collect", after=[*parents, later])
    bad = q.enqueue("flow:fail", priority=5)
    anyway = q.enqueue("flow:collect", after=[parents[0], bad, parents[1]], after_failure="run")
    claimed = q.store.claim(OWNER, PID, clock.now(), 5)
    assert {j.id for j in claimed} == {*parents, bad}
    batch = [
        Finish("failed", j.id, j.attempts, "no")
        if j.id == bad
        else Finish("completed", j.id, j.attempts, "1")
        for j in claimed
    ]
    done, got = q.store.finish_and_claim(batch, OWNER, PID, clock.now(), 0)
    assert done == [True] * 5 and got == []
    assert q.get(anyway).status == "pending" and q.get(join).status == "waiting"
    [row] = q.store.read("SELECT waiting_on FROM jobs WHERE id = :id", {"id": join})
    assert row["waiting_on"] == 1
    assert q.counts() == {"completed": 4, "failed": 1, "pending": 2, "waiting": 1}
    q.drain()
    assert q.get(join).status == "completed" and q.get(anyway).status == "completed"


def test_a_completed_parent_written_again_settles_nothing_more(q, clock):
    """Edges count once: a completed parent's row updated again (an operator's write) leaves
    its child waiting for the parent it still needs."""
    a, b = q.enqueue("flow:ok"), q.enqueue("flow:ok", priority=-1)
    child = q.enqueue("flow:collect", after=[a, b])
    [ja] = q.store.claim(OWNER, PID, clock.now(), 1)
    assert ja.id == a
    q.store.finish_and_claim(completed([ja]), OWNER, PID, clock.now(), 0)
    q.store.write(
        "UPDATE jobs SET status = 'completed', updated_at = updated_at WHERE id = :id", {"id": a}
    )
    assert q.get(child).status == "waiting"
    q.drain()
    assert q.get(child).status == "completed"
