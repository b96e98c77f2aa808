"""``jobq copy`` carries workflows: ``waiting`` jobs with their edges (``job_deps``), and the target
ends where the source would have, whatever was copied when: a parent that ends after its child was
copied, a parent already ended in the target, chunks of one job, parents after their children in
id order. A move (``--delete``) moves a workflow, never cancels it. Run as a user runs it (the
CLI in a subprocess), SQLite to SQLite always, to and from PostgreSQL when a server is there."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.engines.contract import EngineStore
from shared.model.job import Finish, NewJob, new_id
from tests.engines.test_copy import OWNER, T0, Side, copy, lite, pg, rows, summary  # noqa: F401 (fixtures)


@pytest.fixture(params=["sqlite-sqlite", "sqlite-postgresql", "postgresql-sqlite"])
def pair(request, lite) -> tuple[Side, Side]:  # noqa: F811
    """(source, target): a workflow is written on the source's own engine."""
    a, b = request.param.split("-")
    src = lite("src") if a == "sqlite" else request.getfixturevalue("pg")
    dst = lite("dst") if b == "sqlite" else request.getfixturevalue("pg")
    return src, dst


def job(
    name: str,
    *,
    after: tuple[str, ...] = (),
    policy: str | None = None,
    priority: int = 0,
    job_id: str | None = None,
) -> NewJob:
    return NewJob(
        id=job_id or new_id(),
        type=f"flow:{name}",
        payload=json.dumps({"name": name}),
        priority=priority,
        run_at=T0,
        max_attempts=1,
        key=None,
        after=after,
        after_failure=policy,
    )


def diamond(s: EngineStore, *, reverse: bool = False, policy: str = "cancel") -> dict[str, str]:
    """a, b -> c -> d (c waits for both, d for c), all with ``policy``; name -> id. ``reverse``:
    each child's id sorts before its parents' (the copy reads them first)."""
    ids = sorted((new_id() for _ in range(4)), reverse=reverse)
    a, b = job("a", job_id=ids[0], priority=9), job("b", job_id=ids[1])
    c = job("c", job_id=ids[2], after=(a.id, b.id), policy=policy)
    d = job("d", job_id=ids[3], after=(c.id,), policy=policy)
    s.enqueue_flow([a, b, c, d], T0)
    return {"a": a.id, "b": b.id, "c": c.id, "d": d.id}


def edges(s: EngineStore) -> list[dict[str, Any]]:
    return [dict(e) for e in s.export_edges(sorted(rows(s)))]


def run_all(s: EngineStore, now: float = T0 + 100) -> list[str]:
    """Claim and complete jobs one at a time until none is due: the ids in the order they ran."""
    ran: list[str] = []
    while True:
        claimed = s.claim(OWNER, 4242, now)
        if not claimed:
            return ran
        (j,) = claimed
        ran.append(j.id)
        now += 1
        assert s.finish_and_claim(
            [Finish("completed", j.id, j.attempts, json.dumps(j.id))], OWNER, 4242, now, 0
        )[0] == [True]


def end_running(s: EngineStore, kind: str, now: float) -> str:
    """Start the highest-priority due job (a) and end it as ``kind``: its id."""
    (j,) = s.claim(OWNER, 4242, now)
    s.finish_and_claim(
        [
            Finish(
                kind,
                j.id,
                j.attempts,
                json.dumps("ok") if kind == "completed" else "boom",
                max_attempts=1,
            )
        ],
        OWNER,
        4242,
        now + 1,
        0,
    )
    return j.id


@pytest.mark.parametrize("reverse", [False, True], ids=["parents-first", "children-first"])
def test_a_paused_workflow_copied_whole_runs_in_order_in_the_target(tmp_path, pair, reverse):
    """Case a (and d, chunks of one): the source paused, parents pending, children waiting; in the
    target the graph runs parents first, then c, then d."""
    src, dst = pair
    with src.open() as s:
        s.set_paused(True)
        ids = diamond(s, reverse=reverse)
        want_edges = edges(s)
    got = summary(copy(tmp_path, src, dst, "--chunk", "1"))
    assert (got["copied"], got["edges"]) == (4, 3) and "waiting" in got["statuses"]
    with dst.open() as d:
        assert edges(d) == want_edges
        assert d.counts() == {"pending": 2, "waiting": 2}
        ran = run_all(d)
        assert set(ran[:2]) == {ids["a"], ids["b"]} and ran[2:] == [ids["c"], ids["d"]]
        assert d.counts() == {"completed": 4}
        assert [p["id"] for p in d.parents(ids["c"])] == [ids["a"], ids["b"]]


