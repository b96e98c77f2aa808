"""jobq through a stock PgBouncer in transaction pooling (harness: tests/pgbouncer.py; hosts:
tests/twohost.py).

A transaction pooler hands one server session to many clients in turn, so a client that keeps
anything in its session (startup options, prepared statements, settings, LISTEN) breaks or,
worse, runs another client's statement. jobq's pooled mode keeps nothing there
(shared.engines.postgres.pooling). Proved here: stores through a pool smaller than their number
take turns on the server sessions without a collision and leave no setting behind; ``auto``
chooses pooled mode at the bouncer and direct mode at the server; and three hosts of eight
workers run a burst through at most ten server connections while workers and a whole host are
killed, with no job lost and none run twice at once.
"""

from __future__ import annotations

import os
import random
import signal
import threading

import pytest

from shared.engines import open_store
from shared.model.job import Finish, NewJob, new_id
from shared.runtime.clock import SystemClock
from shared.settings.config import Config, PostgresConfig
from tests import pgbouncer, twohost
from tests.engines import postgres_url, require_postgres
from tests.twohost import wait_for


def _missing() -> str | None:
    if pgbouncer.binary() is None:
        return "pgbouncer is not installed (apt-get install -y pgbouncer)"
    return None


@pytest.fixture
def bouncer():
    require_postgres()
    reason = _missing()
    if reason is not None:
        if twohost.required():
            pytest.fail(f"JOBQ_REQUIRE_POSTGRES=1: {reason}")
        pytest.skip(reason)
    b = pgbouncer.PgBouncer(pool_size=3)
    yield b
    b.close()


def _config(url: str, schema: str, mode: str = "auto") -> Config:
    return Config().replace(
        database=url, postgres=PostgresConfig(schema=schema, connect_timeout=5, mode=mode)
    )


def _drop(schema: str) -> None:
    with twohost.connect(postgres_url()) as c:
        c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _cycle(store, clock, n: int, owner: str) -> int:
    """Enqueue, claim and complete ``n`` jobs one at a time; how many completed."""
    done = 0
    for i in range(n):
        now = clock.now()
        store.enqueue([NewJob(new_id(), "t", f'{{"i": {i}}}', 0, now, None, None)], now)
        for job in store.claim(owner, 1, now, 1):
            ok, _ = store.finish_and_claim(
                [Finish("completed", job.id, job.attempts, None)], owner, 1, clock.now(), 0
            )
            done += sum(ok)
    return done


def _drain(store, clock) -> int:
    jobs = store.claim("h:0:0", 1, clock.now(), 50)
    ok, _ = store.finish_and_claim(
        [Finish("completed", j.id, j.attempts, None) for j in jobs], "h:0:0", 1, clock.now(), 0
    )
    return sum(ok)


def test_stores_sharing_a_small_pool_take_turns_without_a_collision(bouncer):
    """Eight stores, each a client of the bouncer, share its three server sessions: each runs
    many single statements, transactions and claims (where direct mode would prepare named and
    automatic statements and set session settings) and every one succeeds; afterwards a
    session through the bouncer shows the server's defaults, nothing of jobq's."""
    schema = f"jobq_pool_{new_id()[:10]}"
    clock = SystemClock()
    stores = [open_store(_config(bouncer.url(), schema)) for _ in range(8)]
    try:
        assert all(s.pooled for s in stores)
        errors: list[BaseException] = []
        counts: list[int] = []

        def run(i: int) -> None:
            try:
                counts.append(_cycle(stores[i], clock, 40, f"h:{i}:1"))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(stores))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert errors == []
        # (a claim may take another store's job, or find its own taken: the rest drains here)
        while got := _drain(stores[0], clock):
            counts.append(got)
        assert sum(counts) == 8 * 40
        assert bouncer.server_connections() <= 3
        with twohost.connect(bouncer.url()) as c:
            for name, default in (("enable_sort", "on"), ("plan_cache_mode", "auto")):
                assert c.execute(f"SHOW {name}").fetchone()[0] == default
            assert "jobq_pool" not in c.execute("SHOW search_path").fetchone()[0]
    finally:
        for s in stores:
            s.close()
        _drop(schema)


def test_auto_is_pooled_at_the_bouncer_and_direct_at_the_server(bouncer):
    schema = f"jobq_pool_{new_id()[:10]}"
    try:
        with open_store(_config(bouncer.url(), schema)) as via:
            assert via.pooled
        with open_store(_config(postgres_url(), schema)) as direct:
            assert not direct.pooled
        with open_store(_config(postgres_url(), schema, mode="pooled")) as forced:
            assert forced.pooled  # pooled mode works on a server too (nothing it needs is there)
            now = SystemClock().now()
            assert forced.enqueue([NewJob(new_id(), "t", "{}", 0, now, None, None)], now)
    finally:
        _drop(schema)


def test_a_transaction_carries_the_sessions_limits_through_the_bouncer(bouncer):
    """Pooled mode sets the server limits at the start of each of its transactions."""
    schema = f"jobq_pool_{new_id()[:10]}"
    try:
        with open_store(_config(bouncer.url(), schema), upkeep=True) as s:
            seen = s._tx(
                lambda c: c.execute(
                    "SELECT current_setting('lock_timeout') AS lt, "
                    "current_setting('idle_in_transaction_session_timeout') AS it"
                ).fetchone()
            )
            assert seen["lt"] != "0" and seen["it"] != "0"
    finally:
        _drop(schema)


