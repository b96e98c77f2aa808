"""The PostgreSQL idle wait (``shared.engines.postgres.wakeup``): a notification that a
statement of another thread on the worker's shared connection (the heartbeat) reads off the
socket still ends the lead's wait at once, the wait watches the socket of a connection made
again, and only the lead's connection listens (a follower's does not: every NOTIFY woke every
idle worker's backend). (SQLite's wait watches the WAL file, with no socket to share: tests/behaviour's
test_idle_wakeup covers both engines end to end.)"""

from __future__ import annotations

import select
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

import pytest

from shared.producer.api import JobQueue
from shared.engines.postgres.turns import channels

psycopg = pytest.importorskip("psycopg")


def ready(fd: int, timeout: float) -> bool:
    return fd in select.select([fd], [], [], timeout)[0]


def waiting(wakeup: Any) -> tuple[int, float]:
    """``prepare`` as the worker loop runs it until it waits on a descriptor (a worker that has
    just become the lead LISTENs, then claims once before it waits: here, nothing)."""
    for _ in range(5):
        fd, timeout = wakeup.prepare(time.time(), 1.0)
        if fd is not None:
            return fd, timeout
        wakeup.woke(False)
    raise AssertionError("the wake-up never waited on a descriptor")


def listening(store: Any) -> list[str]:
    return [
        r["pg_listening_channels"] for r in store.conn.execute("SELECT pg_listening_channels()")
    ]


@contextmanager
def lead_held_elsewhere(wakeup: Any) -> Iterator[None]:
    """Another process holds this pool's lead lock (record locks exclude other processes only)."""
    code = (
        "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR); "
        "fcntl.lockf(fd, fcntl.LOCK_EX, 1, int(sys.argv[2])); print('held', flush=True); sys.stdin.read()"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, wakeup.lead.path, str(wakeup.lead.slot)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "held"
        yield
    finally:
        child.stdin.close()  # the child exits: its lock goes with it
        child.wait(timeout=10)


def test_only_the_lead_listens(pg):
    with pg.open() as store:
        wakeup = store.wakeup()
        try:
            assert wakeup.lead.available
            assert listening(store) == []  # a worker that never led does not listen
            waiting(wakeup)
            assert listening(store) == channels(store.channel)
            wakeup.claimed()  # it took a job: the lead goes on; it listens on while busy (no statement)
            with lead_held_elsewhere(wakeup):
                fd, _ = wakeup.prepare(time.time(), 1.0)  # idle again, a follower now
                assert fd == wakeup.lead.fileno() and listening(store) == []
            assert ready(fd, 10.0), "the lead was not handed on"
            assert wakeup.woke(True) is True and listening(store) == channels(store.channel)
        finally:
            wakeup.close()


def test_a_new_lead_finds_what_came_before_its_listen(pg):
    with pg.open() as store:
        wakeup = store.wakeup()
        q = JobQueue(config=pg.config())
        try:
            fd, _ = waiting(wakeup)  # the lead, listening
            assert not ready(fd, 0.0)
            wakeup.claimed()
            with lead_held_elsewhere(wakeup):
                assert (
                    wakeup.prepare(time.time(), 1.0)[0] == wakeup.lead.fileno()
                )  # a follower: UNLISTEN
                q.enqueue("t", {})  # nobody listens: no notification reaches this worker
            assert ready(wakeup.lead.fileno(), 10.0)  # the lead is this worker's again
            fd, timeout = wakeup.prepare(
                time.time() - 1.0, 1.0
            )  # (after a follower's timeout): LISTEN again
            assert (fd, timeout) == (None, 0.0) and wakeup.woke(
                False
            ) is True  # claim now, whatever the time
        finally:
            q.close()
            wakeup.close()


def test_a_notification_another_thread_read_off_the_socket_ends_the_wait(pg):
    with pg.open() as store:
        wakeup = store.wakeup()
        q = JobQueue(config=pg.config())
        try:
            fd, timeout = waiting(wakeup)
            assert fd is not None and timeout >= 1.0 and not ready(fd, 0.0)
            q.enqueue("t", {})
            assert ready(store.conn.fileno(), 5.0)  # the notification is on the socket, unread
            # the heartbeat thread's statement reads it with its own answer
            beat = store.for_thread()
            t = threading.Thread(target=lambda: beat.heartbeat("someone", time.time()))
            t.start()
            t.join()
            assert not ready(store.conn.fileno(), 0.0)  # the socket has nothing left to say
            assert ready(fd, 1.0), (
                "the lead's wait did not end: it would sleep on until the next beat or 5 s"
            )
            assert wakeup.woke(True) is True
            fd, _ = waiting(wakeup)  # nothing more came: the next wait waits
            assert not ready(fd, 0.2) and wakeup.woke(False) is None  # (the next prepare reads)
        finally:
            q.close()
            wakeup.close()


def test_the_wait_watches_the_socket_of_a_connection_made_again(pg):
    with pg.open() as store:
        wakeup = store.wakeup()
        q = JobQueue(config=pg.config())
        try:
            with psycopg.connect(pg.database, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (store.conn.info.backend_pid,))
            for _ in range(20):  # the kill is seen by a statement, or by a wait that woke on it
                fd, timeout = wakeup.prepare(time.time(), 1.0)
                if fd is not None and not ready(fd, 0.05):
                    break
                wakeup.woke(fd is not None)
            else:
                pytest.fail("the wait never settled on a live connection")
            q.enqueue("t", {})
            assert ready(fd, 5.0) and wakeup.woke(True) is True
        finally:
            q.close()
            wakeup.close()


def test_a_connection_made_again_listens_at_once_where_every_worker_leads(pg):
    with pg.open() as store:
        wakeup = store.wakeup()
        try:
            wakeup.lead.close()  # as where locks are refused: every idle worker leads
            waiting(wakeup)
            with psycopg.connect(pg.database, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (store.conn.info.backend_pid,))
            for _ in range(3):  # the heartbeat thread's statement meets the loss, the next connects
                try:
                    store.for_thread().heartbeat("someone", time.time())
                    break
                except Exception:  # noqa: BLE001 - the one that saw the connection lost
                    pass
            # the main thread's wait (on the old socket) ends, and the new connection listens
            assert wakeup.notified and listening(store) == channels(store.channel)
        finally:
            wakeup.close()
