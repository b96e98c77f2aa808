"""What only the PostgreSQL engine does: transactional enqueue on the application's
connection, migrations raced by several processes, reconnection after the server drops the
connection, notifications, and the clear errors of a wrong URL, a refused connection and a
missing permission. The shared behaviour is the contract suite's (``test_store_contract``)."""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from shared.producer.api import JobQueue
from shared.settings.config import Config
from shared.engines import open_store
from shared.model.errors import StoreUnavailable
from tests.proc import env

psycopg = pytest.importorskip("psycopg")


def test_enqueue_on_the_applications_connection_commits_and_rolls_back_with_it(pg):
    q = JobQueue(config=pg.config())
    try:
        with psycopg.connect(pg.database) as app:  # not autocommit: the application's transaction
            kept = q.enqueue("t", {"n": 1}, conn=app)
            assert q.get(kept) is None  # not visible before the application commits
            app.commit()
            gone = q.enqueue("t", {"n": 2}, conn=app)
            app.rollback()
        assert q.get(kept).status == "pending" and q.get(gone) is None
    finally:
        q.close()


def test_an_enqueue_notifies_listeners_once_per_transaction(pg):
    with pg.open() as store, psycopg.connect(pg.database, autocommit=True) as listener:
        listener.execute(f'LISTEN "{store.channel}"')
        q = JobQueue(config=pg.config())
        q.enqueue_many([("t", {"n": i}) for i in range(5)])
        got = list(listener.notifies(timeout=2.0, stop_after=10))
        q.close()
    assert len(got) == 1 and got[0].channel == store.channel