def _ends(lines) -> int:
    return sum(1 for x in lines if x["ev"] == "end")


def _running_on(lines, hostname: str) -> bool:
    return any(
        r["host"] == hostname and r["end"] is None
        for rs in twohost.runs(lines).values()
        for r in rs
    )


# -- three hosts of eight workers through ten server connections ----------------------------------


@pytest.fixture
def hosts_bouncer(bouncer):
    reason = twohost.missing()
    if reason is not None:
        text, may_skip = reason
        if twohost.required() and not may_skip:
            pytest.fail(f"JOBQ_REQUIRE_POSTGRES=1: {text}")
        pytest.skip(text)
    twohost.remove_leftovers()
    bouncer.close()
    b = pgbouncer.PgBouncer(pool_size=10, idle_transaction_timeout=2)
    yield b
    b.close()


def test_three_hosts_of_eight_workers_through_ten_server_connections_lose_nothing(
    hosts_bouncer, tmp_path
):
    """The chaos proof through the pooler: 3 hosts x 8 workers, workers SIGKILLed during a
    burst, then a whole host; every job completes, none ran twice at once, and the bouncer
    never held more than its ten server connections."""
    cluster = twohost.Cluster(
        tmp_path, names=("a", "b", "c"), url=hosts_bouncer.url(), supervisor={"workers": 8}
    )
    peak = [0]
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], hosts_bouncer.server_connections())
            stop.wait(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    try:
        cluster.start(workers=8)
        watcher.start()
        ids = cluster.enqueue(400, sleep=0.02)
        rng = random.Random(43)
        for k in range(6):  # a worker of host a or b after every 30 jobs ended
            wait_for(lambda: _ends(cluster.lines()) >= 30 * (k + 1), 60, f"{30 * (k + 1)} ends")
            pids = list(cluster[rng.choice("ab")].workers().values())
            if pids:
                os.kill(rng.choice(pids), signal.SIGKILL)
        c = cluster["c"]
        wait_for(lambda: _running_on(cluster.lines(), c.hostname), 60, "host c running jobs")
        c.kill()
        cluster.wait_completed(ids, 120)
        lines = cluster.lines()
        assert twohost.overlaps(lines) == []
        runs = twohost.runs(lines)
        assert set(runs) == set(ids)
        cut = [j for j, r in runs.items() if any(x["end"] is None for x in r)]
        assert cut, "no run was cut short by the kills"
        assert all(runs[j][-1]["end"] is not None for j in cut)  # each re-run to its end
        print(f"{len(cut)} runs cut short and re-run; peak server connections {peak[0]}")
    finally:
        stop.set()
        watcher.join(5)
        for h in cluster.hosts.values():
            print(f"--- host {h.name} ---\n{h.output()[-3000:]}")
        cluster.close()
    assert 0 < peak[0] <= 10, peak[0]


def test_config_check_says_which_mode_a_url_gets(bouncer, tmp_path):
    import subprocess
    import sys

    from tests.proc import env, write_config

    def check(url: str, **postgres: str) -> str:
        path = write_config(tmp_path, database=url, postgres={"schema": "jobq_check", **postgres})
        done = subprocess.run(
            [sys.executable, "-m", "supervisor", "config", "check", "--config", str(path)],
            capture_output=True,
            text=True,
            env=env(),
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "pooled mode (auto" in check(bouncer.url())
    assert "direct mode (auto" in check(postgres_url())
    assert "pooled mode ([postgres] mode = 'pooled')" in check(postgres_url(), mode="pooled")


def test_idle_workers_hear_new_jobs_through_the_supervisors_listening_connection(
    bouncer, tmp_path, sup_factory
):
    """Pooled mode with ``listen``: the supervisor holds one direct connection that hears new
    jobs and wakes the host's idle lead. With ``poll_interval`` at 60 s only a wake-up can
    start a job within the test's deadlines; each job of a trickle runs soon after its enqueue,
    and the server sees one listening session from the host, not one per worker."""
    from shared import JobQueue
    from shared.settings.config import load
    from tests.proc import wait_until, write_config

    schema = f"jobq_pool_{new_id()[:10]}"
    path = write_config(
        tmp_path,
        database=bouncer.url(),
        postgres={"schema": schema, "listen": postgres_url()},
        supervisor={"workers": 4},
        worker={"poll_interval": 60},
    )
    running = sup_factory(path)
    q = JobQueue(config=load(str(path)))
    try:
        wait_until(lambda: len(running.workers()) == 4, timeout=30, what="4 workers")
        with twohost.connect(postgres_url()) as admin:
            from shared.engines.postgres.turns import lock_key

            def listeners() -> int:
                """Sessions that listen for the host: each holds its slot in the turns."""
                row = admin.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2"
                    " AND classid = %s::int4::oid AND granted",
                    (lock_key(schema),),
                ).fetchone()
                return row[0]

            wait_until(lambda: listeners() == 1, timeout=20, what="the relay's LISTEN")
            for _ in range(5):
                jid = q.enqueue("test:noop", {})
                wait_until(
                    lambda: q.get(jid).status == "completed",
                    timeout=10,
                    what=f"job {jid} woken by the relay",
                    interval=0.02,
                )
            assert listeners() == 1
    finally:
        q.close()
        running.close()
        _drop(schema)
