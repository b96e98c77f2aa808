"""PostgreSQL's single enqueue as a prepared statement run outside psycopg's cursors
(``PgConnection._run_prepared``): what psycopg's own path did for it must still hold,
on a connection made again, after the server lost the statement, for text libpq would cut at a
NUL, and for notifications read off the socket while it ran."""

from __future__ import annotations

import pytest

from shared.producer.api import JobQueue
from shared.model.errors import StoreError

psycopg = pytest.importorskip("psycopg")


def test_the_statement_is_prepared_again_after_the_server_lost_it(pg):
    q = JobQueue(config=pg.config())
    try:
        first = q.enqueue("t", {"n": 1})
        q.store.conn.execute("DEALLOCATE ALL")  # what DISCARD ALL (a pooler's reset) does too
        second = q.enqueue("t", {"n": 2})
        assert [q.get(i).payload for i in (first, second)] == [{"n": 1}, {"n": 2}]
    finally:
        q.close()


def test_a_lost_connection_fails_one_enqueue_and_the_next_one_prepares_on_a_new_connection(pg):
    q = JobQueue(config=pg.config())
    try:
        q.enqueue("t", None)
        pid = q.store.conn.info.backend_pid
        with psycopg.connect(pg.database, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(StoreError, match="database postgresql"):
            for _ in range(3):  # the first call after the kill may still be answered
                q.enqueue("t", None)
        job_id = q.enqueue("t", {"after": "reconnect"})
        assert (
            q.get(job_id).payload == {"after": "reconnect"} and q.store.conn.info.backend_pid != pid
        )
    finally:
        q.close()


def test_a_limit_key_with_nul_is_refused_not_cut_short(pg):
    q = JobQueue(config=pg.config())
    try:
        q.enqueue("t", None)  # the type's later calls take the short path
        with pytest.raises(ValueError, match="limit_key 'a\\\\x00b' has a NUL"):
            q.enqueue("t", None, limit_key="a\x00b")
        assert q.counts() == {"pending": 1}
    finally:
        q.close()


def test_a_notification_read_during_the_enqueue_reaches_the_connections_handlers(pg):
    """A worker's connection LISTENs; its own statements may read a notification off the
    socket, which must then reach the wake-up's handler (else an idle lead sleeps on an empty
    socket: the race of tests/engines/test_pg_wakeup.py)."""
    from shared.engines.postgres.libpq import listen_all
    from shared.engines.postgres.turns import wake

    with pg.open() as store:
        got: list = []
        store.on_connect(
            lambda conn: (
                conn.add_notify_handler(got.append),
                conn.execute(listen_all(store.channel)),
            )
        )
        q = JobQueue(config=pg.config())
        q.store = store  # enqueue on the listening connection
        try:
            ids = [q.enqueue("t", None), q.enqueue("t", None)]  # (the short path: prepared)
            # its own notifications, at once: each on its job's lane, with its number
            assert [(n.channel, n.payload) for n in got] == [wake(store.channel, [i]) for i in ids]
            q.enqueue_many([("t", None), ("t", None)])  # a batch: the schema's channel, for all
            assert (got[-1].channel, got[-1].payload) == (store.channel, "")
        finally:
            q.store = None
            q.hubs.close()


def test_the_short_paths_errors_do_not_show_a_password_of_the_url(pg, caplog):
    """The errors' rule on the prepared path (its errors are made from libpq's results by
    jobq, not by psycopg's cursor): a server error and a lost connection name the database
    without the password planted in its URL."""
    planted = "PLANTED-s3cret-9f2"
    url = pg.database.replace("postgresql://", f"postgresql://root:{planted}@", 1)
    if "@" in pg.database.split("//", 1)[-1].split("/", 1)[0]:
        pytest.skip("the test server's URL already carries credentials")
    q = JobQueue(config=pg.config().replace(database=url))
    try:
        q.enqueue("t", None)  # the type's later calls take the short path
        with psycopg.connect(pg.database, autocommit=True) as admin:
            admin.execute(
                f'ALTER TABLE "{pg.schema}".jobs ADD CONSTRAINT no_boom CHECK (payload <> \'"boom"\')'
            )
        texts = []
        with pytest.raises(StoreError) as refused:
            q.enqueue("t", "boom")
        texts.append(str(refused.value))
        pid = q.store.conn.info.backend_pid
        with psycopg.connect(pg.database, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(StoreError) as lost:
            for _ in range(3):  # the first call after the kill may still be answered
                q.enqueue("t", None)
        texts.append(str(lost.value))
        assert "no_boom" in texts[0] and "root:***@" in texts[1]
        assert not [t for t in (*texts, caplog.text) if planted in t]
    finally:
        q.close()