def test_processes_racing_to_migrate_a_new_schema_migrate_it_once(pg):
    code = (
        "import sys; from shared.settings.config import Config; "
        "from shared.engines import open_store; "
        "import dataclasses; c = Config(database=sys.argv[1]); "
        "c = c.replace(postgres=dataclasses.replace(c.postgres, schema=sys.argv[2])); "
        "open_store(c).close()"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, pg.database, pg.schema],
            env=env(),
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    errors = [p.communicate(timeout=60)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, errors
    with pg.open() as store:
        assert store.counts() == {}


def test_a_dropped_connection_is_reported_then_made_again(pg):
    with pg.open() as store:
        q = JobQueue(config=pg.config())
        job_id = q.enqueue("t", {})
        pid = store.conn.info.backend_pid
        with psycopg.connect(pg.database, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(StoreUnavailable, match="database postgresql"):
            for _ in range(3):  # the first statement after the kill may still be answered
                store.get(job_id)
        assert store.get(job_id).status == "pending"  # a new connection
        assert store.conn.info.backend_pid != pid
        q.close()


def test_text_the_server_cannot_store_is_kept_visible(pg, tmp_path):
    from shared.model.job import Finish

    with pg.open() as store:
        q = JobQueue(config=pg.config())
        # jsonb holds neither a NUL nor a lone surrogate: each kept visible as its JSON escape
        job_id = q.enqueue("t", {"nul": "a\x00b", "\udc80": "\ud800"})
        [j] = store.claim("h:1:1", 1, 2e9, 1)
        assert j.payload == {"nul": "a\\u0000b", "\\udc80": "\\ud800"}
        assert store.finish_and_claim(
            [Finish("failed", job_id, 1, "bad \x00 byte")], "h:1:1", 1, 2e9, 0
        )[0] == [True]
        assert store.get(job_id).error == "bad \\x00 byte"
        other = q.enqueue("t", None)
        [j] = store.claim("h:1:1", 1, 2e9, 1)
        done = [
            Finish("completed", other, 1, '["a\\u0000b", "\\\\u0000"]', progress='{"n": "\\udc80"}')
        ]
        assert store.finish_and_claim(done, "h:1:1", 1, 2e9, 0)[0] == [True]
        got = store.get(other)
        assert (got.result, got.progress) == (["a\\u0000b", "\\u0000"], {"n": "\\udc80"})
        q.close()


def test_a_key_the_server_cannot_store_is_refused_naming_it(pg):
    q = JobQueue(config=pg.config())
    try:
        with pytest.raises(ValueError, match=r"idempotency key 'k\\x00' contains NUL"):
            q.enqueue("t", {}, key="k\x00")
        assert q.counts() == {}
    finally:
        q.close()


def _status(tmp_path: Path, database: str, **extra: str) -> subprocess.CompletedProcess:
    cfg = tmp_path / "jobq.toml"
    cfg.write_text("handlers = []\n")
    e = env()
    e["JOBQ_DATABASE"] = database
    e.update(extra)
    return subprocess.run(
        [sys.executable, "-m", "supervisor", "status", "--config", str(cfg)],
        capture_output=True,
        text=True,
        env=e,
        timeout=60,
        cwd=str(tmp_path),
    )


@pytest.mark.parametrize(
    "database, says",
    [
        ("postgresql://jobq:secret@127.0.0.1:1/jobq", "refused"),
        ("postgresql://jobq:secret@db.invalid/jobq", "db.invalid"),
        ("postgresql://jobq:secret@127.0.0.1:5432/jobq?sslmode=bogus", "sslmode"),
    ],
)
def test_a_wrong_url_or_refused_connection_is_one_line_and_exit_5(tmp_path, database, says):
    r = _status(tmp_path, database)
    assert r.returncode == 5, r.stderr
    lines = r.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and says in lines[0]
        and "secret" not in r.stderr
        and "Traceback" not in r.stderr
    ), r.stderr


def test_a_missing_permission_is_one_line_and_exit_5(pg, tmp_path):
    role = f"jobq_noperm_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg.database, autocommit=True) as admin:
        admin.execute(
            f"CREATE ROLE {role} LOGIN"
        )  # no CREATE on the database: cannot make the schema
    try:
        url = pg.database.replace("postgresql://", f"postgresql://{role}@", 1)
        r = _status(tmp_path, url)
        assert r.returncode == 5, r.stderr
        lines = r.stderr.strip().splitlines()
        assert (
            len(lines) == 1 and "permission denied" in lines[0] and "Traceback" not in r.stderr
        ), r.stderr
    finally:
        with psycopg.connect(pg.database, autocommit=True) as admin:
            admin.execute(f"DROP ROLE {role}")


def test_two_stores_claim_disjoint_jobs_at_once(pg):
    """SKIP LOCKED: concurrent claimers never get the same job."""
    q = JobQueue(config=pg.config())
    ids = set(q.enqueue_many([("t", {"n": i}) for i in range(400)]))
    q.close()

    def drain(n: int) -> list[str]:
        got = []
        with pg.open() as s:
            while batch := s.claim(f"h:{n}:1", n, 1e10, 7):
                got += [j.id for j in batch]
        return got

    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(drain, range(4)))
    claimed = [i for r in runs for i in r]
    assert len(claimed) == len(set(claimed)) == 400 and set(claimed) == ids


# -- server-side session limits; upkeep never waits on another session's locks --


def _lease(pg, seconds: float, database: str | None = None) -> Config:
    cfg = pg.config()
    return cfg.replace(
        database=database or cfg.database,
        worker=dataclasses.replace(cfg.worker, lease_timeout=seconds),
    )


def _show(store, name: str) -> str:
    return store.conn.execute(f"SHOW {name}").fetchone()[name]


def test_sessions_have_server_side_limits_from_the_lease_and_a_urls_options_win(pg):
    with open_store(_lease(pg, 4)) as worker, open_store(_lease(pg, 4), upkeep=True) as upkeep:
        assert _show(worker, "idle_in_transaction_session_timeout") == "2s"  # half the lease
        assert _show(worker, "lock_timeout") == "0" and _show(worker, "statement_timeout") == "0"
        assert _show(upkeep, "idle_in_transaction_session_timeout") == "2s"
        assert _show(upkeep, "lock_timeout") == "1s" and _show(upkeep, "statement_timeout") == "5s"
    sep = "&" if "?" in pg.database else "?"
    own = f"{pg.database}{sep}options=-c%20idle_in_transaction_session_timeout%3D7000%20-c%20lock_timeout%3D123"
    with open_store(_lease(pg, 4, own), upkeep=True) as store:
        assert _show(store, "idle_in_transaction_session_timeout") == "7s"
        assert _show(store, "lock_timeout") == "123ms" and _show(store, "statement_timeout") == "5s"
        assert _show(store, "search_path") == pg.schema and store.counts() == {}