@pytest.mark.parametrize(
    "reverse, chunk", [(False, "500"), (True, "1")], ids=["parents-first", "children-first-chunk-1"]
)
@pytest.mark.parametrize("outcome", ["completed", "failed"])
def test_a_parent_that_ends_in_the_source_after_its_child_was_copied_settles_it_in_the_target(
    tmp_path, pair, reverse, chunk, outcome
):
    """Case b: a runs in the source (not copied); b, c, d are. a then ends there, and the next
    copy brings it over ended: the target's c (and d) end exactly as the source's did (released
    when a completed; when a failed, c and d cancelled with the trigger's errors), edge for
    edge, and the counts agree. The settled c and d are then the same as the source's: present."""
    src, dst = pair
    with src.open() as s:
        ids = diamond(s, reverse=reverse)
        (a,) = s.claim(OWNER, 4242, T0 + 1)
        assert a.id == ids["a"]
        end_running(s, "completed", T0 + 2)  # b completed too: c waits for a alone
    first = summary(copy(tmp_path, src, dst, "--chunk", chunk))
    assert first["copied"] == 3 and ids["a"] not in rows_of(dst)
    with src.open() as s:
        s.finish_and_claim(
            [
                Finish(
                    outcome,
                    a.id,
                    a.attempts,
                    json.dumps(1) if outcome == "completed" else "boom",
                    max_attempts=1,
                )
            ],
            OWNER,
            4242,
            T0 + 10,
            0,
        )
        want, want_edges, want_counts = rows(s), edges(s), s.counts()
    assert want[ids["c"]]["status"] == ("pending" if outcome == "completed" else "cancelled")
    second = summary(copy(tmp_path, src, dst, "--chunk", chunk))
    assert second["copied"] == 1
    # In one chunk, a settles c and d before they are compared: the same as the source's. Read
    # before a (children first, in chunks of one) they differed then; a third run finds them same.
    assert set(second["differing"]) <= ({ids["c"], ids["d"]} if reverse else set())
    with dst.open() as d:
        assert rows(d) == want and edges(d) == want_edges and d.counts() == want_counts
    third = summary(copy(tmp_path, src, dst, "--chunk", chunk))
    assert (third["copied"], third["differing"], third["already_there"]) == (0, [], 4)


def rows_of(side: Side) -> dict[str, dict[str, Any]]:
    with side.open() as s:
        return rows(s)


@pytest.mark.parametrize("outcome, child", [("completed", "pending"), ("failed", "cancelled")])
def test_a_child_copied_after_its_parent_ended_in_the_target_is_settled_on_import(
    tmp_path, pair, outcome, child
):
    """Case c: the parent was moved and ended in the target; its child, enqueued in the source
    meanwhile (a producer not yet switched), waits there on an edge not done. Copied, it is
    settled at once, as if it had been enqueued in the target: released, or cancelled."""
    src, dst = pair
    with src.open() as s:
        s.set_paused(True)
        p = job("p", priority=9)
        s.enqueue_flow([p], T0)
    summary(copy(tmp_path, src, dst))
    with dst.open() as d:
        assert end_running(d, outcome, T0 + 5) == p.id
        assert rows(d)[p.id]["has_children"] == 0
    with src.open() as s:
        c = job("c", after=(p.id,))
        s.enqueue_flow([c], T0 + 6)
        assert s.get(c.id).status == "waiting"
    got = summary(copy(tmp_path, src, dst))
    assert (got["copied"], got["edges"], got["differing"]) == (1, 1, [p.id])
    with dst.open() as d:
        after = rows(d)
        assert after[c.id]["status"] == child and after[c.id]["waiting_on"] == (
            0 if outcome == "completed" else 1
        )
        assert after[p.id]["has_children"] == 1 and after[p.id]["status"] == outcome
        assert edges(d) == [
            {"child": c.id, "parent": p.id, "pos": 0, "done": int(outcome == "completed")}
        ]
        if outcome == "failed":
            assert after[c.id]["error"] == f"parent job {p.id} (flow:p) failed"
        assert d.counts() == {outcome: 1, child: 1}
        assert run_all(d) == ([c.id] if child == "pending" else [])


