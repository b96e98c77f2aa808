"""Nothing crosses fork(): the supervisor holds no SQLite file open and runs no other thread when
it forks (the template, or a worker by exec), and the template, which forks every worker, never
opens the database and runs no thread either. And no code but the worker's own reaches the worker
loop: a process a handler forked that comes back (returns or raises instead of ``os._exit``) ends
there (tests/process/test_worker_strays.py runs it in real supervisors on both engines)."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import types

import psutil
import pytest

from shared.settings import config as config_mod
from shared.settings.config import load
from shared.engines.sqlite.store import SqliteStore
from shared.model.exitcodes import ExitCode
from shared.execution.handlers import Registry, handler
from shared.model.job import Job
from shared.execution.runner import JobContext, execute
from supervisor import forkserver
from supervisor.arbiter import Arbiter
from tests.proc import FIXTURES, Running, wait_until, worker_rows, write_config
import worker.forkserver as template_side
from worker.loop import Worker


def open_database_fds(db_path: str, pid: int | str = "self") -> list[str]:
    """The open file descriptors of ``pid`` that belong to the database: a SQLite file's paths,
    or a PostgreSQL server's connections (over TCP)."""
    if db_path.startswith("postgresql:"):
        return server_connections(os.getpid() if pid == "self" else int(pid))
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(db_path):
            out.append(target)
    return out


def server_connections(pid: int) -> list[str]:
    """``pid``'s TCP connections to a PostgreSQL server (port 5432; see ``over_tcp``)."""
    try:
        conns = psutil.Process(pid).net_connections(kind="all")
    except psutil.Error:
        return []
    out = []
    for c in conns:
        r = c.raddr
        if isinstance(r, tuple) and r and r[-1] == 5432:
            out.append(str(r))
    return out


def over_tcp(engine) -> None:
    """Point a PostgresEngine at its server over TCP: a unix-socket client's peer is invisible
    to psutil, a TCP one's port is not."""
    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(engine.database)
    host = info.get("host", "")
    if host.startswith("/") or not host:
        user = info.get("user") or os.environ.get("USER") or "root"
        engine.database = (
            f"postgresql://{user}@127.0.0.1:{info.get('port') or 5432}/{info.get('dbname', 'test')}"
        )


def test_checker_sees_an_open_server_connection(tmp_path):
    from tests.engines import PostgresEngine

    engine = PostgresEngine(tmp_path)
    over_tcp(engine)
    try:
        with engine.open():
            assert open_database_fds(engine.database)
        assert not open_database_fds(engine.database)
    finally:
        engine.drop()


def test_checker_sees_an_open_connection(tmp_path):
    path = str(tmp_path / "q.db")
    with SqliteStore(path):
        assert open_database_fds(path)
        assert template_side.unsafe_reason(path) is not None  # the template's own check too
    assert not open_database_fds(path)
    assert template_side.unsafe_reason(path) is None
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    try:
        assert "threads" in template_side.unsafe_reason(path)
    finally:
        stop.set()
        t.join()


def _checked_fork(db_path: str, record: str):
    """An os.fork that appends, to the file ``record``, the forking pid and the database files
    it has open and the extra threads it runs at that moment. A template forked from this
    process inherits the patch, so its forks are recorded too."""
    real_fork = os.fork

    def checked_fork() -> int:
        found = []
        fds = open_database_fds(db_path)
        if fds:
            found.append(f"open at fork: {fds}")
        if threading.active_count() > 1:
            found.append(f"threads at fork: {threading.enumerate()}")
        with open(record, "a") as f:
            f.write(json.dumps({"pid": os.getpid(), "violations": found}) + "\n")
        return real_fork()

    return checked_fork