def test_a_session_left_in_a_transaction_is_ended_and_release_owner_never_waits_for_it(pg):
    """A host cut off between a batch's completions and its next claim leaves its session idle
    in a transaction, holding row locks: the supervisor's ``release_owner`` skips those rows
    instead of waiting (the old ``FOR UPDATE`` waited as long as the session lived: hours), and
    the server ends the session within half the lease, so the next round releases the rest."""
    import threading
    import time
    from shared.runtime.clock import SystemClock
    from shared.model.job import NewJob, new_id
    from tests.proc import wait_until

    now = SystemClock().now()
    cfg = _lease(pg, 2)
    with open_store(cfg) as cut, open_store(cfg, upkeep=True) as upkeep:
        ids = cut.enqueue([NewJob(new_id(), "t", "{}", 0, now, None, None) for _ in range(2)], now)
        assert {j.id for j in cut.claim("h:1:1", 1, now, 2)} == set(ids)
        cut.conn.execute("BEGIN")
        cut.conn.execute(
            "UPDATE jobs SET status = 'completed', owner = NULL WHERE id = %s", (ids[0],)
        )
        backend = cut.conn.info.backend_pid  # now idle in transaction, holding ids[0]'s row lock
        got: list = []
        t = threading.Thread(
            target=lambda: got.append(
                upkeep.release_owner("h:1:1", "gone", now, max_attempts_for=lambda j: 3)
            ),
            daemon=True,
        )
        t0 = time.monotonic()
        t.start()
        t.join(10)
        assert got, "release_owner waited on the row another session locked"
        assert [r.id for r in got[0]] == [ids[1]]
        with psycopg.connect(pg.database, autocommit=True) as admin:

            def ended():
                return (
                    admin.execute(
                        "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (backend,)
                    ).fetchone()
                    is None
                )

            wait_until(ended, timeout=10, what="the server ending the idle-in-transaction session")
        assert time.monotonic() - t0 < 2, "not ended within the lease"
        assert [
            r.id for r in upkeep.release_owner("h:1:1", "gone", now, max_attempts_for=lambda j: 3)
        ] == [ids[0]]
        assert {upkeep.get(i).status for i in ids} == {"pending"}


def test_an_upkeep_call_the_server_never_answers_is_cut_and_fails_clearly(pg):
    """The supervisor's calls are bounded on the client side too: with the path to the server
    frozen (a proxy that passes nothing on and closes nothing: TCP keepalives are answered, so
    the call would wait forever), a call fails after statement_timeout + CALL_MARGIN with a
    clear error, and the next call, once the path is back, connects again."""
    import threading
    import time
    from shared.engines.postgres.connection import CALL_MARGIN
    from tests.twohost import Proxy, host_url

    proxy = Proxy("127.0.0.1", pg.database)
    try:
        with open_store(_lease(pg, 2, host_url(proxy)), upkeep=True) as store:
            assert store.counts() == {}
            proxy.cut("blackhole")
            got: list = []

            def call():
                try:
                    store.counts()
                except StoreUnavailable as exc:
                    got.append(exc)

            t0 = time.monotonic()
            t = threading.Thread(target=call, daemon=True)
            t.start()
            t.join(30)
            took = time.monotonic() - t0
            assert got, "the call was still waiting 30 s later"
            assert f"no answer within {5 + CALL_MARGIN:g} s" in str(got[0]) and "127.0.0.1" in str(
                got[0]
            )
            assert took >= 5, f"cut after {took:.2f} s, before the server's statement_timeout"
            proxy.heal()
            assert store.counts() == {}
    finally:
        proxy.close()


class _Recorded:
    """A psycopg connection whose statements are recorded."""

    def __init__(self, conn) -> None:
        self.conn, self.sql = conn, []

    def __getattr__(self, name):
        return getattr(self.conn, name)

    def execute(self, query, *args):
        self.sql.append(query)
        return self.conn.execute(query, *args)

    @contextlib.contextmanager
    def cursor(self, *args, **kwargs):
        with self.conn.cursor(*args, **kwargs) as cur:
            yield _RecordedCursor(cur, self.sql)


