"""Many hosts on one queue, the engine-independent part: host identity
in owner tokens, leases judged on the engine's clock, other hosts' owners judged by their lease
alone (never signalled), and self-fencing (a worker that cannot renew its lease exits FENCED
before the lease can expire). Unit tests with a FakeClock; real supervisors and workers on a
SQLite file where it matters."""

from __future__ import annotations

import dataclasses
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from hypothesis import given, settings, strategies as st

from shared import JobQueue
from shared.runtime import fencing
from shared.runtime.clock import FakeClock, iso, parse_iso
from shared.settings.config import Config, ConfigError, TypeConfig, WorkerConfig, load
from shared.engines.sqlite.store import SqliteStore
from shared.model.errors import StoreError
from shared.model.exitcodes import ExitCode
from shared.execution.handlers import Registry
from shared.model.job import Job, NewJob, RunningGroup, new_id
from shared.execution.policy import JobPolicy
from shared.runtime.processes import (
    create_time_ms,
    host_id,
    owner_token,
    parse_token,
    token_alive,
    token_host,
)
from supervisor import maintenance
from tests.proc import events, job_row, log_events, pid_gone, wait_until, worker_rows, write_config
from worker.fence import Fence

FOREIGN = "otherhost/0123456789ab/4026531999"  # a host_id that is not ours


def foreign_token(pid: int = 4242, created: int = 1) -> str:
    return f"{FOREIGN}:{pid}:{created}"


# -- host identity and tokens ---------------------------------------------------------------------


def test_host_id_names_the_host_boot_and_pid_namespace():
    here = host_id()
    assert here == host_id() and ":" not in here
    parts = here.split("/")
    assert parts[0]
    if os.path.exists("/proc/sys/kernel/random/boot_id"):
        assert len(parts) == 3 and len(parts[1]) == 12 and parts[2].isdigit()
        assert parts[2] in os.readlink("/proc/self/ns/pid")


def test_another_pid_namespace_is_another_host():
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1)")
    code = "from shared.runtime.processes import host_id; print(host_id())"
    r = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    if r.returncode != 0:
        pytest.skip(f"cannot unshare a pid namespace here: {r.stderr.strip()}")
    theirs = r.stdout.strip()
    assert theirs != host_id() and theirs.split("/")[:2] == host_id().split("/")[:2]


def test_tokens_carry_the_host_and_parse_back():
    token = owner_token(os.getpid())
    host, pid, created = parse_token(token)
    assert (host, pid) == (host_id(), os.getpid()) and created == create_time_ms(os.getpid())
    assert token_host(token) == host_id() and token_host("junk") is None
    assert token_alive(token)
    assert not token_alive(f"{host_id()}:999999:1")  # this host: by pid and create time
    assert token_alive(foreign_token(999999))  # another host: alive, its lease decides
    assert token_alive(f"{host_id()}:999999:1", here=FOREIGN)  # ``here`` is whose view it is


# -- lease ages on SQLite ------------------------------------------------------------------------


def _store(tmp_path: Path) -> SqliteStore:
    return SqliteStore(str(tmp_path / "q.db"))


def test_sqlite_lease_and_process_ages_are_now_minus_heartbeat(tmp_path):
    clock = FakeClock()
    with _store(tmp_path) as store:
        store.enqueue(
            [NewJob(new_id(), "t", "{}", 0, clock.now(), None, None) for _ in range(2)], clock.now()
        )
        store.register_process("w", "worker", 1, "h", clock.now())
        (a,) = store.claim("w", 1, clock.now(), 1)
        clock.advance(4)
        (b,) = store.claim("w", 1, clock.now(), 1)
        clock.advance(3)
        assert store.lease_ages(clock.now()) == {
            a.id: pytest.approx(7, abs=1e-3),
            b.id: pytest.approx(3, abs=1e-3),
        }
        assert store.process_ages(clock.now()) == {"w": pytest.approx(7, abs=1e-3)}
        store.heartbeat("w", clock.now())
        assert store.lease_ages(clock.now() + 1) == {
            a.id: pytest.approx(1, abs=1e-3),
            b.id: pytest.approx(1, abs=1e-3),
        }
        [g] = store.running_groups(clock.now() + 1)
        assert (g.owner, g.jobs, g.first_start, g.oldest_lease) == (
            "w",
            2,
            a.started_at,
            pytest.approx(1, abs=1e-3),
        )
        store.conn.execute("UPDATE jobs SET heartbeat_at = 'garbage' WHERE id = ?", (a.id,))
        assert set(store.lease_ages(clock.now())) == {b.id}  # an unreadable lease is left out
        assert store.running_groups(clock.now())[0].oldest_lease == float(
            "inf"
        )  # ... but looked at


