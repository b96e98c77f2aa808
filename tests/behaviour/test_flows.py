"""Workflows: jobs that wait for other jobs, their failure policies, results flowing
to children, the graph written in one transaction, and every path that ends a parent settling
its children in the same statement."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from jobq import FlowError, chain, chord, group
from shared import ops
from shared.producer.api import JobQueue
from shared.settings.config import Config, RetryConfig
from shared.model.job import Finish
from shared.ops.fragments import KEPT, KEPT_WHY
from supervisor.views.actions import purge_ids
from tests.engines import raw
from tests.proc import env, write_config
from tests.fixtures import flowjobs

pytestmark = pytest.mark.engines

HANDLERS = ["tests.fixtures.flowjobs"]


@pytest.fixture
def q(database, tmp_path, clock):
    queue = JobQueue(
        config=database.config(tmp_path, Config(retry=RetryConfig(backoff_base=0))),
        clock=clock,
        handlers=HANDLERS,
    )
    yield queue
    queue.close()


def rows(queue: JobQueue, table: str) -> int:
    with raw(queue.config) as c:
        return c.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def status(queue: JobQueue, *ids: str) -> list[str]:
    return [queue.get(i).status for i in ids]


def test_fan_in_waits_for_every_parent_and_sees_their_results_in_order(q):
    a, b = q.enqueue("flow:ok", 1), q.enqueue("flow:ok", 2)
    c = q.enqueue("flow:collect", after=[b, q.handle(a)])
    assert status(q, c) == ["waiting"] and q.counts()["waiting"] == 1
    q.drain(types="flow:ok", max_jobs=1)
    assert status(q, c) == ["waiting"]  # one parent left
    q.drain()
    job = q.get(c)
    assert job.status == "completed"
    assert job.result["order"] == [b, a]  # the order given
    assert job.result["results"][a] == {"id": a, "payload": 1} and job.result["errors"] == {}
    assert "waiting" not in q.counts()


def test_default_policy_cancels_the_child_and_its_dependants_naming_the_parent(q):
    bad, good = q.enqueue("flow:fail", "x"), q.enqueue("flow:ok")
    child = q.enqueue("flow:collect", after=[good, bad])
    grandchild = q.enqueue("flow:collect", after=[child])
    q.drain()
    assert status(q, bad, child, grandchild) == ["failed", "cancelled", "cancelled"]
    assert f"parent job {bad} (flow:fail) failed" in q.get(child).error
    assert q.get(grandchild).error.startswith(f"parent job {child} (flow:collect) cancelled")
    assert f"parent job {bad}" in q.get(grandchild).error  # the root cause, too
    assert q.get(child).attempts == 0


def test_run_policy_runs_anyway_with_the_failed_parents_errors(q):
    bad, good = q.enqueue("flow:fail", "x"), q.enqueue("flow:ok")
    child = q.enqueue("flow:collect", after=[bad, good], after_failure="run")
    q.drain()
    job = q.get(child)
    assert job.status == "completed"
    assert job.result["results"] == {bad: None, good: {"id": good, "payload": None}}
    assert "flow:fail says no" in job.result["errors"][bad]


def test_hold_policy_waits_for_an_operators_retry_of_the_parent(q, clock):
    bad = q.enqueue("flow:fail", "x")
    child = q.enqueue("flow:collect", after=[bad], after_failure="hold")
    q.drain()
    assert status(q, bad, child) == ["failed", "waiting"]
    assert ops.retry_jobs(q.store, [bad], clock.now()) == [bad]
    q.drain(types="flow:fail")  # fails again: the child holds on
    assert status(q, child) == ["waiting"]
    with raw(q.config) as c:  # the operator mends what made it fail, then retries
        c.execute("UPDATE jobs SET type = 'flow:ok' WHERE id = ?", (bad,))
    ops.retry_jobs(q.store, [bad], clock.now())
    q.drain()
    assert status(q, bad, child) == ["completed", "completed"]


def test_cancel_of_a_parent_cancels_its_waiting_dependants(q, clock):
    parent = q.enqueue("flow:ok")
    held = q.enqueue("flow:collect", after=[parent], after_failure="hold")
    plain = q.enqueue("flow:collect", after=[parent])
    runs = q.enqueue("flow:collect", after=[parent], after_failure="run")
    assert ops.cancel_jobs(q.store, [parent], clock.now()) == [parent]
    assert status(q, held, plain, runs) == ["cancelled", "cancelled", "pending"]
    assert ops.cancel_jobs(
        q.store, [q.enqueue("flow:ok", after=[runs])], clock.now()
    )  # waiting: cancellable


def test_parents_already_ended_at_enqueue(q):
    done, bad = q.enqueue("flow:ok"), q.enqueue("flow:fail")
    q.drain()
    assert status(q, q.enqueue("flow:collect", after=[done])) == ["pending"]
    cancelled = q.get(q.enqueue("flow:collect", after=[done, bad]))
    assert (
        cancelled.status == "cancelled"
        and f"parent job {bad} (flow:fail) failed" in cancelled.error
    )
    assert status(q, q.enqueue("flow:collect", after=[bad], after_failure="hold")) == ["waiting"]


def test_a_graph_in_one_enqueue_many_and_refusals_write_nothing(q):
    ids = q.enqueue_many(
        [
            ("flow:ok", 1),
            ("flow:ok", 2),
            {"type": "flow:collect", "after": [0, 1]},
            ("flow:collect", None, {"after": [2], "after_failure": "run"}),
        ]
    )
    assert status(q, *ids) == ["pending", "pending", "waiting", "waiting"]
    before = rows(q, "jobs"), rows(q, "job_deps")
    for items, exc, text in [
        ([("flow:ok", 1), {"type": "flow:collect", "after": [1]}], FlowError, "cycle"),
        (
            [("flow:ok", 1), {"type": "flow:collect", "after": [0, "0" * 32]}],
            FlowError,
            "0" * 32 + " not found",
        ),
        (
            [{"type": "flow:collect", "after": [ids[0]], "after_failure": "later"}],
            ValueError,
            "after_failure",
        ),
        ([{"type": "flow:collect", "after": [3.5]}], TypeError, "job ids or handles"),
    ]:
        with pytest.raises(exc, match=text):
            q.enqueue_many(items)
    with pytest.raises(FlowError, match="not found"):
        q.enqueue("flow:collect", after=["missing"])
    assert (rows(q, "jobs"), rows(q, "job_deps")) == before
    q.drain()
    assert q.get(ids[3]).status == "completed"


def test_a_graph_is_written_in_a_fixed_number_of_statements(q, monkeypatch):
    """A graph's statements do not grow with its size (they were one or two per job: a round
    trip each on PostgreSQL): 10 and 200 jobs of chains and fan-ins after a job outside the
    graph take the same few statements, and the graph is written whole."""
    outside = q.enqueue("flow:ok")
    sent: list[str] = []
    run = q.store._run
    monkeypatch.setattr(
        q.store, "_run", lambda c, sql, params=None: sent.append(sql) or run(c, sql, params)
    )

    def graph(n: int) -> list[tuple]:
        items: list[tuple] = [("flow:ok", 0, {"after": [outside]})]
        for i in range(1, n - 1):
            items.append(("flow:ok", i, {"after": [i - 1] if i % 2 else [0]}))
        items.append(("flow:collect", None, {"after": list(range(1, n - 1))}))
        return items

    counts = []
    for n in (10, 200):
        sent.clear()
        ids = q.enqueue_many(graph(n))
        counts.append(len(sent))
        assert len(ids) == n and status(q, ids[0], ids[-1]) == ["waiting", "waiting"]
    assert counts[0] == counts[1] <= 4, counts
    assert rows(q, "job_deps") == (1 + 2 * 8) + (1 + 2 * 198)
    q.drain()
    assert status(q, *ids) == ["completed"] * 200
    assert sorted(q.get(ids[-1]).result["results"]) == sorted(ids[1:-1])


def test_a_graph_in_a_rolled_back_transaction_leaves_zero_rows(q):
    """extract -> 100 x transform -> load, written call by call and as a chord, inside the
    application's transaction: rolled back, nothing is left; committed, all of it."""
    app = raw(q.config)
    conn = getattr(app, "conn", app)
    t = {name: getattr(flowjobs, name).using(queue=q) for name in ("extract", "transform", "load")}
    for end in ("ROLLBACK", "COMMIT"):
        conn.execute("BEGIN")
        root = q.enqueue("flow:ok", conn=conn)
        parts = q.enqueue_many([("flow:ok", i, {"after": [root]}) for i in range(100)], conn=conn)
        q.enqueue("flow:collect", after=parts, conn=conn)
        chord(
            chain(t["extract"].s(1), group(t["transform"].s(1, i) for i in range(100))),
            t["load"].s(1),
        ).enqueue(conn=conn)
        conn.execute(end)
        expected = (0, 0) if end == "ROLLBACK" else (204, 400)
        assert (rows(q, "jobs"), rows(q, "job_deps")) == expected
    app.close()


