"""Named queues with pools of their own, the pause of one queue, pools resized live,
with real supervisors on each engine."""

from __future__ import annotations

import json
import re
import signal
import sys
import warnings

import pytest
import tomli_w

from shared.producer.api import JobQueue
from shared.runtime.clock import parse_iso
from shared.settings.config import Config, from_dict, load
from shared.model.queues import QueueOrder, plan, slot_queues, total_workers
from shared.model.unserved import UnservedQueueWarning, served_queues
from tests.proc import db, log_events, wait_until, worker_rows, write_config
from tests.process.test_metrics import free_port, parse, scrape
from tests.unit.cli.test_cli import jobq, ok

pytestmark = pytest.mark.engines

BACKLOG = 10_000


def pools_config(tmp_path, emails: int = 2, reports: int = 6):
    """``emails`` and ``reports`` with pools of their own and nothing left to a shared pool."""
    return write_config(
        tmp_path,
        handlers=["queuejobs"],
        supervisor={"workers": emails + reports},
        queues={"emails": {"workers": emails}, "reports": {"workers": reports}},
    )


def by_queue(config_path) -> dict[tuple[str, str], int]:
    with db(config_path) as c:
        return {
            (r[0], r[1]): r[2]
            for r in c.execute("SELECT queue, status, count(*) FROM jobs GROUP BY queue, status")
        }


def latencies(config_path, queue: str) -> list[float]:
    """Enqueue-to-start of the started jobs of ``queue`` (seconds)."""
    with db(config_path) as c:
        rows = c.execute(
            f"SELECT created_at, started_at FROM jobs WHERE queue = '{queue}' "
            "AND started_at IS NOT NULL"
        ).fetchall()
    return sorted(parse_iso(r[1]) - parse_iso(r[0]) for r in rows)