class _RecordedCursor:
    """A psycopg cursor whose statements go to ``sql``."""

    def __init__(self, cur, sql: list) -> None:
        self.cur, self.sql = cur, sql

    def execute(self, query, *args):
        self.sql.append(query)
        self.cur.execute(query, *args)
        return self.cur


def test_the_schema_version_is_one_statement_at_connect_and_safe_inside_a_transaction(pg):
    """Every connection (each worker's, at start-up) reads the schema's version in one
    round trip instead of a look-up and a read; a schema not made yet is version 0, and inside a
    transaction (the migration's) the look-up comes first, so no error ends the transaction."""
    from psycopg.rows import dict_row
    from shared.engines.postgres import schema
    from shared.engines.postgres.migration import _version

    pg.open().close()  # the schema, migrated
    missing = f"jobq_none_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg.database, autocommit=True, row_factory=dict_row) as conn:
        rec = _Recorded(conn)
        assert _version(rec, pg.schema) == schema.VERSION and len(rec.sql) == 1
        assert (
            _version(rec, missing) == 0 and conn.execute("SELECT 1 AS one").fetchone()["one"] == 1
        )
        with conn.transaction():
            rec.sql.clear()
            assert _version(rec, missing) == 0 and _version(rec, pg.schema) == schema.VERSION
            assert (
                "to_regclass" in rec.sql[0]
                and conn.execute("SELECT 1 AS one").fetchone()["one"] == 1
            )


def waiting_claim(database: str) -> float | None:
    """How long a claim has waited on a lock, in seconds (None: none waits). Read on a
    connection of its own: in a transaction the server's activity view keeps the snapshot it
    first gave."""
    with psycopg.connect(database, autocommit=True) as c:
        row = c.execute(
            "SELECT extract(epoch FROM clock_timestamp() - query_start)::float8 "
            "FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE '%attempts = attempts + 1%'"
        ).fetchone()
        return None if row is None else max(row[0], 1e-6)


def test_a_claim_that_waited_on_a_locked_table_runs_its_job_on_the_first_attempt(pg, tmp_path):
    """An operator holds ``LOCK TABLE`` on jobq's jobs longer than the fence (8 s of a 10 s
    lease) while a worker is replaced: the new worker's first claim, sent as it started, waits,
    and goes through on release. The worker renews the claimed lease at once and runs the job
    on its first attempt; it used to fence itself a few milliseconds later (its silence counted
    from the claim's send), the job re-queued with an attempt used."""
    import os
    import signal
    import threading
    from shared.settings.config import load
    from tests.proc import Running, log_events, wait_until, write_config

    cfg = write_config(
        tmp_path,
        database=pg.database,
        postgres={"schema": pg.schema},
        handlers=["faultjobs"],
        log_format="json",
        supervisor={"workers": 1},
        worker={"lease_timeout": 10, "heartbeat_interval": 0.5},
    )
    sup = Running(cfg)
    try:
        [first] = wait_until(
            lambda: [e["pid"] for e in log_events(sup, "worker.started")],
            timeout=60,
            what="the worker",
        )
        admin = psycopg.connect(pg.database, autocommit=True)
        with JobQueue(config=load(cfg)) as q, admin:
            with admin.transaction():
                admin.execute(f'LOCK TABLE "{pg.schema}".jobs IN ACCESS EXCLUSIVE MODE')
                jid = q.enqueue("fault:ok", {}, conn=admin)  # visible once the lock is let go
                os.kill(first, signal.SIGKILL)
                waited = wait_until(
                    lambda: waiting_claim(pg.database),
                    timeout=60,
                    what="the replacement's first claim waiting on the lock",
                )
                # the lock held past the fence, within the lease, counted from the claim's start
                # (its lease is stamped then; a loaded machine may see the wait late)
                threading.Event().wait(max(8.8 - waited, 0.0))
            row = wait_until(
                lambda: (lambda j: j if j.status == "completed" else None)(q.get(jid)),
                timeout=60,
                what="the job completed",
            )
        assert row.attempts == 1, (row, sup.output())
        assert not log_events(sup, "worker.fenced"), sup.output()
    finally:
        sup.close()
