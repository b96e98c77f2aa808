"""The producer API (shared.producer.api.JobQueue): enqueue, get, idempotency keys, transactional
enqueue, input validation."""

from __future__ import annotations

import os
import re
import sqlite3
import signal
import sys
from datetime import datetime, timedelta, timezone

import pytest

from shared.producer.typecheck import UnservedTypeWarning

from shared.producer.api import JobQueue
from shared.runtime.clock import iso, parse_iso
from shared.settings.config import Config, load
from shared.model.errors import StoreQueryError, StoreUnavailable
from shared.ops.served import served_types
from tests.engines import raw
from tests.proc import wait_until, write_config

pytestmark = (
    pytest.mark.engines
)  # the tests that use database (or make_config, queue) run on each engine
ISO_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def row_count(config: Config) -> int:
    with raw(config) as c:
        return c.execute("SELECT count(*) FROM jobs").fetchone()[0]


# -- enqueue / get -------------------------------------------------------------------------------


def test_enqueue_get_round_trip_all_fields(queue, clock):
    clock.advance(0.1234)  # a non-round "now": created_at keeps milliseconds
    when = datetime(2026, 3, 4, 5, 6, 7, 890000, tzinfo=timezone.utc)
    payload = {
        "reportId": "r1",
        "filters": {"from": "2026-01-01"},
        "n": [1, 2.5, None, True],
        "s": "é✓",
    }
    job_id = queue.enqueue("report:generate", payload, priority=7, run_at=when)

    job = queue.get(job_id)
    assert job is not None
    assert job.id == job_id
    assert re.fullmatch(r"[0-9a-f]{32}", job_id)
    assert job.type == "report:generate"
    assert job.payload == payload
    assert job.payload_error is None
    assert job.priority == 7
    assert job.run_at == "2026-03-04T05:06:07.890Z"
    assert job.status == "pending"
    assert job.attempts == 0
    assert job.max_attempts is None
    assert ISO_MS.match(job.created_at)
    assert job.created_at == iso(clock.now()) == "2026-01-01T00:00:00.123Z"
    assert job.updated_at == job.created_at
    assert job.result is None and job.error is None
    assert job.started_at is None and job.completed_at is None
    assert (
        job.key is None and job.owner is None and job.owner_pid is None and job.heartbeat_at is None
    )


def test_enqueue_defaults(queue, clock):
    job = queue.get(queue.enqueue("t"))
    assert job.payload is None
    assert job.priority == 0
    assert job.run_at == job.created_at == iso(clock.now())
    assert job.max_attempts is None


def test_enqueue_max_attempts_and_delay(queue, clock):
    job = queue.get(queue.enqueue("t", {}, delay=30, max_attempts=4))
    assert job.max_attempts == 4
    assert parse_iso(job.run_at) == pytest.approx(clock.now() + 30, abs=0.001)


@pytest.mark.parametrize(
    "run_at",
    [
        datetime(2026, 5, 1, 14, 0, tzinfo=timezone(timedelta(hours=2))),
        "2026-05-01T12:00:00Z",
        "2026-05-01T14:00:00+02:00",
        datetime(2026, 5, 1, 12, 0, tzinfo=timezone.utc).timestamp(),
    ],
)
def test_run_at_forms_are_normalised_to_utc(queue, run_at):
    assert queue.get(queue.enqueue("t", run_at=run_at)).run_at == "2026-05-01T12:00:00.000Z"


def test_ids_are_unique(queue):
    ids = {queue.enqueue("t", i) for i in range(200)}
    assert len(ids) == 200


def test_get_unknown_id(queue):
    assert queue.get("0" * 32) is None


def test_counts(queue):
    queue.enqueue("a")
    queue.enqueue("b")
    assert queue.counts() == {"pending": 2}


@pytest.mark.engine_only("sqlite", reason="a SQLite file's path, relative to the config file")
def test_from_config_resolves_database_next_to_file(tmp_path, make_config, monkeypatch):
    sub = tmp_path / "conf"
    sub.mkdir()
    path = make_config(sub, database="data.db")
    monkeypatch.chdir(tmp_path)
    with JobQueue.from_config(str(path)) as q:
        job_id = q.enqueue("t", {"x": 1})
    assert (sub / "data.db").exists()
    assert not (tmp_path / "data.db").exists()
    with JobQueue(str(sub / "data.db")) as q:
        assert q.get(job_id).payload == {"x": 1}


