"""An idle worker starts a new job at once: the enqueue's notification (PostgreSQL) or
commit (SQLite) wakes it, even when the worker's heartbeat thread, which shares its connection,
is running a statement as the notification arrives (it used to read it off the socket the main
thread waited on, which then slept on until the next beat or 5 s)."""

from __future__ import annotations

import random
import time

import pytest

from shared.producer.api import JobQueue
from shared.settings.config import load
from tests.proc import events, wait_until, write_config

pytestmark = pytest.mark.engines  # the tests that use database (or sup_factory) run on each engine

JOBS = 25
LATE = 1.5  # seconds: an idle start later than this is the bug (up to 5 s; here the next beat, 3 s)


def test_every_job_enqueued_to_an_idle_worker_starts_at_once(tmp_path, sup_factory):
    # wakejobs: every tick (3 s) beats and holds the shared connection 0.5 s (a claim may wait
    # for that); one worker, the idle lead throughout
    cfg = write_config(
        tmp_path,
        handlers=["wakejobs"],
        supervisor={"workers": 1},
        worker={"heartbeat_interval": 3, "lease_timeout": 15, "poll_interval": 1},
    )
    log = tmp_path / "events.log"
    sup = sup_factory(cfg)
    q = JobQueue(config=load(str(cfg)))
    try:
        first = q.enqueue("test:noop", {"log": str(log)})
        wait_until(
            lambda: any(e["job"] == first for e in events(log)) if log.exists() else False,
            timeout=30,
            what="the workers to start",
        )
        rng = random.Random(30)
        late = []
        for _ in range(JOBS):
            time.sleep(rng.uniform(0.05, 0.25))  # idle between jobs, at no fixed phase of the beat
            sent = time.time()
            jid = q.enqueue("test:noop", {"log": str(log)})
            start = wait_until(
                lambda: next(
                    (e["t"] for e in events(log) if e["job"] == jid and e["event"] == "start"), None
                ),
                timeout=10,
                what=f"job {jid}",
            )
            if start - sent > LATE:
                late.append(round(start - sent, 3))
        assert late == [], (
            f"{len(late)} of {JOBS} idle jobs started late (s): {late}\n{sup.output()[-2000:]}"
        )
    finally:
        q.close()