def test_postgres_ages_are_on_the_servers_clock_whatever_the_callers_says(tmp_path):
    """The caller's clock is a year off: the ages still come out small, from the server's
    ``statement_timestamp()``; a missing lease is left out rather than failing the read."""
    from tests.engines import PostgresEngine

    engine = PostgresEngine(tmp_path)
    try:
        with engine.open() as store:
            far = time.time() - 365 * 86400
            store.enqueue([NewJob(new_id(), "t", "{}", 0, far, None, None) for _ in range(2)], far)
            store.register_process("w", "worker", 1, "h", far)
            a, b = store.claim("w", 1, far, 2)
            for now in (far, far + 2 * 365 * 86400):
                ages = store.lease_ages(now)
                assert set(ages) == {a.id, b.id} and all(0 <= v < 60 for v in ages.values())
                assert 0 <= store.process_ages(now)["w"] < 60
            [g] = store.running_groups(far)
            assert g.jobs == 2 and 0 <= g.oldest_lease < 60
            # the lease column is a timestamptz: nothing unreadable gets in; a missing lease
            # (a row written around jobq) is what is left out
            with pytest.raises(Exception, match="timestamp with time zone"):
                store.conn.execute(
                    "UPDATE jobs SET heartbeat_at = 'garbage' WHERE id = %s", (a.id,)
                )
            store.conn.execute("UPDATE jobs SET heartbeat_at = NULL WHERE id = %s", (a.id,))
            assert set(store.lease_ages(far)) == {b.id}
    finally:
        engine.drop()


# -- judging running jobs ------------------------------------------------------------------------


def _policy(lease: float = 10.0, job_timeout: float = 60.0) -> JobPolicy:
    cfg = Config(
        worker=WorkerConfig(lease_timeout=lease, heartbeat_interval=0.5, job_timeout=job_timeout)
    )
    return JobPolicy(cfg, Registry())


def _running(owner: str, started: float, beat: float) -> Job:
    return Job(
        id=new_id(),
        type="t",
        status="running",
        payload=None,
        result=None,
        error=None,
        attempts=1,
        max_attempts=None,
        priority=0,
        run_at=iso(started),
        started_at=iso(started),
        completed_at=None,
        created_at=iso(started),
        updated_at=iso(started),
        key=None,
        owner=owner,
        owner_pid=4242,
        heartbeat_at=iso(beat),
    )


def test_judge_running_uses_the_engines_ages_not_heartbeat_at():
    clock = FakeClock()
    here = host_id()
    mine = _running(
        f"{here}:1:1", clock.now(), clock.now() - 1000
    )  # heartbeat_at says: long silent
    verdicts = maintenance.judge_running([mine], {mine.id: 2.0}, _policy(), clock.now(), here)
    assert verdicts == []  # the engine says 2 s: fresh
    verdicts = maintenance.judge_running([mine], {mine.id: 10.5}, _policy(), clock.now(), here)
    assert [v.action for v in verdicts] == ["lease"] and "silent for 10.5 s" in verdicts[0].reason
    assert (
        maintenance.judge_running([mine], {}, _policy(), clock.now(), here) == []
    )  # no age: no verdict


