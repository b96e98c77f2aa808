"""The supervisor's listening connection on PostgreSQL (``shared.engines.postgres.relay``):
a control notified by any session (``notify_controls``: a cancel of a running job, a ``jobq
scale`` request) makes its ``serve`` say so at once; in direct mode it listens on the control
channel only, so new jobs' notifications wake no supervisor (the idle workers' lead hears
them). Its first connection counts as a control (what came before its LISTEN reached no one).
(SQLite has no relay: its supervisors read controls every round; tests/behaviour's
test_controls covers both engines end to end.)"""

from __future__ import annotations

import select
import subprocess
import sys
import time
from typing import Any

import pytest

from shared import engines, ops
from shared.engines.postgres.relay import PgRelay
from shared.producer.api import JobQueue
from tests.proc import wait_until
from tests.twohost import Proxy, host_url

psycopg = pytest.importorskip("psycopg")


def ready(fd: int, timeout: float) -> bool:
    return fd in select.select([fd], [], [], timeout)[0]


def test_the_relay_tells_controls_from_new_jobs(pg):
    config = pg.config()
    relay = engines.relay(config)
    q = JobQueue(config=config)
    try:
        (fd,) = wait_until(relay.fds, timeout=10, what="the relay's connection")
        assert relay.live
        assert relay.serve(set()) is True  # connected: whatever came before its LISTEN, look
        assert relay.serve(set()) is False
        with relay.watch.conn.lock:
            channels = relay.watch.conn.conn.execute(
                "SELECT pg_listening_channels() AS c"
            ).fetchall()
        assert q.store.control_channel in [r["c"] for r in channels]  # beside the jobs' own
        job = q.enqueue_many([("t", {})])[0]  # a new job's notification: heard, not a control
        assert ready(fd, 10.0)
        assert relay.serve({fd}) is False
        q.store.notify_controls("scale")
        assert ready(fd, 10.0)
        assert relay.serve({fd}) is True
        (claimed,) = q.store.claim("host:1:1", 1, time.time())
        assert claimed.id == job
        assert ops.cancel_jobs(q.store, [job], time.time()) == [job]  # asked to stop: notified
        assert ready(fd, 10.0) and relay.serve({fd}) is True
        assert relay.serve({fd}) is False  # (nothing more came)
    finally:
        q.close()
        relay.close()


def _relay_mark_seen(relay: Any) -> bool:
    """Whether another process sees this host's relay mark held (record locks are per process)."""
    code = (
        "import sys; from shared.engines.postgres.marks import RELAY, Marks; "
        "print(Marks(sys.argv[1]).elsewhere(RELAY))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, relay.marks.path], capture_output=True, text=True, timeout=30
    )
    return out.stdout.strip() == "True"


def test_a_relay_that_cannot_listen_lets_its_hosts_workers_wait_for_themselves(pg):
    """While the relay's server is out of reach, the host's idle leads must not wait on the
    relay's file (with their long backstop): the relay gives up its mark until it listens again."""
    proxy = Proxy("127.0.0.1", pg.database)
    relay = PgRelay(host_url(proxy, pg.database), pg.database, pg.schema, connect_timeout=2)
    try:
        (fd,) = wait_until(relay.fds, timeout=10, what="the relay's connection")
        assert _relay_mark_seen(relay)
        proxy.cut("refuse")  # (its session ends too)
        assert ready(fd, 10.0)
        relay.serve({fd})  # the lost connection: the relay connects again at its next fds()
        relay.next_try = 0.0
        assert relay.fds() == [] and not _relay_mark_seen(relay)
        proxy.heal()
        relay.next_try = 0.0
        assert wait_until(relay.fds, timeout=10, what="the relay's connection again")
        assert _relay_mark_seen(relay)
    finally:
        relay.close()
        proxy.close()
