"""The PostgreSQL idle wait (``shared.engines.postgres.wakeup``, issue 30): a notification that a
statement of another thread on the worker's shared connection (the heartbeat) reads off the
socket still ends the lead's wait at once, and the wait watches the socket of a connection made
again. (SQLite's wait watches the WAL file, with no socket to share: tests/behaviour's
test_idle_wakeup covers both engines end to end.)"""
from __future__ import annotations

import select
import threading
import time

import pytest

from shared.api import JobQueue

psycopg = pytest.importorskip("psycopg")


def ready(fd: int, timeout: float) -> bool:
    return fd in select.select([fd], [], [], timeout)[0]


def test_a_notification_another_thread_read_off_the_socket_ends_the_wait(pg):
    with pg.open() as store:
        wakeup = store.wakeup()
        q = JobQueue(config=pg.config())
        try:
            fd, timeout = wakeup.prepare(time.time(), 1.0)
            assert fd is not None and timeout >= 1.0 and not ready(fd, 0.0)
            q.enqueue("t", {})
            assert ready(store.conn.fileno(), 5.0)  # the notification is on the socket, unread
            # the heartbeat thread's statement reads it with its own answer
            beat = store.for_thread()
            t = threading.Thread(target=lambda: beat.heartbeat("someone", time.time()))
            t.start()
            t.join()
            assert not ready(store.conn.fileno(), 0.0)  # the socket has nothing left to say
            assert ready(fd, 1.0), "the lead's wait did not end: it would sleep on until the next beat or 5 s"
            assert wakeup.woke(True) is True
            fd, _ = wakeup.prepare(time.time(), 1.0)  # nothing more came: the next wait waits
            assert not ready(fd, 0.2) and wakeup.woke(False) is False
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