def test_only_the_owners_host_polices_hard_timeouts():
    clock = FakeClock()
    here = host_id()
    local = _running(f"{here}:1:1", clock.now() - 100, clock.now())
    foreign = _running(foreign_token(), clock.now() - 100, clock.now())
    ages = {local.id: 1.0, foreign.id: 1.0}
    verdicts = maintenance.judge_running(
        [local, foreign], ages, _policy(job_timeout=60), clock.now(), here
    )
    assert [(v.job.id, v.action) for v in verdicts] == [(local.id, "timeout")]
    # past its timeout and its lease: the foreign job still gets its lease verdict (it is rescued)
    ages[foreign.id] = 11.0
    verdicts = maintenance.judge_running(
        [local, foreign], ages, _policy(job_timeout=60), clock.now(), here
    )
    assert [(v.job.id, v.action) for v in verdicts] == [
        (local.id, "timeout"),
        (foreign.id, "lease"),
    ]


def test_an_owner_is_expired_only_when_every_lease_it_holds_is():
    clock = FakeClock()
    a1, a2 = _running("a", clock.now(), clock.now()), _running("a", clock.now(), clock.now())
    b = _running("b", clock.now(), clock.now())
    ages = {a1.id: 11.0, a2.id: 1.0, b.id: 12.0}
    assert maintenance.expired_owners([a1, a2, b], ages, 10.0) == {"b"}


def _groups(jobs: list[Job], ages: dict[str, float]) -> list[RunningGroup]:
    """What ``UpkeepStore.running_groups`` answers for these running jobs and lease ages."""
    by: dict = {}
    for j in jobs:
        by.setdefault((j.owner, j.type), []).append(j)
    return [
        RunningGroup(
            o,
            t,
            len(js),
            min(j.started_at for j in js),
            max((ages[j.id] for j in js if j.id in ages), default=None),
            sum(j.cancel_requested_at is not None for j in js),
        )
        for (o, t), js in by.items()
    ]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["mine", "stray", "foreign", None]),
            st.sampled_from(["t", "u"]),
            st.floats(0, 200),
            st.floats(0, 20),
            st.booleans(),
        ),
        max_size=8,
    )
)
def test_the_supervisor_skips_reading_running_jobs_only_when_it_would_act_on_none(specs):
    """``worth_a_look`` over the groups is true whenever the full read would lead to a verdict
    on one of our children's jobs (a timeout, a cancel, an expired lease), a job of another
    process of this host (``recover_foreign``: gone or silent) or of another host's expired owner."""
    here, now = host_id(), FakeClock().now()
    owners = {"mine": f"{here}:1:1", "stray": f"{here}:2:1", "foreign": foreign_token(), None: None}
    policy = JobPolicy(
        Config(
            worker=WorkerConfig(lease_timeout=10, heartbeat_interval=0.5, job_timeout=60),
            types={"u": TypeConfig(timeout=5)},
        ),
        Registry(),
    )
    jobs, ages = [], {}
    for who, kind, started_ago, lease_age, cancel in specs:
        j = dataclasses.replace(
            _running(owners[who], now - started_ago, now),
            type=kind,
            cancel_requested_at=iso(now - 100) if cancel else None,
        )
        jobs.append(j)
        ages[j.id] = lease_age
    mine = {owners["mine"]}
    acts = [v for v in maintenance.judge_running(jobs, ages, policy, now, here) if v.owner in mine]
    expired = maintenance.expired_owners(jobs, ages, 10) - mine
    rescue = {j.owner for j in jobs if j.owner == owners["stray"] or j.owner in expired}
    if acts or rescue:
        assert maintenance.worth_a_look(_groups(jobs, ages), mine, policy, now, here)
    if all(
        who in ("mine", "foreign")
        and not cancel
        and lease_age <= 10
        and started_ago <= (5 if kind == "u" else 60)
        for who, kind, started_ago, lease_age, cancel in specs
    ):
        assert not maintenance.worth_a_look(_groups(jobs, ages), mine, policy, now, here)


# -- recovering other hosts' jobs: by lease, released directly, never killed -------------------


class _Recorder:
    """An UpkeepStore stand-in that records release_owner calls."""

    def __init__(self) -> None:
        self.released: list[str] = []

    def release_owner(self, owner, reason, now, **kw):
        self.released.append(owner)
        return []