def test_emails_start_promptly_behind_a_report_backlog_and_pausing_reports_stops_only_it(
    database, tmp_path, sup_factory
):
    config_path = pools_config(tmp_path)
    gate = tmp_path / "gate"
    q = JobQueue(config=load(config_path))
    try:
        q.enqueue_many(
            [("q:slow", {"gate": str(gate)}, {"queue": "reports"}) for _ in range(BACKLOG)],
            batch_size=2000,
        )
        sup_factory(config_path)
        wait_until(
            lambda: by_queue(config_path).get(("reports", "running")) == 6,
            timeout=30,
            what="six report workers busy",
        )
        for _ in range(100):  # one email at a time: each waits for a worker of its own pool
            job_id = q.enqueue("q:fast", {}, queue="emails")
            wait_until(
                lambda: q.get(job_id).status == "completed",
                timeout=10,
                what="the email done",
                interval=0.002,
            )
        lat = latencies(config_path, "emails")
        p99 = lat[int(len(lat) * 0.99) - 1]
        print(
            f"\n[{database.name}] emails enqueue-to-start behind {BACKLOG} reports: "
            f"p50 {lat[len(lat) // 2] * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms"
        )
        # Generous (speed is the bench's): the median shows no email queued behind the backlog.
        # (PostgreSQL's idle wake-up misses a notification now and then, before queues too: the
        # lead then claims at its 5 s WATCHED_SLEEP; hence no bound on p99 here.)
        assert len(lat) == 100 and lat[len(lat) // 2] < 0.5
        assert (
            by_queue(config_path).get(("reports", "running")) == 6
        )  # the report workers never took one

        q.pause(queue="reports")
        gate.touch()  # the running reports end; no other may start
        wait_until(
            lambda: by_queue(config_path).get(("reports", "completed")) == 6,
            timeout=30,
            what="the running reports done",
        )
        ids = [q.enqueue("q:fast", {}, queue="emails") for _ in range(5)]
        wait_until(
            lambda: all(q.get(i).status == "completed" for i in ids),
            timeout=10,
            what="emails flowing while reports is paused",
        )
        counts = by_queue(config_path)
        assert (
            counts.get(("reports", "running"), 0) == 0
            and counts[("reports", "pending")] == BACKLOG - 6
        )
        q.resume(queue="reports")
        wait_until(
            lambda: by_queue(config_path).get(("reports", "completed"), 0) > 6,
            timeout=30,
            what="reports start again after resume",
        )
    finally:
        q.close()


def test_a_handler_sees_the_queue_of_its_job_and_show_prints_queue_and_limit_key(
    database, tmp_path, sup_factory
):
    config_path = write_config(
        tmp_path,
        handlers=["queuejobs"],
        supervisor={"workers": 1},
        types={"q:where": {"key": "payload.tenant"}},
    )
    with JobQueue(config=load(config_path)) as q:
        ids = {
            name: q.enqueue("q:where", {"tenant": "t-7"}, queue=name)
            for name in ("emails", "default")
        }
        sup_factory(config_path)
        wait_until(
            lambda: all(q.get(i).status == "completed" for i in ids.values()),
            timeout=20,
            what="both jobs done",
        )
        assert {name: q.get(i).result["queue"] for name, i in ids.items()} == {
            "emails": "emails",
            "default": "default",
        }
        assert q.get(ids["emails"]).limit_key == "t-7"
    text = ok(jobq(config_path, "show", ids["emails"]))
    assert re.search(r"^queue +emails$", text, re.M) and re.search(
        r"^limit_key +t-7$", text, re.M
    ), text


def test_the_limited_claim_tries_a_workers_queues_in_their_weighted_order(database, tmp_path):
    from shared.runtime.clock import FakeClock
    from shared.model.limits import type_limits

    clock = FakeClock(1_800_000_000)
    q = JobQueue(
        config=load(write_config(tmp_path, types={"w:job": {"concurrency": 50}})), clock=clock
    )
    try:
        q.enqueue_many(
            [("w:job", {"q": "light"}, {"queue": "light"}) for _ in range(10)]
        )  # first in claim order
        clock.advance(1)
        q.enqueue_many([("w:job", {"q": "heavy"}, {"queue": "heavy"}) for _ in range(10)])
        q.store.serve(
            (("light", 1), ("heavy", 10**6))
        )  # heavy first, but for one draw in a million
        got = [
            j.queue
            for _ in range(8)
            for j in q.store.claim_limited("h:1:1", 1, clock.now(), type_limits(q.config), 1)
        ]
        assert got == ["heavy"] * 8
        q.store.serve((("light", 1),))
        assert [
            j.queue
            for j in q.store.claim_limited("h:1:1", 1, clock.now(), type_limits(q.config), 3)
        ] == ["light"] * 3
    finally:
        q.close()


def test_editing_the_queues_table_resizes_the_pools_live(database, tmp_path, sup_factory):
    config_path = pools_config(tmp_path, emails=1, reports=1)
    sup = sup_factory(config_path)
    wait_until(lambda: len(worker_rows(config_path)) == 2, timeout=30, what="two workers")
    data = __import__("tomllib").loads(config_path.read_text())
    data["queues"]["emails"]["workers"] = 3
    config_path.write_bytes(tomli_w.dumps(data).encode())
    sup.signal(signal.SIGHUP)
    wait_until(
        lambda: len(worker_rows(config_path)) == 4, timeout=30, what="four workers after the reload"
    )
    # the new slots joined the emails pool (a worker logs its queues just after its row is written)
    wait_until(
        lambda: sup.output().count("queues=emails") >= 3,
        timeout=30,
        what="three emails slots logged",
    )
    with JobQueue(config=load(config_path)) as q:
        ids = [q.enqueue("q:fast", {}, queue="emails") for _ in range(20)]
        wait_until(
            lambda: all(q.get(i).status == "completed" for i in ids), timeout=20, what="emails done"
        )
        owners = {q.get(i).owner for i in ids}
    assert owners == {None}  # finished jobs hold no lease


def test_without_queue_tables_one_pool_serves_every_queue_as_before():
    cfg = Config().with_workers(8)
    assert plan(cfg)[0].queues is None and total_workers(cfg) == 8
    assert slot_queues(cfg, 3) is None and slot_queues(cfg, None) is None


def test_own_pools_first_then_the_shared_pool_with_default_and_weights():
    cfg = from_dict(
        {
            "supervisor": {"workers": 8},
            "queues": {"emails": {"workers": 2}, "bulk": {"weight": 3}, "cold": {"paused": True}},
        }
    )
    assert [(p.name, p.workers) for p in plan(cfg)] == [("emails", 2), ("", 6)]
    assert slot_queues(cfg, 0) == slot_queues(cfg, 1) == (("emails", 1),)
    assert slot_queues(cfg, 2) == (("bulk", 3), ("default", 1))  # cold is paused in the file
    assert slot_queues(cfg, 8) == ()  # a retiring slot serves nothing
    assert dict(slot_queues(cfg, None)) == {"emails": 1, "bulk": 3, "default": 1}
    only = cfg.replace(supervisor=cfg.supervisor.__class__(workers=8, queues=("emails",)))
    assert [(p.name, p.workers) for p in plan(only)] == [("emails", 2)] and total_workers(only) == 2
    big = from_dict({"supervisor": {"workers": 2}, "queues": {"a": {"workers": 3}}})
    assert total_workers(big) == 3  # own pools are kept even above [supervisor] workers


def test_the_weighted_order_puts_a_heavier_queue_first_more_often():
    import random

    order = QueueOrder((("a", 3), ("b", 1)), random.Random(7))
    firsts = [order.draw()[0] for _ in range(4000)]
    assert sorted(order.draw()) == ["a", "b"]
    assert 0.7 < firsts.count("a") / 4000 < 0.8


@pytest.mark.parametrize("value", ["", "a,b", " x", "\x01"])
def test_bad_queue_names_are_refused_naming_the_value(value, tmp_path):
    with pytest.raises(Exception, match="queue"):
        from_dict({"queues": {value: {"workers": 1}}})
    q = JobQueue(str(tmp_path / "x.db"))
    try:
        with pytest.raises(ValueError, match="queue name"):
            q.enqueue("t", {}, queue=value)
        assert q.counts() == {}
    finally:
        q.close()


def test_the_queue_of_a_job_comes_from_the_call_the_type_or_the_handler(tmp_path):
    cfg = from_dict({"types": {"mail:send": {"queue": "emails"}}})
    q = JobQueue(str(tmp_path / "x.db"), config=cfg)
    try:
        a = q.enqueue("mail:send", {})
        b = q.enqueue("mail:send", {}, queue="urgent")
        c, d = q.enqueue_many([("mail:send", {}), ("other", {}, {"queue": "x"})])
        assert [q.get(i).queue for i in (a, b, c, d)] == ["emails", "urgent", "emails", "x"]
        assert q.get(q.enqueue("other", {})).queue == "default"
    finally:
        q.close()


def unserved_config(tmp_path, **sections):
    """``reports`` with a pool of its own, ``digest`` in the shared pool (with ``default``): a
    job of any other queue waits for a worker that never comes."""
    return write_config(
        tmp_path,
        **{
            "handlers": ["queuejobs"],
            "supervisor": {"workers": 2},
            "queues": {"reports": {"workers": 1}, "digest": {"weight": 1}},
            **sections,
        },
    )


def test_a_queue_is_unserved_when_no_pool_of_the_config_takes_jobs_from_it():
    def served(**cfg):
        return served_queues(from_dict(cfg))

    assert (
        served() is None and served(supervisor={"queues": ["a"]}) is None
    )  # one pool, every queue
    assert served(supervisor={"workers": 0}) == frozenset()  # scaled to nothing
    assert served(supervisor={"workers": 2}, queues={"reports": {"workers": 1}}) == {
        "reports",
        "default",
    }
    # the own pools take every worker: the shared pool (bulk, default) has none left
    assert served(
        supervisor={"workers": 2}, queues={"reports": {"workers": 2}, "bulk": {"weight": 3}}
    ) == {"reports"}
    assert served(queues={"parked": {"workers": 0}, "default": {"workers": 1}}) == {"default"}
    # a pause is a state of its own (shown as paused), not a missing pool; nor is one host's --queues
    assert served(
        supervisor={"workers": 2, "queues": ["reports"]},
        queues={"reports": {"workers": 1}, "cold": {"paused": True}},
    ) == {"reports", "cold", "default"}


def test_an_enqueue_on_a_queue_no_pool_serves_warns_from_the_config_alone(database, tmp_path):
    # a handler module that cannot be imported here: the check reads the config, nothing else
    config_path = unserved_config(
        tmp_path, handlers=["no_such_module_of_handlers"], types={"q:routed": {"queue": "outbox"}}
    )
    with JobQueue(config=load(config_path)) as q, warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        served = [q.enqueue("q:fast", {}, queue=name) for name in ("reports", "digest", "default")]
        job_id = q.enqueue("q:fast", {}, queue="newsletters")
        q.enqueue_many([("q:fast", {}, {"queue": "bulk"})])
        q.enqueue_many([("q:routed", {})])  # the type's queue, on the short path of plain items
        q.enqueue("q:routed", {})
        assert [str(w.message).split(":")[0] for w in seen] == [
            "no worker serves queue 'newsletters'",
            "no worker serves queue 'bulk'",
            "no worker serves queue 'outbox'",
            "no worker serves queue 'outbox'",
        ]
        assert all(w.category is UnservedQueueWarning and w.filename == __file__ for w in seen)
        assert "reports=1 (reports); shared=1 (digest, default)" in str(seen[0].message)
        assert q.get(job_id).status == "pending" and len(served) == 3  # warned, and written
    assert "no_such_module_of_handlers" not in sys.modules
    r = jobq(config_path, "enqueue", "q:fast", "--queue", "newsletters")
    assert (
        r.returncode == 0 and "jobq: warning: no worker serves queue 'newsletters'" in r.stderr
    ), r.stderr


def test_status_names_each_queue_no_worker_serves_with_its_pending_jobs(database, tmp_path):
    config_path = unserved_config(tmp_path)
    with JobQueue(config=load(config_path)) as q, warnings.catch_warnings():
        warnings.simplefilter("ignore", UnservedQueueWarning)
        q.enqueue("q:fast", {}, queue="newsletters")
        q.enqueue("q:fast", {}, queue="reports")
    text = ok(jobq(config_path, "status"))
    assert "no worker serves queue newsletters: 1 pending" in text.splitlines(), text
    assert "serves queue reports" not in text and "serves queue digest" not in text
    rows = {r["queue"]: r for r in json.loads(ok(jobq(config_path, "status", "--json")))["queues"]}
    assert {n: (r["unserved"], r["pending"]) for n, r in rows.items()} == {
        "newsletters": (True, 1),
        "reports": (False, 1),
        "digest": (False, 0),
    }


def test_the_supervisor_logs_and_exports_unserved_queues_at_boot_and_after_a_reload(
    database, tmp_path, sup_factory
):
    port = free_port()
    config_path = unserved_config(tmp_path, log_format="json", metrics_port=port)
    with JobQueue(config=load(config_path)) as q, warnings.catch_warnings():
        warnings.simplefilter("ignore", UnservedQueueWarning)
        q.enqueue("q:fast", {}, queue="newsletters")
        later = q.enqueue("q:fast", {}, queue="digest", delay=3600)  # pending, on a served queue
    sup = sup_factory(config_path)

    def logged() -> dict[str, int]:
        return {e["queue"]: e["pending"] for e in log_events(sup, "queue.unserved")}

    wait_until(
        lambda: logged() == {"newsletters": 1}, timeout=30, what="the boot's queue.unserved line"
    )
    assert (
        log_events(sup, "queue.unserved")[0]["note"]
        == "no worker serves queue newsletters: 1 pending"
    )
    series = parse(scrape(port)[2])
    assert series[("jobq_queue_unserved_pending", frozenset({("queue", "newsletters")}))] == 1
    assert series[("jobq_queue_unserved_pending", frozenset({("queue", "digest")}))] == 0
    data = __import__("tomllib").loads(config_path.read_text())
    del data["queues"]["digest"]  # its pending job is stranded: the reload says so
    config_path.write_bytes(tomli_w.dumps(data).encode())
    sup.signal(signal.SIGHUP)
    wait_until(
        lambda: (
            [e["queue"] for e in log_events(sup, "queue.unserved")][1:] == ["digest", "newsletters"]
        ),
        timeout=30,
        what="the reload's queue.unserved lines",
    )
    assert logged() == {"newsletters": 1, "digest": 1}
    series = parse(scrape(port)[2])
    assert series[("jobq_queue_unserved_pending", frozenset({("queue", "digest")}))] == 1
    with JobQueue(config=load(config_path)) as q:
        assert q.get(later).status == "pending"