def test_pause_resume(queue):
    assert not queue.is_paused()
    queue.pause()
    assert queue.is_paused()
    queue.resume()
    assert not queue.is_paused()


# -- idempotency keys ----------------------------------------------------------------------------


def test_same_key_twice_returns_same_id_and_one_row(queue):
    first = queue.enqueue("report:generate", {"v": 1}, key="report-r1")
    second = queue.enqueue("report:generate", {"v": 2}, key="report-r1")
    assert first == second
    assert row_count(queue.config) == 1
    job = queue.get(first)
    assert job.key == "report-r1"
    assert job.payload == {"v": 1}  # the first one is kept, not overwritten
    assert queue.enqueue("report:generate", {"v": 3}, key="report-r2") != first
    assert row_count(queue.config) == 2


def test_enqueue_many_with_duplicate_keys(queue):
    existing = queue.enqueue("t", {"n": 0}, key="k0")
    ids = queue.enqueue_many(
        [
            ("t", {"n": 1}, {"key": "k1"}),
            ("t", {"n": 2}),
            {"type": "t", "payload": {"n": 3}, "key": "k1"},
            ("t", {"n": 4}, {"key": "k0"}),
            ("t", {"n": 5}),
            ("t", {"n": 6}, {"key": "k2"}),
        ]
    )
    assert len(ids) == 6
    assert ids[0] == ids[2]
    assert ids[3] == existing
    assert len({ids[0], ids[1], ids[3], ids[4], ids[5]}) == 5
    assert row_count(queue.config) == 5  # k0 (before), k1, two plain ones, k2
    assert [queue.get(i).payload["n"] for i in ids] == [1, 2, 1, 0, 5, 6]


def test_enqueue_many_order_and_options(queue, clock):
    ids = queue.enqueue_many(
        [
            ("a", {"i": 0}),
            ("b", {"i": 1}, {"priority": 3, "delay": 10, "max_attempts": 2}),
            {"type": "c", "payload": {"i": 2}, "run_at": "2026-06-01T00:00:00Z"},
            ("d",),
        ]
    )
    jobs = [queue.get(i) for i in ids]
    assert [j.type for j in jobs] == ["a", "b", "c", "d"]
    assert jobs[1].priority == 3 and jobs[1].max_attempts == 2
    assert parse_iso(jobs[1].run_at) == pytest.approx(clock.now() + 10, abs=0.001)
    assert jobs[2].run_at == "2026-06-01T00:00:00.000Z"
    assert jobs[3].payload is None
    assert queue.enqueue_many([]) == []


def test_enqueue_many_validates_everything_before_writing(queue):
    with pytest.raises(TypeError, match="item 2"):
        queue.enqueue_many([("a", {}), ("b", {}), ("c", {1, 2})])
    with pytest.raises(ValueError, match="item 1"):
        queue.enqueue_many([("a", {}), ("", {})])
    with pytest.raises(TypeError, match="unknown options"):
        queue.enqueue_many([("a", {}, {"prio": 1})])
    with pytest.raises(TypeError, match="item 0"):
        queue.enqueue_many(["just-a-string"])
    assert row_count(queue.config) == 0


def test_a_booted_supervisor_records_what_it_serves_and_from_config_checks_against_it(
    tmp_path, sup_factory, monkeypatch
):
    """The supervisor imports the handler modules at boot and records their types (and their
    handlers' queues) in the database; a producer checks against that record, importing none of
    them (``importmark`` writes each importing process's pid); the supervisor logs the types
    with waiting jobs that nothing serves; once it has stopped its record counts no more."""
    marks = tmp_path / "import-marks"
    monkeypatch.setenv("JOBQ_TEST_IMPORT_MARKS", str(marks))
    monkeypatch.delitem(sys.modules, "importmark", raising=False)
    path = write_config(tmp_path, handlers=["opsjobs", "importmark"], supervisor={"workers": 0})
    with JobQueue.from_config(str(path)) as q:
        q.enqueue_many([("ops:gone", {}), ("ops:gone", {})])  # no supervisor yet: nothing said
        sup = sup_factory(path)
        wait_until(lambda: served_types(q.store), timeout=60, what="the supervisor's record")
        wait_until(lambda: "supervisor.unserved_types" in sup.output(), what="the boot's warning")
        assert re.search(r"supervisor.unserved_types .*types=ops:gone:2", sup.output()), (
            sup.output()
        )
        unserved = r"'ops:okk' is served by none of the handler modules the running supervisors"
        with pytest.warns(UnservedTypeWarning, match=unserved + r" loaded \(opsjobs, importmark\)"):
            q.enqueue("ops:okk", {})
        handle = q.handle(q.enqueue("mark:ok", {}))
        assert q.get(handle.id).queue == "marked"  # the handler's queue, known from the record
        assert "importmark" not in sys.modules
        assert str(os.getpid()) not in marks.read_text().split()  # the supervisor's processes did
        sup.signal(signal.SIGTERM)
        assert sup.wait(60) == 0
        assert served_types(q.store) is None


