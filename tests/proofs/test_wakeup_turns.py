"""One wake-up per job, not one per host (shared.engines.postgres.turns and .relay), with real
supervisors: three "hosts" on this machine (each its own TMPDIR, so its own idle lead and relay
file, as on three machines), direct and pooled with ``listen``. Workers poll once a minute (an
idle lead's backstop read, then; the workers queued for the lead read nothing), so a job that
starts within :data:`DEADLINE` (seconds, against milliseconds when woken) was started by a
wake-up.

- A trickle of jobs all start, and the jobs of one turn (their lane modulo the three listening
  relays) run on one host: the turn's host claims them, not whichever host won a race
  every host ran (before, every host's lead woke and claimed for every job).
- A host frozen while it holds its turns (SIGSTOP: its relay's session, and so its slot, stay
  on the server, as with a host cut off) costs its jobs the fallback: the next-ranked host takes
  each of them, none waits for the backstop.
"""

from __future__ import annotations

import json
import os
import signal
import zlib
from collections import Counter
from pathlib import Path

import psutil
import pytest

from shared import JobQueue
from shared.engines.postgres.turns import LANES
from shared.engines.postgres.wakeup import WATCHED_SLEEP
from shared.model.job import new_id
from shared.settings.config import load
from tests import pgbouncer, twohost
from tests.engines import postgres_url, require_postgres
from tests.proc import Running, wait_until, write_config

HOSTS = 3
BACKSTOP = 60  # the workers' poll_interval (a wake-up, or the lead's read then, starts a job)
DEADLINE = 0.8 * WATCHED_SLEEP  # a wake-up takes milliseconds; the backstop a minute


@pytest.fixture(params=["direct", "pooled"])
def fleet(request, tmp_path, monkeypatch):
    """Three supervisors of two workers on one new schema; yields (hosts, queue, log file)."""
    require_postgres()
    bouncer = None
    postgres: dict = {}
    url = postgres_url()
    if request.param == "pooled":
        if pgbouncer.binary() is None:
            if twohost.required():
                pytest.fail("JOBQ_REQUIRE_POSTGRES=1: pgbouncer is not installed")
            pytest.skip("pgbouncer is not installed (apt-get install -y pgbouncer)")
        bouncer = pgbouncer.PgBouncer(pool_size=6)
        url, postgres = bouncer.url(), {"listen": postgres_url()}
    schema = f"jobq_turns_{new_id()[:10]}"
    hosts = []
    try:
        for i in range(HOSTS):
            folder = tmp_path / f"h{i}"
            (folder / "tmp").mkdir(parents=True)
            cfg = write_config(
                folder,
                database=url,
                postgres={"schema": schema, **postgres},
                supervisor={"workers": 2},
                worker={"poll_interval": BACKSTOP},
            )
            monkeypatch.setenv("TMPDIR", str(folder / "tmp"))  # (the host's env: tests.proc.env)
            hosts.append(Running(cfg))
        monkeypatch.undo()
        q = JobQueue(config=load(str(hosts[0].config)))
        try:
            wait_until(lambda: all(len(h.workers()) == 2 for h in hosts), 60, "every worker up")
            wait_until(lambda: _relays(schema) == HOSTS, 30, "every host's relay listening")
            yield hosts, q, tmp_path / "runs.log", schema
        finally:
            q.close()
    finally:
        for h in hosts:
            h.close()
        if bouncer is not None:
            bouncer.close()
        with twohost.connect(postgres_url()) as c:
            c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _relays(schema: str) -> int:
    """The relays' slot locks held on the server (one per listening host)."""
    from shared.engines.postgres.turns import lock_key

    with twohost.connect(postgres_url()) as c:
        row = c.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 "
            "AND classid = %s::int4::oid AND granted",
            (lock_key(schema),),
        ).fetchone()
    return int(row[0])


def _host_of(hosts: list[Running], pid: int) -> int:
    """Which host (index) the worker ``pid`` belongs to."""
    for i, h in enumerate(hosts):
        if pid in h.workers():
            return i
    raise AssertionError(f"worker {pid} belongs to no host")


def _trickle(q: JobQueue, log: Path, n: int, each_turn: int = 0) -> dict[str, int]:
    """``n`` jobs one at a time, each enqueued once the last one ran, and more until every
    turn had ``each_turn`` of them; {job id: worker pid}."""
    ran: dict[str, int] = {}
    turns: Counter = Counter()
    while n > 0 or min(turns[t] for t in range(HOSTS)) < each_turn:
        n -= 1
        jid = q.enqueue("test:noop", {"log": str(log)})
        wait_until(
            lambda: q.get(jid).status == "completed",
            DEADLINE,
            f"job {jid} started by a wake-up (not the {BACKSTOP} s backstop)",
            interval=0.005,
        )
        turns[_turn(jid)] += 1
    for line in log.read_text().splitlines():
        row = json.loads(line)
        ran[row["job"]] = row["pid"]
    return ran


def _turn(job_id: str) -> int:
    """The rank of the host whose turn the job is (its lane's)."""
    return zlib.crc32(job_id.encode()) % LANES % HOSTS


def test_a_trickle_across_three_hosts_starts_every_job_on_its_turns_host(fleet):
    hosts, q, log, _ = fleet
    ran = _trickle(q, log, 36)
    assert len(ran) == 36
    by_turn: dict[int, Counter] = {t: Counter() for t in range(HOSTS)}
    for jid, pid in ran.items():
        by_turn[_turn(jid)][_host_of(hosts, pid)] += 1
    owners = {}
    for t, counts in by_turn.items():
        host, most = counts.most_common(1)[0] if counts else (None, 0)
        # the turn's host, bar a fallback that won on a loaded machine now and then
        assert most >= 0.6 * sum(counts.values()), by_turn
        owners[t] = host
    assert len(set(owners.values())) == HOSTS, by_turn  # each host has its own turns


def test_a_host_frozen_holding_its_turns_leaves_no_job_to_the_backstop(fleet):
    hosts, q, log, schema = fleet
    frozen = hosts[0]
    tree = [psutil.Process(frozen.pid), *psutil.Process(frozen.pid).children(recursive=True)]
    for p in tree:
        p.send_signal(signal.SIGSTOP)
    try:
        assert _relays(schema) == HOSTS  # its slot stays: the others still give it turns
        ran = _trickle(q, log, 0, each_turn=3)  # the frozen host's turns among them
    finally:
        for p in tree:
            try:
                p.send_signal(signal.SIGCONT)
            except psutil.NoSuchProcess:
                pass
    stopped = {p.pid for p in tree}
    assert len(ran) >= 3 * HOSTS and not stopped & set(ran.values())
