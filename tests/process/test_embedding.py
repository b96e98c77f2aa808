"""The embedding API: Supervisor(config).start(), pause(), resume(), wait_for_active(), stop()."""

from __future__ import annotations

import os

import psutil
import pytest

from shared import JobQueue
from shared.settings import config as config_mod
from supervisor import Supervisor
from tests.proc import FIXTURES, is_template, wait_until, worker_rows, write_config


@pytest.fixture(autouse=True)
def fixture_handlers_importable(monkeypatch):
    """The supervisor process started by ``start()`` inherits this environment."""
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(p for p in (FIXTURES, os.environ.get("PYTHONPATH")) if p)
    )


def _workers_of(tree: list[psutil.Process], root: int) -> list[psutil.Process]:
    template = [p.pid for p in tree if is_template(p) and _ppid(p) == root]
    return [p for p in tree if p.pid not in template and _ppid(p) not in template]


def _ppid(p: psutil.Process) -> int | None:
    try:
        return p.ppid()
    except psutil.NoSuchProcess:
        return None


def _children(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def test_start_pause_wait_for_active_resume_stop(tmp_path):
    cfg = write_config(tmp_path, supervisor={"workers": 2})
    gate, log = tmp_path / "gate", tmp_path / "events.log"
    sup = Supervisor(str(cfg))
    sup.start(timeout=60)
    try:
        # start() returned with both workers forked: every descendant but the template and its
        # go-betweens (its children, which exit as soon as they have forked a worker). Polled
        # briefly: a worker re-parented from its go-between to the supervisor while psutil
        # walks the process table can be missed by that one walk.
        tree = wait_until(
            lambda: len(_workers_of(t := _children(sup.process.pid), sup.process.pid)) == 2 and t,
            timeout=5,
            what="both workers in the process tree",
        )
        wait_until(lambda: len(worker_rows(cfg)) == 2, what="workers registered")
        with JobQueue(str(tmp_path / "q.db")) as q:
            busy = q.enqueue("test:gate", {"gate": str(gate), "log": str(log)})
            wait_until(lambda: q.get(busy).status == "running", what="job running")
            sup.pause()
            later = q.enqueue("test:noop", {"log": str(log)})
            with pytest.raises(TimeoutError):
                sup.wait_for_active(0.5)  # the gate job is still running
            gate.touch()
            sup.wait_for_active(30)
            assert q.get(busy).status == "completed"
            assert q.get(later).status == "pending"  # paused: nothing claimed
            sup.resume()
            wait_until(lambda: q.get(later).status == "completed", what="job runs after resume")
    finally:
        code = sup.stop(30)
    assert code == 0
    wait_until(
        lambda: all(not p.is_running() or p.status() == psutil.STATUS_ZOMBIE for p in tree),
        what="no process left",
    )


def test_in_memory_config_is_written_for_the_workers(tmp_path):
    base = config_mod.load(write_config(tmp_path, supervisor={"workers": 1}))
    cfg = base.replace(path=None)  # as if built in code, not read from a file
    with Supervisor(cfg) as sup:
        sup.start(timeout=60)
        assert sup.config.path and os.path.exists(sup.config.path)
        with JobQueue(cfg.database) as q:
            jid = q.enqueue("test:noop", {})
            wait_until(lambda: q.get(jid).status == "completed", what="job completed")
        tmp_config = sup.config.path
    assert sup.process.returncode == 0
    assert not os.path.exists(tmp_config)