def test_foreign_owner_with_an_expired_lease_is_released_without_a_kill(monkeypatch):
    """The foreign token's pid is a live process of this host (pids of other hosts mean nothing
    here): it must be neither signalled nor waited for."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        owner = f"{FOREIGN}:{sleeper.pid}:{create_time_ms(sleeper.pid)}"
        monkeypatch.setattr(
            maintenance, "_kill_and_wait", lambda o, timeout=5.0: pytest.fail(f"killed {o}")
        )
        clock = FakeClock()
        jobs = [_running(owner, clock.now(), clock.now())]
        store = _Recorder()
        assert (
            maintenance.recover_foreign(
                store, jobs, set(), _policy(), clock.now(), set(), host_id()
            )
            == 0
        )
        assert store.released == []  # lease not expired: left alone
        maintenance.recover_foreign(store, jobs, set(), _policy(), clock.now(), {owner}, host_id())
        assert store.released == [owner]  # expired: released directly
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_prune_processes_judges_other_hosts_rows_by_age(tmp_path):
    clock = FakeClock()
    here = host_id()
    with _store(tmp_path) as store:
        store.register_process(foreign_token(1), "worker", 1, FOREIGN, clock.now() - 100)
        store.register_process(foreign_token(2), "worker", 2, FOREIGN, clock.now())
        store.register_process(f"{here}:999999:1", "worker", 999999, here, clock.now())
        store.register_process(
            owner_token(os.getpid()), "supervisor", os.getpid(), here, clock.now() - 100
        )
        maintenance.prune_processes(store, clock.now(), 45.0, here)
        assert sorted(r["id"] for r in store.processes()) == sorted(
            [foreign_token(2), owner_token(os.getpid())]
        )


# -- fencing: the margin, the config check, the fence's decision ---------------------------------


def test_the_fencing_margin():
    assert fencing.margin(2, 30) == 6 and fencing.fence_after(2, 30) == 24  # 20% of the lease
    assert fencing.margin(4, 30) == 8  # 2 beats
    assert fencing.margin(10, 30) == 15  # at most half
    assert fencing.check(2, 30) is None and fencing.check(7.5, 30) is None
    assert fencing.check(8, 30) is not None


def test_config_refuses_beats_that_would_fence(tmp_path):
    path = write_config(tmp_path, worker={"heartbeat_interval": 10, "lease_timeout": 30})
    with pytest.raises(ConfigError) as e:
        load(str(path))
    msg = str(e.value)
    assert "worker.heartbeat_interval" in msg and "worker.lease_timeout" in msg and "fencing" in msg
    assert load(str(write_config(tmp_path, worker={"heartbeat_interval": 2, "lease_timeout": 8})))


def test_the_fence_fires_only_while_holding_jobs_past_lease_minus_margin():
    clock = FakeClock()
    cfg = Config(worker=WorkerConfig(lease_timeout=10.0, heartbeat_interval=0.5))  # margin 2 s
    fence = Fence(cfg, "w", clock, on_fenced=lambda: None)
    clock.advance(100)
    assert (
        fence.overdue(clock.monotonic()) is None and fence.wait_time(clock.monotonic()) is None
    )  # idle
    fence.renewed(clock.monotonic())
    fence.hold(True)
    clock.advance(7.9)
    assert fence.overdue(clock.monotonic()) is None
    assert fence.wait_time(clock.monotonic()) == pytest.approx(0.101, abs=1e-6)
    fence.renewed(clock.monotonic() - 9)  # an older renewal never moves the count back
    clock.advance(0.2)
    assert fence.overdue(clock.monotonic()) == pytest.approx(8.1)
    fence.renewed(clock.monotonic())
    assert fence.overdue(clock.monotonic()) is None


class _BeatStore:
    """A worker's store whose heartbeat renews ``renewed`` jobs (or fails), and says when."""

    def __init__(self, clock: FakeClock, renewed: int | None) -> None:
        self.clock, self.renewed, self.beats = clock, renewed, []

    def heartbeat(self, owner, now, holding=None) -> int:
        self.beats.append((self.clock.monotonic(), holding))
        if self.renewed is None:
            raise StoreError("database q.db: terminating connection")
        return self.renewed


