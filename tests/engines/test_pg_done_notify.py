"""Ended jobs are notified on the done channel only while someone waits there
(``shared.engines.postgres.connection.WAITERS``): every NOTIFY costs a transaction on every
listening backend of the database (each host's relay), so a completion nobody waits for sends
none; a watch (``.donewatch``) says it waits with a shared lock after its LISTEN, and one that
comes while an ending statement's transaction is open waits for its commit (then reads)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from shared.engines.postgres.connection import SPREAD, WAITERS, done_channel, notify_done
from shared.engines.postgres.donewatch import PgDoneWatch
from shared.model.job import Finish, NewJob, new_id
from tests.proc import wait_until

psycopg = pytest.importorskip("psycopg")

OWNER, PID = "h:1:1", 1


def _running(store: Any, n: int) -> list[Any]:
    now = time.time()
    store.enqueue([NewJob(new_id(), "t", "{}", 0, now, None, None) for _ in range(n)], now)
    return store.claim(OWNER, PID, time.time(), n)


def _end_each_way(store: Any) -> None:
    """A job ended by each statement that ends jobs: one outcome (failed), a batch's
    completions alone, and completions with the next claim."""
    a, b, c = _running(store, 3)
    assert store.finish(Finish("failed", a.id, 1, '"x"'), OWNER, time.time())
    assert store.finish_and_claim([Finish("completed", b.id, 1, "1")], OWNER, PID, time.time(), 0)[
        0
    ] == [True]
    assert store.finish_and_claim([Finish("completed", c.id, 1, "1")], OWNER, PID, time.time(), 1)[
        0
    ] == [True]


def _heard(conn: Any, timeout: float) -> int:
    return sum(1 for _ in conn.notifies(timeout=timeout, stop_after=3))


def _probe(pg: Any) -> Any:
    """A plain LISTEN on the done channel that does not say it waits: hears what is sent."""
    conn = psycopg.connect(pg.database, autocommit=True)
    conn.execute(f'LISTEN "{done_channel(pg.schema)}"')
    return conn


def test_jobs_ended_while_nobody_waits_send_no_notification(pg):
    with pg.open() as store, _probe(pg) as probe:
        _end_each_way(store)
        store.conn.execute("SELECT pg_notify(%s, 'marker')", (done_channel(pg.schema),))
        got = [n.payload for n in probe.notifies(timeout=5, stop_after=1)]
        assert got == ["marker"]  # (in order: nothing came before the marker)


def test_jobs_ended_while_a_watch_waits_are_notified(pg):
    with pg.open() as store, _probe(pg) as probe:
        watch = PgDoneWatch(pg.database, schema=pg.schema, connect_timeout=5, mode="direct")
        try:
            _end_each_way(store)
            assert _heard(probe, 5) == 3
            assert watch.drain() or wait_until(watch.drain, timeout=5)
        finally:
            watch.close()
        _end_each_way(store)  # the watch is gone: silent again
        assert _heard(probe, 0.3) == 0


def test_a_watch_that_comes_during_an_ending_transaction_waits_for_its_commit(pg):
    ending = psycopg.connect(pg.database, autocommit=True)
    ending.execute("BEGIN")
    fragment = notify_done("%s")
    ending.execute(f"SELECT 1 FROM {fragment}", (done_channel(pg.schema),) * 2)
    made: list[Any] = []
    opener = threading.Thread(
        target=lambda: made.append(
            PgDoneWatch(pg.database, schema=pg.schema, connect_timeout=5, mode="direct")
        )
    )
    opener.start()
    try:
        with psycopg.connect(pg.database, autocommit=True) as look:
            q = "SELECT count(*) FROM pg_locks WHERE classid = %s::int4::oid AND NOT granted"
            assert wait_until(lambda: look.execute(q, (WAITERS,)).fetchone()[0] == 1, timeout=5)
        assert opener.is_alive() and not made  # it waits for the ending transaction
        ending.execute("COMMIT")
        opener.join(10)
        assert made  # and goes on once it committed (what it reads next sees the jobs ended)
    finally:
        ending.close()
        opener.join(10)
        for w in made:
            w.close()


def test_concurrent_ending_transactions_of_other_backends_do_not_notify_each_other(pg):
    """Two ending statements' transactions open at once, nobody waiting: neither notifies (a
    burst's completions would otherwise notify, and queue for the commit of each other's
    notification)."""
    conns = [psycopg.connect(pg.database, autocommit=True)]
    while len(conns) < 8 and len({c.info.backend_pid % SPREAD for c in conns}) < 2:
        conns.append(psycopg.connect(pg.database, autocommit=True))
    one = conns[0]
    two = next(c for c in conns if c.info.backend_pid % SPREAD != one.info.backend_pid % SPREAD)
    try:
        with _probe(pg) as probe:
            fragment, channel = notify_done("%s"), done_channel(pg.schema)
            for c in (one, two):
                c.execute("BEGIN")
                c.execute(f"SELECT 1 FROM {fragment}", (channel, channel))
            for c in (one, two):
                c.execute("COMMIT")
            one.execute("SELECT pg_notify(%s, 'marker')", (channel,))
            assert [n.payload for n in probe.notifies(timeout=5, stop_after=1)] == ["marker"]
    finally:
        for c in conns:
            c.close()
