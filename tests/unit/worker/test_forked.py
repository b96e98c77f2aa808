"""worker.forked: a worker forked by the template leaves the template's ways before anything of
its own runs, and waits for its re-parenting only so long (the gate: tests/unit/worker/
test_worker_start.py; forked workers at work: tests/process/test_forkserver.py)."""

from __future__ import annotations

import json
import os
import signal
import time

from worker import forked


def test_a_forked_worker_leaves_the_template_s_group_pipes_signals_and_name():
    report_r, report_w = os.pipe()
    req, resp = os.pipe()  # stand for the template's request and reply pipes
    pid = os.fork()
    if pid == 0:  # the child: report what it sees, never return into pytest
        try:
            os.close(report_r)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # as the template leaves it
            forked._leave_template(req, resp)
            closed = []
            for fd in (req, resp):
                try:
                    os.fstat(fd)
                except OSError:
                    closed.append(fd)
            seen = {
                "own_group": os.getpgid(0) == os.getpid(),
                "closed": closed == [req, resp],
                "term": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
                "blocked": sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])),
                "name": open(f"/proc/{os.getpid()}/comm").read().strip(),
            }
            os.write(report_w, json.dumps(seen).encode())
        finally:
            os._exit(0)
    os.close(report_w)
    os.close(req)
    os.close(resp)
    try:
        seen = json.loads(os.read(report_r, 4096))
    finally:
        os.close(report_r)
        os.waitpid(pid, 0)
    assert seen["own_group"] and seen["closed"] and seen["term"]
    assert set(forked.EARLY_SIGNALS) <= set(seen["blocked"])
    assert seen["name"] == forked.WORKER_NAME


def test_the_wait_to_be_reparented_ends_once_the_go_between_is_gone_or_at_its_limit(
    monkeypatch,
):
    t0 = time.monotonic()
    forked._reparented(os.getppid() + 1_000_000)  # not our parent: re-parented already
    assert time.monotonic() - t0 < 0.1
    monkeypatch.setattr(forked, "REPARENT_WAIT", 0.05)
    t0 = time.monotonic()
    forked._reparented(os.getppid())  # our parent never exits here: the limit ends the wait
    assert 0.05 <= time.monotonic() - t0 < 1.0