def test_a_claim_that_waited_on_a_lock_is_renewed_at_once_and_the_fence_counts_from_that():
    """A claim sent when the worker started and answered 9 s later (a table locked meanwhile)
    may have stamped its leases at its start (PostgreSQL stamps with the statement's start):
    counting from its send fenced the worker that had just claimed; counting from its answer
    would trust a stale lease. A beat
    renews every running job at once and the fence counts from the beat's send; a beat that
    fails, or renews fewer than the worker holds, leaves the count at the claim's send."""
    from worker.heartbeat import after_claim

    cfg = Config(worker=WorkerConfig(lease_timeout=10.0, heartbeat_interval=0.5))  # fence at 8 s
    clock = FakeClock()
    clock.advance(100)
    quick = _BeatStore(clock, 1)
    sent = clock.monotonic() - 0.1
    assert after_claim(quick, "w", clock, sent, 1, 0.5) == sent
    assert quick.beats == []  # a claim answered at once: nothing more
    fence = Fence(cfg, "w", clock, on_fenced=lambda: None)  # spawned; the claim is sent at once
    sent = clock.monotonic()
    clock.advance(9)  # the claim's answer
    store = _BeatStore(clock, 2)
    at = after_claim(store, "w", clock, sent, 2, 0.5)
    assert store.beats == [(clock.monotonic(), None)] and at == clock.monotonic()  # every job
    fence.renewed(at)
    fence.hold(True)
    assert fence.overdue(clock.monotonic()) is None  # it runs the jobs it claimed
    clock.advance(8.1)
    assert fence.overdue(clock.monotonic()) == pytest.approx(8.1)  # then beats are needed
    for renewed in (1, None):  # a job of the claim taken back meanwhile; the beat failed
        fence = Fence(cfg, "w", clock, on_fenced=lambda: None)
        sent = clock.monotonic()
        clock.advance(9)
        assert after_claim(_BeatStore(clock, renewed), "w", clock, sent, 2, 0.5) is None
        fence.doubt(sent)
        fence.hold(True)
        assert fence.overdue(clock.monotonic()) == pytest.approx(9)  # stops before it runs them


def test_fenced_is_exit_code_11():
    assert ExitCode.FENCED == 11 and ExitCode.describe(11) == "fenced"
    from shared.model import exitcodes

    assert "| 11   | FENCED" in exitcodes.__doc__


# -- real processes ------------------------------------------------------------------------------


def _config(tmp_path: Path, **worker) -> Path:
    return write_config(
        tmp_path,
        log_format="json",
        supervisor={"workers": 2},
        worker={"heartbeat_interval": 0.2, **worker},
    )


def _insert_running(cfg: Path, owner: str, owner_pid: int, started: float, beat: float) -> str:
    job_id = new_id()
    row = dict(
        id=job_id,
        type="test:noop",
        status="running",
        payload="{}",
        attempts=1,
        priority=0,
        run_at=iso(started),
        created_at=iso(started),
        updated_at=iso(started),
        started_at=iso(started),
        heartbeat_at=iso(beat),
        owner=owner,
        owner_pid=owner_pid,
    )
    with sqlite3.connect(str(cfg.parent / "q.db"), isolation_level=None) as c:
        c.execute(
            f"INSERT INTO jobs ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
            list(row.values()),
        )
    return job_id


