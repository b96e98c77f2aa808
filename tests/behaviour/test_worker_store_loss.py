"""An idle worker outlives its database failing under it: every store call
on the idle/claim/wake-up path is guarded; a StoreError there is waited out and retried, never
fatal (exit 1 is a bug). In process on both engines, and with a real supervisor on PostgreSQL
whose workers' connections are terminated (``pg_terminate_backend``) or ended by the server's
``idle_session_timeout``."""

from __future__ import annotations

import json
import threading

import psutil
import pytest

from shared import JobQueue
from shared.settings.config import load
from shared.model.errors import StoreUnavailable
from shared.model.exitcodes import ExitCode
from shared.execution.handlers import handler
from tests.proc import Running, log_events, wait_until, write_config
from tests.behaviour.test_worker import registry_of
from worker.loop import Worker


@handler("t:after")
def after(payload, job):
    return "ran"


def test_an_idle_worker_waits_out_a_failing_database(engine, tmp_path):
    """The store's reads on the idle path (``next_due`` or the lead's ``idle_read`` for the wait,
    ``has_due`` before a claim) fail for a while: the worker logs it once, keeps waiting, and runs the next job once they
    work again."""
    cfg = engine.config(load(write_config(tmp_path, handlers=[])))
    w = Worker(cfg, registry_of(after))
    out: list[int] = []
    t = threading.Thread(target=lambda: out.append(w.run()), daemon=True)
    t.start()
    calls = []

    def failing(*args, **kwargs):
        calls.append(args)
        raise StoreUnavailable(f"{engine.name}: the server closed the connection (test)")

    try:
        wait_until(lambda: w.wakeup is not None, what="the worker to start")
        w.store.has_due = w.store.next_due = w.store.idle_read = failing
        wait_until(
            lambda: len(calls) >= 3 or not t.is_alive(), what="the failing reads to be retried"
        )
        assert t.is_alive(), f"the worker ended: {out}"
        del w.store.has_due, w.store.next_due, w.store.idle_read
        with JobQueue(config=cfg) as q:
            job = q.enqueue("t:after")
            wait_until(
                lambda: q.get(job).status == "completed", what="a job enqueued afterwards to run"
            )
    finally:
        w.stopping = True
        w.signals.wake()
        t.join(15)
    assert out == [ExitCode.OK]


# -- a real supervisor on PostgreSQL -----------------------------------------------------------


def worker_backends(pg_url: str, pids: list[int]) -> dict[int, int]:
    """The server backend pid of each worker's connection (over TCP: matched by the client port;
    a worker between connections has none)."""
    import psycopg

    ports = {}
    for pid in pids:
        try:
            for c in psutil.Process(pid).net_connections(kind="tcp"):
                if c.raddr and c.raddr[-1] == 5432 and c.status == psutil.CONN_ESTABLISHED:
                    ports[c.laddr[-1]] = pid
        except psutil.Error:
            pass
    with psycopg.connect(pg_url, autocommit=True) as c:
        rows = c.execute(
            "SELECT pid, client_port FROM pg_stat_activity WHERE client_port = ANY(%s)",
            (list(ports),),
        ).fetchall()
    return {ports[port]: backend for backend, port in rows}


def terminate(pg_url: str, backends: list[int]) -> None:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as c:
        for b in backends:
            c.execute("SELECT pg_terminate_backend(%s)", (b,))


@pytest.mark.parametrize("how", ["pg_terminate_backend", "idle_session_timeout"])
def test_idle_workers_survive_losing_their_postgresql_connection(tmp_path, how):
    """Four idle workers whose connections the server ends: none exits (exit 1 with a traceback
    before), and each connects again when it next needs the server: jobs enqueued afterwards
    run on every one of them."""
    from tests.engines import PostgresEngine
    from tests.process.test_fork_safety import over_tcp

    pg = PostgresEngine(tmp_path)
    over_tcp(pg)
    url = pg.database
    if how == "idle_session_timeout":  # every session idle for 500 ms is ended by the server
        url += "?options=-c%20idle_session_timeout%3D500"
    cfg = write_config(
        tmp_path,
        database=url,
        postgres={"schema": pg.schema},
        log_format="json",
        handlers=["testjobs"],
        supervisor={"workers": 4},
    )
    sup = Running(cfg)
    try:
        wait_until(
            lambda: len(log_events(sup, "worker.started")) == 4,
            timeout=30,
            what="4 workers started",
        )
        workers = [e["pid"] for e in log_events(sup, "worker.started")]
        # Connections are seen one poll at a time, not all four at once: under idle_session_timeout
        # a worker holds one only from a use until the server ends it 500 ms later.
        first: dict[int, int] = {}
        wait_until(
            lambda: (
                first.update({**worker_backends(pg.database, workers), **first}) or len(first) == 4
            ),
            what="the 4 workers' connections",
        )
        if how == "pg_terminate_backend":
            terminate(pg.database, list(first.values()))
        else:  # every connection outlived its 500 ms: the server ended them all
            wait_until(
                lambda: not worker_backends(pg.database, workers),
                timeout=30,
                what="the server to end the idle sessions",
            )
        # An idle follower reads nothing, so it meets its lost connection at its next claim:
        # four jobs that hold their worker until a gate opens make every worker claim one.
        gate, runs = tmp_path / "gate", tmp_path / "runs.jsonl"
        with JobQueue(config=load(cfg).replace(database=pg.database)) as q:
            jobs = [q.enqueue("test:gate", {"gate": str(gate), "log": str(runs)}) for _ in range(4)]

            def pids() -> set[int]:
                lines = runs.read_text().splitlines() if runs.exists() else []
                return {json.loads(line)["pid"] for line in lines}

            wait_until(
                lambda: log_events(sup, "worker.exited") or pids() == set(workers),
                timeout=30,
                what="every worker to claim a job after losing its connection (or one to exit)",
            )
            gate.touch()
            wait_until(
                lambda: all(q.get(j).status == "completed" for j in jobs), what="the jobs to end"
            )
        assert log_events(sup, "worker.exited") == []
        assert sorted(sup.workers()) == sorted(workers)
        assert "Traceback" not in sup.output()
    finally:
        sup.close()
        pg.drop()