def test_every_path_that_ends_a_parent_settles_its_children(q, clock):
    # a batch of outcomes in one finish_and_claim
    a, b = q.enqueue("flow:ok"), q.enqueue("flow:ok")
    child = q.enqueue("flow:collect", after=[a, b])
    claimed = q.store.claim("w:1:1", 1, clock.now(), limit=2)
    done, _ = q.store.finish_and_claim(
        [Finish("completed", j.id, j.attempts, "1") for j in claimed], "w:1:1", 1, clock.now(), 0
    )
    assert done == [True, True] and status(q, child) == ["pending"]
    q.drain()
    # the supervisor's release of a dead worker's job whose attempts are used up
    p = q.enqueue("flow:ok", max_attempts=1)
    orphan = q.enqueue("flow:collect", after=[p])
    q.store.claim("w:2:2", 2, clock.now())
    released = q.store.release_owner(
        "w:2:2", "worker died", clock.now(), max_attempts_for=lambda j: 1
    )
    assert [r.status for r in released] == ["failed"] and status(q, orphan) == ["cancelled"]
    # an operator's purge keeps a failed parent while its held child waits on it (as retention
    # does); a delete that takes it all the same cancels the child, naming the parent deleted
    held = q.enqueue("flow:collect", after=[p], after_failure="hold")
    assert status(q, held) == ["waiting"]
    assert ops.purge_jobs(q.store, [p]) == [] and status(q, held) == ["waiting"]
    gone = q.store.write("DELETE FROM jobs WHERE id = :id RETURNING id", {"id": p})
    assert [r["id"] for r in gone] == [p]
    assert status(q, held) == ["cancelled"] and "deleted" in q.get(held).error