# -- transactional enqueue -----------------------------------------------------------------------


@pytest.fixture
def app_conn(queue):
    """The application's own connection (autocommit: the test begins and ends transactions)."""
    conn = raw(queue.config)
    conn.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, what TEXT)")
    yield getattr(conn, "conn", conn)  # the driver's connection, as conn= takes it
    conn.close()


def test_transactional_enqueue_committed(queue, app_conn):
    app_conn.execute("BEGIN")
    app_conn.execute("INSERT INTO orders (id, what) VALUES (1, 'book')")
    job_id = queue.enqueue("order:ship", {"order": 1}, conn=app_conn)
    key_id = queue.enqueue("order:mail", {"order": 1}, key="mail-1", conn=app_conn)
    # Not visible to others before the commit.
    assert queue.get(job_id) is None
    assert row_count(queue.config) == 0
    app_conn.execute("COMMIT")
    assert queue.get(job_id).payload == {"order": 1}
    assert queue.get(key_id).key == "mail-1"
    assert queue.enqueue("order:mail", {"order": 1}, key="mail-1") == key_id
    assert row_count(queue.config) == 2


def test_get_through_the_application_connection_sees_its_open_transaction(queue, app_conn):
    """``get(id, conn=)`` reads through the application's connection, as ``enqueue(conn=)``
    writes: inside its open transaction the job it wrote is found (jobq's own connection
    cannot see it yet), also where that connection's search path lacks jobq's schema."""
    if not isinstance(app_conn, sqlite3.Connection):
        app_conn.execute("SET search_path TO DEFAULT")
    app_conn.execute("BEGIN")
    job_id = queue.enqueue("order:ship", {"order": 1}, priority=4, queue="mail", conn=app_conn)
    seen = queue.get(job_id, conn=app_conn)
    assert queue.get(job_id) is None
    assert (seen.id, seen.payload, seen.priority, seen.queue) == (job_id, {"order": 1}, 4, "mail")
    assert seen.status == "pending" and seen.created_at == seen.run_at
    assert queue.get("no-such-job", conn=app_conn) is None
    app_conn.execute("ROLLBACK")
    assert queue.get(job_id, conn=app_conn) is None


def test_transactional_enqueue_rolled_back(queue, app_conn):
    app_conn.execute("BEGIN")
    app_conn.execute("INSERT INTO orders (id, what) VALUES (1, 'book')")
    job_id = queue.enqueue("order:ship", {"order": 1}, conn=app_conn)
    ids = queue.enqueue_many([("a", 1), ("b", 2, {"key": "kb"})], conn=app_conn)
    app_conn.execute("ROLLBACK")
    assert queue.get(job_id) is None
    assert all(queue.get(i) is None for i in ids)
    assert row_count(queue.config) == 0
    assert app_conn.execute("SELECT count(*) FROM orders").fetchone()[0] == 0
    # The key is free again after the rollback.
    assert queue.enqueue("b", 2, key="kb") not in ids
    assert row_count(queue.config) == 1


@pytest.fixture
def own_conn(queue):
    """The application's connection as an application opens it: on PostgreSQL with the
    server's default search_path (jobq's schema is not on it), on SQLite to the same file."""
    if queue.config.database.startswith("postgres"):
        import psycopg

        conn = psycopg.connect(queue.config.database, autocommit=True)
    else:
        conn = sqlite3.connect(queue.config.database, isolation_level=None, timeout=10)
    conn.execute("CREATE TEMP TABLE orders (id INTEGER PRIMARY KEY)")
    yield conn
    conn.close()


