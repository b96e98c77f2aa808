"""A handler's child started in a new session: it left the worker's process
group, so a kill of the group misses it; the supervisor also kills the worker's descendants
outside the group when it kills the worker. (What it does not track -- children left running
by a job that ended on its own -- is documented in docs/processes.md.)"""

from __future__ import annotations

import os
import signal

from shared import JobQueue
from tests.proc import events, job_row, pid_gone, wait_until, write_config


def test_a_new_session_grandchild_dies_with_its_killed_worker(tmp_path, sup_factory):
    cfg = write_config(
        tmp_path,
        handlers=["procjobs"],
        log_format="json",
        supervisor={"workers": 1, "kill_grace": 0.5},
    )
    log = tmp_path / "events.log"
    sup = sup_factory(cfg)
    child = None
    try:
        with JobQueue(str(tmp_path / "q.db")) as q:
            jid = q.enqueue("proc:session_child_block", {"log": str(log)})
        start = wait_until(
            lambda: next((e for e in events(log) if e["job"] == jid), None), what="the job started"
        )
        child = start["child"]
        assert os.getpgid(child) != os.getpgid(start["pid"])  # outside the worker's group
        wait_until(
            lambda: job_row(cfg, jid)["status"] == "failed", what="the job failed at its timeout"
        )
        wait_until(lambda: pid_gone(start["pid"]), what="its worker killed")
        wait_until(
            lambda: pid_gone(child), timeout=10, what="the new-session grandchild killed with it"
        )
    finally:
        if child is not None and not pid_gone(child):
            os.kill(child, signal.SIGKILL)
    sup.signal(signal.SIGTERM)
    assert sup.wait(20) == 0