def test_retention_keeps_a_parent_while_a_child_has_yet_to_run(q, clock):
    a, slow = q.enqueue("flow:ok"), q.enqueue("flow:ok", delay=3600)
    child = q.enqueue("flow:collect", after=[a, slow])
    q.drain()
    clock.advance(10)
    q.store.purge_finished({"completed": clock.now(), "failed": None, "cancelled": None})
    assert q.get(a) is not None  # its child still waits for it
    clock.advance(3600)
    q.drain()
    assert q.get(child).result["results"][a]["id"] == a
    clock.advance(10)
    q.store.purge_finished({"completed": clock.now(), "failed": None, "cancelled": None})
    assert q.get(a) is None and q.get(child) is None and rows(q, "job_deps") == 0


def test_every_purge_keeps_a_parent_a_waiting_child_still_needs_and_says_so(q, clock, tmp_path):
    """A completed, its sibling delayed, the child waiting on both: ``jobq purge`` (text and
    --json), ``ops.purge`` and the dashboard's purge of the selection (``purge_ids``) keep A,
    say how many they kept and why, and the child later runs with A's result; once it ran, A
    goes."""
    a, slow = q.enqueue("flow:ok", 1), q.enqueue("flow:ok", delay=3600)
    child = q.enqueue("flow:collect", after=[a, slow])
    done = q.enqueue("flow:ok", 2)  # no child: purged
    q.drain()
    clock.advance(10)
    cfg = write_config(tmp_path, handlers=HANDLERS)
    r = jobq(cfg, "purge", "--status", "completed", "--older-than", "0s")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("deleted 1 completed jobs") and f"; kept 1: {KEPT_WHY}" in r.stdout
    assert q.get(a) is not None and q.get(done) is None
    r = jobq(cfg, "purge", "--older-than", "0s", "--json")
    assert (json.loads(r.stdout)["deleted"], json.loads(r.stdout)["kept"]) == (0, 1)
    assert json.loads(r.stdout)["kept_why"] == KEPT_WHY
    assert ops.purge(q.store, "completed", clock.now(), dry_run=True) == 0
    assert ops.purge(q.store, "completed", clock.now()) == 0
    assert ops.kept_parents(q.store, "completed", clock.now()) == 1
    outcome = purge_ids(q.store, [a])
    assert outcome.done == [] and outcome.skipped == {a: KEPT}
    assert outcome.lines() == [f"job {a}: {KEPT}"]
    assert outcome.summary() == f"1 of 1 jobs not purged (kept 1: {KEPT_WHY})"
    assert q.get(a) is not None
    clock.advance(3600)
    q.drain()
    assert q.get(child).result["results"][a] == {"id": a, "payload": 1}
    assert purge_ids(q.store, [a]).done == [a]