def _every_enqueue(q: JobQueue, conn) -> dict[str, str]:
    """Every way to enqueue, each option, through ``conn``; the ids by what made them."""
    from jobq import chain, chord, group
    from tests.fixtures import flowjobs

    tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    ids = {"plain": q.enqueue("t", {"a": 1}, conn=conn)}
    ids["options"] = q.enqueue(
        "t",
        {"a": 2},
        delay=60,
        priority=5,
        max_attempts=3,
        key="k-opts",
        queue="reports",
        limit_key="acme",
        traceparent=tp,
        conn=conn,
    )
    ids["run_at"] = q.enqueue("t", run_at=2e9, conn=conn)
    ids["after"] = q.enqueue(
        "t", after=[ids["plain"]], after_failure="run", queue="reports", limit_key="acme", conn=conn
    )
    ids["after_key"] = q.enqueue("t", after=[ids["plain"]], key="k-after", priority=2, conn=conn)
    ids["after_taken"] = q.enqueue("t", after=[ids["plain"]], key="k-taken", conn=conn)
    many = q.enqueue_many(
        [
            ("t", 1),
            ("t", 2, {"key": "k-many", "queue": "reports"}),
            {"type": "t", "payload": 3, "after": [0, ids["plain"]], "limit_key": "x"},
            ("t", 4, {"after": [2], "key": "k-many-after", "delay": 5}),
        ],
        conn=conn,
    )
    ids.update({f"many{i}": m for i, m in enumerate(many)})
    ids["batched"] = q.enqueue_many([("t", 5)], batch_size=1, traceparent=tp, conn=conn)[0]
    ext = flowjobs.extract.using(queue=q, conn=conn, after=[ids["plain"]], key="k-task", priority=4)
    ids["task"] = ext.enqueue(1).id
    ids["task_many"] = flowjobs.extract.using(queue=q, conn=conn).enqueue_many([((2,), {})])[0].id
    run = chain(flowjobs.extract.s(3), flowjobs.load.s(3)).enqueue(q, conn=conn)
    ids.update({f"chain{i}": h.id for i, h in enumerate(run.handles)})
    run = chord(group(flowjobs.extract.s(4), flowjobs.extract.s(5)), flowjobs.load.s(4)).enqueue(
        q, conn=conn
    )
    ids.update({f"chord{i}": h.id for i, h in enumerate(run.handles)})
    return ids


@pytest.mark.parametrize("end", ["ROLLBACK", "COMMIT"])
def test_every_enqueue_joins_the_transaction_of_a_connection_with_its_own_search_path(
    queue, own_conn, end
):
    taken = queue.enqueue("t", key="k-taken")
    own_conn.execute("BEGIN")
    own_conn.execute("INSERT INTO orders (id) VALUES (1)")
    ids = _every_enqueue(queue, own_conn)
    assert ids["after_taken"] == taken
    assert queue.get(ids["plain"]) is None  # not visible before the commit
    own_conn.execute("INSERT INTO orders (id) VALUES (2)")  # the transaction still works
    own_conn.execute(end)
    orders = own_conn.execute("SELECT count(*) FROM orders").fetchone()[0]
    assert orders == (2 if end == "COMMIT" else 0)
    new = set(ids.values()) - {taken}
    if end == "ROLLBACK":
        assert row_count(queue.config) == 1 and all(queue.get(i) is None for i in new)
        return
    assert row_count(queue.config) == 1 + len(new)
    opts = queue.get(ids["options"])
    assert (opts.priority, opts.max_attempts, opts.key, opts.queue, opts.limit_key) == (
        5,
        3,
        "k-opts",
        "reports",
        "acme",
    )
    assert opts.trace is not None
    waiting = {
        k: queue.get(ids[k])
        for k in ("after", "after_key", "many2", "many3", "task", "chain1", "chord2")
    }
    assert {k: j.status for k, j in waiting.items()} == dict.fromkeys(waiting, "waiting")
    assert (waiting["after"].queue, waiting["after"].limit_key) == ("reports", "acme")
    assert (waiting["after_key"].key, waiting["after_key"].priority) == ("k-after", 2)
    assert waiting["task"].key == "k-task" and waiting["task"].priority == 4
    assert queue.enqueue("t", key="k-after") == ids["after_key"]
    assert [p["id"] for p in queue.store.parents(ids["many2"])] == [ids["many0"], ids["plain"]]
    assert [p["id"] for p in queue.store.parents(ids["chord2"])] == [ids["chord0"], ids["chord1"]]