@pytest.mark.parametrize("reverse", [False, True], ids=["parents-first", "children-first"])
def test_a_move_in_two_chunks_moves_the_whole_workflow_and_cancels_nothing(tmp_path, pair, reverse):
    """Case 3: ``--delete --chunk 2``: the first chunk's jobs are deleted from the source while
    their parents or children wait there for the second; nothing is cancelled, nothing is left
    behind, and the whole graph runs in the target."""
    src, dst = pair
    with src.open() as s:
        s.set_paused(True)
        ids = diamond(s, reverse=reverse)
        want, want_edges = rows(s), edges(s)
    got = summary(copy(tmp_path, src, dst, "--delete", "--chunk", "2"))
    assert (got["copied"], got["deleted"], got["edges"]) == (4, 4, 3)
    with src.open() as s:
        assert rows(s) == {} and s.counts() == {} and s.export_edges(sorted(want)) == []
    with dst.open() as d:
        assert rows(d) == want and edges(d) == want_edges
        ran = run_all(d)
        assert set(ran[:2]) == {ids["a"], ids["b"]} and ran[2:] == [ids["c"], ids["d"]]


def test_a_live_move_follows_a_parent_that_was_running(tmp_path, pair):
    """A move while a parent runs in the source: its waiting children move at once; once it
    completes, a second move brings it over and releases them in the target; the source ends empty."""
    src, dst = pair
    with src.open() as s:
        ids = diamond(s)
        (a,) = s.claim(OWNER, 4242, T0 + 1)
    first = summary(copy(tmp_path, src, dst, "--delete"))
    assert first["deleted"] == 3
    with src.open() as s:
        assert list(rows(s)) == [ids["a"]]
        s.finish_and_claim([Finish("completed", a.id, a.attempts, "1")], OWNER, 4242, T0 + 10, 0)
    second = summary(copy(tmp_path, src, dst, "--delete"))
    assert (second["copied"], second["deleted"]) == (1, 1)
    with dst.open() as d:
        assert rows(d)[ids["c"]]["status"] == "waiting"  # b is still to run
        assert run_all(d) == [ids["b"], ids["c"], ids["d"]]
    assert rows_of(src) == {}


@pytest.mark.parametrize("engine", ["postgresql", "sqlite"])
def test_a_child_released_by_an_import_wakes_the_targets_idle_workers(
    tmp_path, lite, request, engine
):  # noqa: F811
    """An idle worker on the target (poll_interval 30 s): the child that the arrival of its ended
    parent releases starts at once, as one released by a parent ending there does (PostgreSQL:
    the settle trigger's notification, in the import's transaction)."""
    from shared import JobQueue
    from shared.settings.config import load
    from tests.proc import Running, wait_until, write_config

    log = tmp_path / "events.log"
    target = (
        request.getfixturevalue("pg")
        if engine == "postgresql"
        else Side(f"sqlite://{tmp_path / 'q.db'}")
    )
    where = (
        {"database": target.database, "postgres": {"schema": target.schema}}
        if engine == "postgresql"
        else {}
    )
    cfg = write_config(tmp_path, worker={"poll_interval": 30}, supervisor={"workers": 1}, **where)
    src = lite("wake")
    with src.open() as s:
        p = NewJob(
            id=new_id(),
            type="test:noop",
            payload=json.dumps({"log": str(log)}),
            priority=0,
            run_at=T0,
            max_attempts=1,
            key=None,
        )
        c = NewJob(
            id=new_id(),
            type="test:noop",
            payload=json.dumps({"log": str(log)}),
            priority=0,
            run_at=T0,
            max_attempts=1,
            key=None,
            after=(p.id,),
        )
        s.enqueue_flow([p, c], T0)
        (running,) = s.claim(OWNER, 4242, T0 + 1)
    summary(copy(tmp_path, src, target))
    assert rows_of(target)[c.id]["status"] == "waiting"  # so only the import can release it there
    sup = Running(cfg)
    try:
        with JobQueue(config=load(str(cfg))) as q:  # the workers have run one: they are idle now
            q.enqueue("test:noop", {"log": str(log)})
            wait_until(lambda: q.counts().get("completed") == 1, what="the warm-up job done")
        with src.open() as s:
            s.finish_and_claim(
                [Finish("completed", p.id, running.attempts, "1")], OWNER, 4242, T0 + 2, 0
            )
        got = summary(
            copy(tmp_path, src, target)
        )  # p, completed (no pending job copied): c released
        assert got["copied"] == 1
        wait_until(lambda: c.id in log.read_text(), timeout=3, what="the released child to start")
    finally:
        sup.close()