def jobq(cfg, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "jobq", "--config", str(cfg), *args],
        capture_output=True,
        text=True,
        env=env(),
        timeout=60,
    )


def test_tasks_chain_group_chord_and_parent_results_parameter(q):
    t = {name: getattr(flowjobs, name).using(queue=q) for name in ("extract", "transform", "load")}
    run = chord(
        chain(t["extract"].s(7), group(t["transform"].s(7, i) for i in range(4))), t["load"].s(7)
    ).enqueue()
    assert len(run.handles) == 6 and [h.status() for h in run.handles[1:]] == ["waiting"] * 5
    q.drain()
    assert run.last[0].get().result == {"graph": 7, "parts": [0, 1, 2, 3], "n": 4}
    # .using(after=...) on a task, and a task signature's arguments checked when it is made
    h = t["load"].using(after=[run.handles[2]]).enqueue(8)
    q.drain()
    assert h.get().result == {"graph": 8, "parts": [1], "n": 1}
    with pytest.raises(TypeError):
        t["transform"].s()


def test_a_deep_chains_errors_keep_the_failed_job_and_count_the_links_between(q, clock):
    """Each cancelled dependant names its nearest parent; past 2,000 characters the middle is
    counted (``<- N more <-``) and the job that failed still ends the text, at every depth, and
    when the parent is deleted instead."""
    from shared.engines.sql.flows import MAX_FLOW_DEPTH

    ids = q.enqueue_many(
        [("flow:fail", "x")] + [("flow:ok", None, {"after": [i]}) for i in range(MAX_FLOW_DEPTH)]
    )
    assert q.drain() == {"completed": 0, "retried": 0, "failed": 1}

    def link(i: int) -> str:
        if i == 0:
            return f"parent job {ids[0]} (flow:fail) failed"
        return f"parent job {ids[i]} (flow:ok) cancelled"

    elided = 0
    for i in range(1, len(ids)):
        full = " <- ".join(link(j) for j in range(i - 1, -1, -1))
        short = f"{link(i - 1)} <- {i - 2} more <- {link(0)}"
        error = q.get(ids[i]).error
        assert error == (full if len(full) <= 2000 else short), i
        elided += error == short
    assert elided > MAX_FLOW_DEPTH / 2
    head = q.enqueue("flow:ok")
    child = q.enqueue("flow:ok", after=[head])
    with raw(q.config) as c:  # a parent deleted under a waiting child that was itself elided
        elided = f"{link(5)} <- 4 more <- {link(0)}"
        c.execute("UPDATE jobs SET error = ? WHERE id = ?", (elided, head))
        c.execute("DELETE FROM jobs WHERE id = ?", (head,))
    assert q.get(child).error == f"parent job {head} (flow:ok) deleted <- 5 more <- {link(0)}"


def test_the_longest_chain_allowed_cancels_all_of_it_and_a_longer_one_is_refused(q, clock):
    """A failure cancels a chain's dependants one nested trigger per link, and the databases bound
    that nesting: chains are bounded at enqueue (MAX_FLOW_DEPTH), and the longest allowed one is
    cancelled whole on both engines."""
    from shared.engines.sql.flows import MAX_FLOW_DEPTH

    ids = q.enqueue_many(
        [("flow:ok", None)] + [("flow:ok", None, {"after": [i]}) for i in range(MAX_FLOW_DEPTH)]
    )
    before = rows(q, "jobs"), rows(q, "job_deps")
    with pytest.raises(FlowError, match=f"above the limit of {MAX_FLOW_DEPTH}"):
        q.enqueue("flow:ok", after=[ids[-1]])
    with pytest.raises(FlowError, match="above the limit"):
        q.enqueue_many([("flow:ok", None, {"after": [ids[-2]]}), ("flow:ok", None, {"after": [0]})])
    assert (rows(q, "jobs"), rows(q, "job_deps")) == before
    assert ops.cancel_jobs(q.store, [ids[0]], clock.now()) == [ids[0]]
    assert q.counts() == {"cancelled": MAX_FLOW_DEPTH + 1}
    assert q.get(ids[-1]).error.startswith(f"parent job {ids[-2]} (flow:ok) cancelled <- ")