@pytest.mark.parametrize(
    "template, engine",
    [(True, "sqlite"), (False, "sqlite"), (True, "postgresql"), (False, "postgresql")],
    ids=["template", "exec", "template-postgresql", "exec-postgresql"],
)
def test_no_database_fd_or_thread_at_any_fork(tmp_path, monkeypatch, template, engine):
    """In-process supervisor: every fork it makes (the template, exec'd workers, a respawn after
    a crash) and every fork the template makes (go-betweens and workers) is clean: no database
    file or server connection open, no other thread."""
    monkeypatch.setenv(forkserver.ENV_SWITCH, "1" if template else "0")
    cfg = config_mod.load(write_config(tmp_path, supervisor={"workers": 3}, handlers=[]))
    if engine == "postgresql":
        from tests.engines import PostgresEngine

        pg = PostgresEngine(tmp_path)
        over_tcp(pg)
        cfg = pg.config(cfg)
        monkeypatch.setenv("JOBQ_DATABASE", pg.database)  # the template and workers read the file
    record = str(tmp_path / "forks.jsonl")
    monkeypatch.setattr(os, "fork", _checked_fork(cfg.database, record))
    arb = Arbiter(cfg)
    assert arb.boot() == 0
    tpl = None
    try:
        arb.maintain()  # opens the database (recovery, WAL upkeep)
        wait_until(lambda: (arb.respawn(), len(arb.live()) == 3)[-1], what="3 workers")
        first = [s.pid for s in arb.live()]
        assert all(s.forked == template for s in arb.live())
        if template:
            tpl = arb.spawner.server.pid
            assert open_database_fds(cfg.database, tpl) == []  # seen from outside, too
            assert len(os.listdir(f"/proc/{tpl}/task")) == 1  # one thread
            wait_until(
                lambda: {psutil.Process(p).ppid() for p in first} == {os.getpid()},
                what="workers re-parented to the supervisor (once their go-between exited)",
            )
        # a crash and a respawn go through the same path
        os.kill(first[0], signal.SIGKILL)
        wait_until(
            lambda: (
                arb.reap_children(),
                arb.maintain(),
                arb.respawn(),
                first[0] not in [s.pid for s in arb.live()] and len(arb.live()) == 3,
            )[-1],
            what="respawn after crash",
        )
    finally:
        arb.begin_halt("test")
        arb.reap_blocking()
        arb.shutdown()
        if engine == "postgresql":
            pg.drop()
    seen = [json.loads(line) for line in open(record)]
    assert [v for s in seen for v in s["violations"]] == []
    by = {s["pid"] for s in seen}
    if template:  # the template fork here, then 4 workers there, each through a go-between
        assert os.getpid() in by and tpl in by and len(seen) >= 1 + 8
    else:  # 4 exec'd workers
        assert by == {os.getpid()} and len(seen) == 4


def test_template_of_a_real_supervisor_holds_no_database_and_one_thread(tmp_path):
    """From outside, on `python -m supervisor`: the template (jobq-template) has no database file
    open and one thread while its workers run jobs; the workers are the supervisor's children."""
    cfg = write_config(tmp_path, supervisor={"workers": 2})
    sup = Running(cfg)
    try:
        wait_until(lambda: len(worker_rows(cfg)) == 2, what="workers registered")
        kids = psutil.Process(sup.pid).children()
        templates = [p for p in kids if p.name() == template_side.NAME]
        assert len(templates) == 1
        tpl = templates[0]
        assert open_database_fds(str(tmp_path / "q.db"), tpl.pid) == []
        assert tpl.num_threads() == 1
        assert {r["pid"] for r in worker_rows(cfg)} <= {p.pid for p in kids}
    finally:
        sup.close()


# -- no code but the worker's own reaches the worker loop --------------------------------------


@handler("t:fork")
def forker(payload, job):
    """Forks a child that does ``payload`` instead of ``os._exit``; returns the child's pid."""
    child = os.fork()
    if child == 0:
        if payload == "raise":
            raise RuntimeError("the child failed")
        if payload == "exit":
            raise SystemExit(3)
        return "the child returned"
    return child


def test_execute_ends_a_forked_child_that_comes_back():
    """``execute`` (the worker's and the inline runner's) ends a process the handler forked that
    returns or raises instead of calling ``os._exit``: with 0, 1, or its ``sys.exit`` code."""
    mod = types.ModuleType("jobq_stray_test")
    mod.forker = forker
    reg = Registry()
    reg.add_module(mod)
    me = os.getpid()
    for payload, expected in (("raise", 1), ("return", 0), ("exit", 3)):
        job = Job.from_row(
            {
                "id": "j" * 32,
                "type": "t:fork",
                "status": "running",
                "payload": json.dumps(payload),
                "result": None,
                "error": None,
                "attempts": 1,
                "max_attempts": 1,
                "priority": 0,
                "run_at": "",
                "started_at": None,
                "completed_at": None,
                "created_at": "",
                "updated_at": "",
            }
        )
        outcome = execute(reg, job, JobContext(job.id, job.type, 1, 1))
        if os.getpid() != me:
            os._exit(99)  # the child came back here (before the fix): never let it run pytest on
        assert outcome.kind == "completed"
        _, status = os.waitpid(int(outcome.result), 0)
        assert os.waitstatus_to_exitcode(status) == expected, payload


def test_the_worker_loop_ends_a_process_that_is_not_its_own(tmp_path):
    """``Worker.check_process`` (every turn of the loop): in a process forked from the worker it
    ends that process (ERROR) instead of returning."""
    w = Worker(load(write_config(tmp_path, handlers=[])), Registry())
    try:
        w.check_process()  # the worker's own process: goes on
        child = os.fork()
        if child == 0:
            w.check_process()
            os._exit(99)  # came back: the check let a stray through
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == ExitCode.ERROR
    finally:
        w.signals.close()


def test_the_signal_pipe_tells_when_a_handler_closed_it():
    """``SignalQueue.intact``: False once its descriptors are closed, also when their numbers
    were reused since (what ``os.closerange`` in a handler does to a worker)."""
    from shared.runtime.signals import SignalQueue

    q = SignalQueue([signal.SIGHUP])
    assert q.intact()
    r, w = q._r, q._w
    os.close(r)
    os.close(w)
    assert not q.intact()
    again = os.pipe()
    try:
        assert r in again or w in again  # the numbers are taken again
        assert not q.intact()
    finally:
        for fd in again:
            os.close(fd)
        q.close()


