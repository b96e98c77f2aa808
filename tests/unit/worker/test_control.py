"""worker.control: the worker's control path between two jobs: signals, reloads, a handler set
gone stale, recycling (on whole workers: tests/behaviour/test_worker.py, tests/process)."""

from __future__ import annotations

import os
import signal
import threading
from types import SimpleNamespace

import tomli_w

from shared.execution.handlers import HandlerSpec, Registry
from shared.model.exitcodes import ExitCode
from shared.settings import config as config_mod
from worker.batch import Batch
from worker.control import Control


def fn(payload, job):
    return None


def write(tmp_path, **data):
    path = tmp_path / "jobq.toml"
    path.write_text(tomli_w.dumps({"database": str(tmp_path / "jobs.db"), **data}))
    return config_mod.load(path)


class Worker(Control):
    def __init__(self, config, modules=("mine",)):
        self.config, self.pid, self.slot = config, os.getpid(), 0
        self.registry = Registry([HandlerSpec("known", fn)])
        self.registry.modules = modules
        self.held, self.stopping, self.exit_code = Batch(), False, ExitCode.OK
        self.heartbeat = SimpleNamespace(orphaned=threading.Event(), config=None)
        self.fence, self.snapshot, self.store, self.wakeup = None, None, None, None
        self.drained: list[int] = []
        self.signals = SimpleNamespace(drain=lambda: self.drained, intact=lambda both: True)
        self.jobs_done = 0


def test_stale_handlers_from_the_current_config_or_the_file(tmp_path):
    w = Worker(write(tmp_path, handlers=["mine"]))
    assert not w.stale_handlers()
    write(tmp_path, handlers=["mine", "new"])  # edited, not reloaded yet
    assert w.stale_handlers()
    (tmp_path / "jobq.toml").write_text("handlers = [")  # an invalid edit changes nothing
    assert not w.stale_handlers()
    assert not Worker(w.config, modules=None).stale_handlers()  # built by hand


def test_a_job_the_new_handlers_may_serve_is_given_back_and_the_worker_recycles(tmp_path):
    w = Worker(write(tmp_path, handlers=["mine"]))
    job = SimpleNamespace(id="j", type="unknown", attempts=1)
    assert not w.unserved(job)  # no other modules: it fails "no handler" when it runs
    write(tmp_path, handlers=["other"])
    assert not w.unserved(SimpleNamespace(id="k", type="known", attempts=1))
    assert w.unserved(job)
    assert list(w.held.queue) == [job] and w.stopping and w.exit_code == ExitCode.RECYCLED


def test_signals_stop_reload_and_an_orphan_stops(tmp_path):
    w = Worker(write(tmp_path, handlers=["mine"], worker={"max_jobs": 3}))
    w.drained = [signal.SIGHUP]
    write(tmp_path, handlers=["mine"], worker={"max_jobs": 7})
    w.handle_signals()
    assert w.config.worker.max_jobs == 7 and w.heartbeat.config is w.config and not w.stopping
    w.drained = [signal.SIGTERM]
    w.handle_signals()
    assert w.stopping and w.exit_code == ExitCode.OK
    w = Worker(w.config)
    w.drained = []
    w.heartbeat.orphaned.set()
    w.handle_signals()
    assert w.stopping and w.exit_code == ExitCode.ORPHANED


def test_a_reload_keeps_the_database_and_refuses_an_invalid_file(tmp_path):
    w = Worker(write(tmp_path, worker={"max_jobs": 3}))
    before = w.config
    other = tmp_path / "elsewhere"
    other.mkdir()
    (tmp_path / "jobq.toml").write_text(
        tomli_w.dumps({"database": str(other / "jobs.db"), "worker": {"max_jobs": 5}})
    )
    w.reload()
    assert w.config.worker.max_jobs == 5 and w.config.database == before.database
    (tmp_path / "jobq.toml").write_text("worker = 3")
    w.reload()
    assert w.config.worker.max_jobs == 5


def test_recycle_after_max_jobs_or_above_max_memory(tmp_path):
    w = Worker(write(tmp_path, worker={"max_jobs": 2}))
    w.jobs_done = 1
    assert not w.should_recycle()
    w.jobs_done = 2
    assert w.should_recycle()
    w = Worker(write(tmp_path, worker={"max_memory_mb": 1}))  # this process uses more
    assert w.should_recycle()
    w.check_process()  # its own process, descriptors intact: goes on