def test_a_failed_statement_through_conn_is_a_query_error_not_an_outage(queue, own_conn, tmp_path):
    """A connection that works but where jobq's statement fails (PostgreSQL: a transaction
    that already failed; SQLite: a file without jobq's tables) is the caller's to fix: a
    StoreQueryError, not StoreUnavailable (which means the database cannot be reached)."""
    if queue.config.database.startswith("postgres"):
        conn = own_conn
        conn.execute("BEGIN")
        with pytest.raises(Exception, match="division by zero"):
            conn.execute("SELECT 1 / 0")
        cause = "transaction is aborted"
    else:
        conn = sqlite3.connect(str(tmp_path / "other.db"), isolation_level=None)
        cause = "no such table"
    for call in (
        lambda: queue.enqueue("t", conn=conn),
        lambda: queue.enqueue("t", key="k", conn=conn),
        lambda: queue.enqueue_many([("t", 1), ("t", 2, {"after": [0]})], conn=conn),
    ):
        with pytest.raises(StoreQueryError, match=cause) as err:
            call()
        assert not isinstance(err.value, StoreUnavailable)
    conn.execute("ROLLBACK") if conn is own_conn else conn.close()
    assert queue.enqueue("t") and row_count(queue.config) == 1


# -- bad input writes nothing ---------------------------------------------------------------------


class Widget:
    pass


@pytest.mark.parametrize(
    "kwargs, exc, pattern",
    [
        (dict(type="t", payload={"w": Widget()}), TypeError, "Widget"),
        (dict(type="t", payload={1, 2}), TypeError, "set"),
        (dict(type="t", payload=float("nan")), ValueError, "JSON"),
        (dict(type="t", payload="x" * 200), ValueError, "max_payload_bytes"),
        (dict(type="t", payload="é" * 60), ValueError, "max_payload_bytes"),  # 122 bytes, 62 chars
        (dict(type="", payload={}), ValueError, "type"),
        (dict(type="   ", payload={}), ValueError, "type"),
        (dict(type=None, payload={}), ValueError, "type"),
        (dict(type="t", payload={}, run_at=datetime(2026, 5, 1, 12, 0)), ValueError, "timezone"),
        (dict(type="t", payload={}, run_at="2026-05-01T12:00:00"), ValueError, "timezone"),
        (dict(type="t", payload={}, run_at=[1]), TypeError, "run_at"),
        (dict(type="t", payload={}, run_at=1.0, delay=1), ValueError, "not both"),
        (dict(type="t", payload={}, delay=-1), ValueError, "delay"),
        (dict(type="t", payload={}, delay=float("nan")), ValueError, "run_at"),
        (dict(type="t", payload={}, delay=float("inf")), ValueError, "run_at"),
        (dict(type="t", payload={}, delay=3.2e11), ValueError, "years 1 to 9999"),  # year 12110
        (dict(type="t", payload={}, run_at=float("inf")), ValueError, "run_at"),
        (dict(type="t", payload={}, run_at=1e12), ValueError, "years 1 to 9999"),
        (dict(type="t", payload={}, max_attempts=0), ValueError, "max_attempts"),
        (dict(type="t", payload={}, max_attempts=-3), ValueError, "max_attempts"),
        (dict(type="t", payload={}, max_attempts=True), ValueError, "max_attempts"),
        (dict(type="t", payload={}, max_attempts=2.0), ValueError, "max_attempts"),
        (dict(type="t", payload={}, priority="high"), TypeError, "priority"),
        (dict(type="t", payload={}, key=""), ValueError, "key"),
    ],
)
def test_bad_input_raises_and_writes_nothing(tmp_path, make_config, clock, kwargs, exc, pattern):
    cfg = load(make_config(tmp_path, max_payload_bytes=100))
    kwargs = dict(kwargs)  # the parameter's own dict serves the next engine too
    with JobQueue(config=cfg, clock=clock) as q:
        jtype = kwargs.pop("type")
        with pytest.raises(exc, match=pattern):
            q.enqueue(jtype, **kwargs)
        with pytest.raises(exc, match=pattern):
            q.enqueue_many([{"type": jtype, **kwargs}])
        assert q.counts() == {}
    assert row_count(cfg) == 0