# -- a queue made before a fork -------------------------------------------------------------------


def _backend(q) -> object:
    """What identifies the connection a queue uses: the server's backend pid on PostgreSQL, the
    ``sqlite3.Connection`` object's id on SQLite."""
    if q.config.database.startswith("postgresql"):
        return q.store.conn.execute("SELECT pg_backend_pid() AS p").fetchone()["p"]
    return id(q.store.conn)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_queue_used_in_a_child_after_fork_connects_again_and_spares_the_parent(tmp_path, kind):
    """A JobQueue made before a fork: the child enqueues through a connection of its own, then
    closes the queue and drops it (finalizers run); the parent's connection, and on PostgreSQL
    its server session, carry on untouched."""
    import gc
    from shared import JobQueue
    from tests.engines import PostgresEngine, SqliteEngine

    engine = PostgresEngine(tmp_path) if kind == "postgresql" else SqliteEngine(tmp_path)
    record = tmp_path / "child.json"
    try:
        q = JobQueue(config=engine.config())
        first = q.enqueue("test:noop")
        mine = _backend(q)
        pid = os.fork()
        if pid == 0:  # the child: report, close, collect, and leave without Python's exit
            code = 1
            try:
                job = q.enqueue("test:noop")
                record.write_text(json.dumps({"job": job, "backend": _backend(q)}))
                q.close()
                del q
                gc.collect()
                code = 0
            finally:
                os._exit(code)
        assert os.waitpid(pid, 0)[1] == 0
        child = json.loads(record.read_text())
        assert child["backend"] != mine  # the child had a connection of its own
        assert _backend(q) == mine  # the parent's is the same, still alive
        last = q.enqueue("test:noop")
        assert all(q.get(j).status == "pending" for j in (first, child["job"], last))
        assert q.counts().get("pending") == 3
        q.close()
    finally:
        if kind == "postgresql":
            engine.drop()


def test_the_template_sees_a_connection_to_the_server_over_a_unix_socket(tmp_path):
    """The template's check before each fork sees a socket to the PostgreSQL server, over the
    local unix socket too (it used to compare descriptors with the URL's path)."""
    from tests.engines import PostgresEngine

    engine = PostgresEngine(tmp_path)
    try:
        assert template_side.unsafe_reason(engine.database) is None
        with engine.open():
            reason = template_side.unsafe_reason(engine.database)
            assert reason is not None and "database" in reason
        assert template_side.unsafe_reason(engine.database) is None
        over_tcp(engine)
        with engine.open():
            assert template_side.unsafe_reason(engine.database) is not None
    finally:
        engine.drop()


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_a_template_whose_handlers_open_a_queue_at_import_does_not_fork(
    tmp_path, monkeypatch, engine
):
    """The handler module makes a module-level JobQueue at import (tests/fixtures/forkqueue.py):
    the template then holds a connection, so it forks nothing and says why; the workers are
    started by exec. (The supervisor imports the handler modules too, after forking the
    template: its own copy of the queue lets go of its connection in each child it forks.)"""
    monkeypatch.setenv(forkserver.ENV_SWITCH, "1")
    monkeypatch.chdir(tmp_path)  # the fixture's queue reads ./jobq.toml
    monkeypatch.syspath_prepend(FIXTURES)
    monkeypatch.delitem(sys.modules, "forkqueue", raising=False)  # imported afresh, here and there
    sections: dict = {}
    if engine == "postgresql":
        from tests.engines import PostgresEngine

        pg = PostgresEngine(tmp_path)
        over_tcp(pg)
        sections = {"database": pg.database, "postgres": {"schema": pg.schema}}
    cfg = config_mod.load(
        str(
            write_config(
                tmp_path,
                supervisor={"workers": 2},
                handlers=["forkqueue"],
                log_format="json",
                **sections,
            )
        )
    )
    record = str(tmp_path / "forks.jsonl")
    monkeypatch.setattr(os, "fork", _checked_fork(cfg.database, record))
    arb = Arbiter(cfg)
    assert arb.boot() == 0
    try:
        arb.maintain()
        wait_until(lambda: (arb.respawn(), len(arb.live()) == 2)[-1], what="2 workers")
        assert not any(s.forked for s in arb.live())  # exec'd: the template refused to fork
        assert arb.spawner.server is None and "database open" in (arb.spawner.off_reason or "")
    finally:
        arb.begin_halt("test")
        arb.reap_blocking()
        arb.shutdown()
        queue = sys.modules.pop("forkqueue", None)
        if queue is not None:
            queue.Q.close()
        if engine == "postgresql":
            pg.drop()
    seen = [json.loads(line) for line in open(record)]
    assert {s["pid"] for s in seen} == {os.getpid()}  # the template forked nothing