def test_a_supervisor_rescues_another_hosts_expired_job_without_touching_its_pid(
    tmp_path, sup_factory
):
    """Another host's worker (its token names a pid that here is some unrelated live process)
    went silent past its lease: this supervisor re-queues its job directly and a worker here
    runs it; that pid is never signalled. Another job of that host, past its hard timeout but
    with a fresh lease, is left alone: only its own host polices its timeout."""
    cfg = _config(tmp_path, lease_timeout=3, job_timeout=5)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        sup = sup_factory(cfg)
        wait_until(lambda: len(worker_rows(cfg)) == 2, timeout=30, what="workers up")
        now = time.time()
        ct = create_time_ms(sleeper.pid)
        dead = _insert_running(
            cfg, f"{FOREIGN}:{sleeper.pid}:{ct}", sleeper.pid, now - 1000, now - 100
        )
        fresh_owner = f"{FOREIGN}:{sleeper.pid + 1}:{ct}"
        fresh = _insert_running(cfg, fresh_owner, sleeper.pid, now - 1000, now + 3600)
        wait_until(
            lambda: job_row(cfg, dead)["status"] == "completed",
            timeout=20,
            what="expired job re-run here",
        )
        row = job_row(cfg, dead)
        assert row["attempts"] == 2 and row["error"] is None  # its re-run shows no stale error
        with sqlite3.connect(str(cfg.parent / "q.db")) as c:
            lost = c.execute(
                "SELECT outcome, error FROM job_attempts WHERE job_id = ? AND attempt = 1", (dead,)
            ).fetchone()
        assert lost is not None and "another host" in lost[1], lost  # the history keeps why
        still = job_row(cfg, fresh)
        assert (still["status"], still["owner"]) == ("running", fresh_owner)
        assert (
            sleeper.poll() is None and psutil.Process(sleeper.pid).status() != psutil.STATUS_ZOMBIE
        )
        assert not log_events(sup, "worker.kill_failed")
        reaped = log_events(sup, "job.reaped")
        assert [e["id"] for e in reaped] == [dead]
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_worker_that_cannot_renew_its_lease_exits_fenced_before_it_expires(tmp_path, sup_factory):
    """The database refuses the worker's heartbeats (the test holds SQLite's write lock, as an
    unreachable database would refuse every write): the worker stops itself, exit FENCED,
    before its lease could expire, so the supervisor never has to kill it; once the database
    takes writes again the job runs once more, elsewhere, never overlapping the first run."""
    lease = 8.0  # margin 1.6 s: the fence fires 6.4 s after the last renewal was sent
    cfg = _config(tmp_path, lease_timeout=lease)
    log, gate = tmp_path / "events.log", tmp_path / "gate"
    sup = sup_factory(cfg)
    wait_until(lambda: len(worker_rows(cfg)) == 2, timeout=30, what="workers up")
    with JobQueue(str(cfg.parent / "q.db")) as q:
        jid = q.enqueue("test:gate", {"gate": str(gate), "log": str(log), "max_wait": 120})
    first = wait_until(
        lambda: [e for e in events(log) if e["event"] == "start"], what="job started"
    )[0]
    locker = sqlite3.connect(str(cfg.parent / "q.db"), isolation_level=None, timeout=10)
    try:
        locker.execute("BEGIN IMMEDIATE")  # from now on no write (no heartbeat) gets through
        last_renewal = parse_iso(
            locker.execute("SELECT heartbeat_at FROM jobs WHERE id = ?", (jid,)).fetchone()[0]
        )
        fenced = wait_until(
            lambda: log_events(sup, "worker.fenced"),
            timeout=lease + 10,
            what="the worker to fence itself",
        )[0]
        wait_until(lambda: pid_gone(first["pid"]), what="fenced worker gone")
        assert parse_iso(fenced["ts"]) < last_renewal + lease  # before the lease expired
        assert parse_iso(fenced["ts"]) > last_renewal + fencing.fence_after(0.2, lease) - 0.5
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    exited = wait_until(
        lambda: [e for e in log_events(sup, "worker.exited") if e.get("pid") == first["pid"]],
        timeout=20,
        what="the supervisor to reap it",
    )[0]
    assert "fenced" in exited["how"]
    second = wait_until(
        lambda: [e for e in events(log) if e["event"] == "start" and e["pid"] != first["pid"]],
        timeout=30,
        what="the job to run again",
    )[0]
    assert second["t"] > parse_iso(fenced["ts"])
    gate.touch()
    wait_until(lambda: job_row(cfg, jid)["status"] == "completed", timeout=20, what="job completed")
    ends = [e for e in events(log) if e["event"] == "end"]
    assert [e["pid"] for e in ends] == [second["pid"]]
    assert job_row(cfg, jid)["attempts"] == 2
    assert "lease expired" not in sup.output()  # the supervisor never had to take it