def test_payload_type_error_names_the_type(queue):
    with pytest.raises(TypeError) as info:
        queue.enqueue("report:generate", {"when": datetime.now(timezone.utc)})
    assert "datetime" in str(info.value)
    assert "report:generate" in str(info.value)


def test_payload_size_limit_is_inclusive_and_counts_bytes(tmp_path, make_config, clock):
    cfg = load(make_config(tmp_path, max_payload_bytes=100))
    with JobQueue(config=cfg, clock=clock) as q:
        at_limit = "x" * 98  # + 2 quotes = 100 bytes
        assert q.get(q.enqueue("t", at_limit)).payload == at_limit
        with pytest.raises(ValueError, match="101 bytes"):
            q.enqueue("t", at_limit + "x")
        assert q.counts() == {"pending": 1}


def test_far_but_valid_run_at_keeps_fixed_width_ordering(queue, clock):
    last = datetime(9999, 12, 31, 23, 59, 58, tzinfo=timezone.utc)
    far = queue.enqueue("t", "far", run_at=last)
    assert queue.get(far).run_at == "9999-12-31T23:59:58.000Z"
    assert queue.store.claim("h:1:1", 1, clock.now(), 1) == []


def test_enqueue_many_round_trips_awkward_types_and_payloads(database, tmp_path):
    """enqueue_many sends its rows to the database as one JSON document: every type and payload
    must come back exactly (as the engine keeps JSON: ``database.kept``). (Type names may not
    hold control characters: test_bad_type_names.)"""
    from shared.producer.api import JobQueue

    items = [
        ("t:x", {"a": "\x00", "\x00": "\n\t"}),
        ('é😀"\\ x', {"k": "😀\ud7ff\ue000 \u2028 \x7f \x1f"}),
        ("t", "\\u0000"),
        ("t", [1, 2.5, None, True, {"x": -0.0}]),
        ("t", 1e308),
        ("t", "a'b"),
        ("t", None),
        ("t", None, {"priority": -(1 << 31), "max_attempts": (1 << 31) - 1}),
    ]
    with JobQueue(config=database.config(tmp_path)) as q:
        ids = q.enqueue_many(items)
        assert len(set(ids)) == len(items)
        for item, job_id in zip(items, ids):
            job = q.get(job_id)
            assert (job.type, job.payload) == (item[0], database.kept(item[1]))
        assert (q.get(ids[-1]).priority, q.get(ids[-1]).max_attempts) == (-(1 << 31), (1 << 31) - 1)
        assert q.get(ids[0]).priority == 0 and q.get(ids[0]).max_attempts is None


@pytest.mark.parametrize(
    "opts, message",
    [
        ({"priority": 1 << 31}, "priority must fit in 32 bits"),
        ({"max_attempts": 1 << 31}, "max_attempts must be"),
    ],
)
def test_enqueue_many_refuses_integers_beyond_32_bits(database, tmp_path, opts, message):
    from shared.producer.api import JobQueue

    with JobQueue(config=database.config(tmp_path)) as q:
        with pytest.raises(ValueError, match=f"item 1: .*{message}"):
            q.enqueue_many([("t", None), ("t", None, opts)])
        assert q.counts() == {}


def test_new_ids_are_unique_time_ordered_hex():
    from shared.model.job import new_id, new_ids

    ids = new_ids(1000)
    assert len(set(ids)) == 1000 and all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    assert new_id()[:12] >= ids[0][:12]


@pytest.mark.parametrize(
    "option, value",
    [
        ("priority", 1 << 31),
        ("priority", -(1 << 31) - 1),
        ("max_attempts", 1 << 31),
        ("max_attempts", 0),
    ],
)
def test_priority_and_max_attempts_beyond_32_bits_are_refused_naming_the_job(queue, option, value):
    """Every engine stores 32-bit integers: a value beyond is refused before anything is written,
    the same on each engine, naming the job's type and the value."""
    with pytest.raises(ValueError) as err:
        queue.enqueue("report:big", {}, **{option: value})
    assert (
        "report:big" in str(err.value) and option in str(err.value) and str(value) in str(err.value)
    )
    assert queue.counts() == {}
