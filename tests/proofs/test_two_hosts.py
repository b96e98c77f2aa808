"""Two hosts on one PostgreSQL server, killed, cut off and through a server
restart (harness: tests/twohost.py; handler: tests/fixtures/twohostjobs.py).

The harness's own tests come first: namespaces, the proxy's cut and heal seen by a plain
psycopg connection, the kill of a whole host and the cleanup.

Scenarios a, b, d and e run twice (``via``): ``direct``, and ``pooled``, through one PgBouncer
in transaction pooling for the module (tests/pgbouncer.py, none of its timeouts set, so what
bounds a cut session is jobq's own): each host reaches the bouncer through its proxy, in pooled
mode, and its ``[postgres] listen`` connection reaches the server through the same proxy, so a
cut takes both. The bouncer reaches the server directly. Without pgbouncer the pooled variants
skip (fail under JOBQ_REQUIRE_POSTGRES=1).

Skips: not root, no `ip`/`unshare`, no psycopg or no server. With JOBQ_REQUIRE_POSTGRES=1 every
reason but "not root" fails instead: the variable promises a server and the tools of this
machine kind; root is a privilege of the account that runs the suite, and a developer running
it unprivileged on a machine with a server should still get a green run that says what it skipped.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest

from tests import pgbouncer, twohost
from tests.proc import pid_gone
from tests.twohost import Host, Netns, Proxy, connect, netns_names, wait_for


@pytest.fixture(autouse=True)
def _requirements():
    reason = twohost.missing()
    if reason is None:
        twohost.remove_leftovers()
        return
    text, may_skip = reason
    if twohost.required() and not may_skip:
        pytest.fail(f"JOBQ_REQUIRE_POSTGRES=1: {text}")
    pytest.skip(text)


@pytest.fixture
def netns():
    ns = Netns()
    yield ns
    ns.close()


@pytest.fixture
def proxy(netns):
    p = Proxy(netns.root_addr)
    yield p
    p.close()


def _ns_python(ns: Netns, code: str, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*ns.exec_prefix(), sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# -- the harness -----------------------------------------------------------------------------


def test_namespace_reaches_the_server_only_through_its_proxy(netns, proxy):
    url = twohost.host_url(proxy)
    code = (
        "import psycopg, socket\n"
        f"print(psycopg.connect({url!r}, connect_timeout=5).execute('SELECT 41 + 1').fetchone()[0])\n"
        "s = socket.socket()\n"
        "try:\n    s.connect(('127.0.0.1', 5432)); print('reached')\n"
        "except OSError as e:\n    print('refused', e.errno)\n"
    )
    done = _ns_python(netns, code)
    assert done.returncode == 0, done.stderr
    answer, direct = done.stdout.split("\n")[:2]
    assert answer == "42"
    assert direct.startswith("refused")  # the namespace's 127.0.0.1 is its own
    assert proxy.accepted == 1


def _query_in_thread(conn, sql: str):
    box: dict = {}

    def run():
        try:
            box["rows"] = conn.execute(sql).fetchall()
        except Exception as exc:  # noqa: BLE001 - the test looks at what came out
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def test_blackhole_freezes_connections_and_heal_resets_them(proxy):
    import psycopg

    url = twohost.host_url(proxy)
    c = connect(url)
    assert c.execute("SELECT 1").fetchone() == (1,)
    proxy.cut("blackhole")
    t, box = _query_in_thread(c, "SELECT 2")
    t.join(1.0)  # a deadline, not a pause: the query must still be hanging after it
    assert t.is_alive() and not box, "a query went through a blackholed proxy"
    t0 = time.monotonic()
    with pytest.raises(psycopg.OperationalError):  # accepted, never answered: a timeout
        connect(url, connect_timeout=1)
    assert time.monotonic() - t0 >= 0.9
    proxy.heal()
    t.join(5)
    assert isinstance(box.get("error"), psycopg.OperationalError)
    with connect(url) as again:
        assert again.execute("SELECT 3").fetchone() == (3,)
    c.close()


def test_blackhole_heal_with_resume_delivers_what_was_held(proxy):
    url = twohost.host_url(proxy)
    with connect(url) as c:
        c.execute("SELECT 1")
        proxy.cut("blackhole")
        t, box = _query_in_thread(c, "SELECT 7")
        t.join(0.5)
        assert t.is_alive()
        proxy.heal(resume=True)
        t.join(5)
        assert box.get("rows") == [(7,)]


def test_refuse_resets_connections_and_refuses_new_ones(proxy):
    import psycopg

    url = twohost.host_url(proxy)
    c = connect(url)
    c.execute("SELECT 1")
    proxy.cut("refuse")
    with pytest.raises(psycopg.OperationalError):
        c.execute("SELECT 1")
    with pytest.raises(psycopg.OperationalError, match="(?i)refused"):
        connect(url, connect_timeout=2)
    proxy.heal()
    with connect(url) as again:
        assert again.execute("SELECT 3").fetchone() == (3,)
        assert proxy.live() == 1


def test_host_namespaces_kill_and_cleanup(tmp_path):
    host = Host("a", tmp_path / "a", schema="unused")
    name, dev = host.netns.name, host.netns.root_dev
    try:
        out = tmp_path / "a" / "ids.json"
        code = (
            "import json, os, socket, time\n"
            "kids = []\n"
            "for _ in range(2):\n"
            "    kid = os.fork()\n"
            "    if kid == 0:\n        time.sleep(120)\n        os._exit(0)\n"
            "    kids.append(kid)\n"
            f"open({str(out)!r}, 'w').write(json.dumps([os.getpid(), socket.gethostname(), kids]))\n"
            "time.sleep(120)\n"
        )
        host.start(sys.executable, "-c", code)
        pid1, hostname, kids = wait_for(
            lambda: out.exists() and out.read_text() and json.loads(out.read_text()),
            10,
            "the host's first process",
        )
        assert pid1 == 1 and hostname == host.hostname
        tree = host.tree()
        assert sorted(twohost.nspid(p.pid) for p in tree) == [1, *sorted(kids)]
        host.kill()
        assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in tree)
    finally:
        host.close()
    assert name not in netns_names()
    assert twohost.run("ip", "link", "show", dev, check=False).returncode != 0


# -- the scenarios ---------------------------------------------------------------------------

LEASE = twohost.HOST_SETTINGS["worker"]["lease_timeout"]
HEARTBEAT = twohost.HOST_SETTINGS["worker"]["heartbeat_interval"]
CLOCKS = 0.25  # monotonic (the log) against the server's clock (leases), on one machine


@pytest.fixture(scope="module")
def bouncer():
    """One PgBouncer in transaction pooling for the module's pooled variants (started by the
    first of them), reaching the server directly."""
    if pgbouncer.binary() is None:
        reason = "pgbouncer is not installed (apt-get install -y pgbouncer)"
        if twohost.required():
            pytest.fail(f"JOBQ_REQUIRE_POSTGRES=1: {reason}")
        pytest.skip(reason)
    b = pgbouncer.PgBouncer(pool_size=10)
    yield b
    b.close()


@pytest.fixture(params=["direct", "pooled"])
def via(request) -> dict:
    """How the hosts reach the server: directly, or through PgBouncer in transaction pooling
    (each host's proxy leads to the bouncer, and its ``listen`` connection to the server goes
    through the same proxy: a cut takes both)."""
    if request.param == "direct":
        return {}
    return {"pooler": request.getfixturevalue("bouncer").url()}


def _start(cluster, workers: int) -> None:
    """Start the cluster; pooled, also wait until each host's supervisor listens on the server
    (its ``listen`` connection, through its proxy), so the variant runs as documented."""
    cluster.start(workers=workers)
    if next(iter(cluster.hosts.values())).listen is None:
        return
    from shared.engines.postgres.turns import lock_key

    # a relay that listens holds its slot in the hosts' turns (a session advisory lock)
    slots = (
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2"
        " AND classid = %s::int4::oid AND granted"
    )
    with connect(cluster.url) as c:
        wait_for(
            lambda: (
                c.execute(slots, (lock_key(cluster.schema),)).fetchone()[0] == len(cluster.hosts)
            ),
            20,
            "every host's supervisor listening on the server",
        )


@pytest.fixture
def make_cluster(tmp_path, request):
    made = []

    def make(**kw):
        c = twohost.Cluster(tmp_path / f"c{len(made)}", **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        for h in c.hosts.values():  # for the failure report (pytest -rA shows them)
            print(
                f"--- host {h.name} ({h.hostname}) processes ---\n{h.describe()}\n"
                f"--- log tail ---\n{h.output()[-4000:]}"
            )
        c.close()


def _last_error(host: Host) -> str:
    """The host's last error or critical log line (its tail if it is a traceback)."""
    for line in reversed(host.output().splitlines()):
        if (
            line.startswith("{")
            and ('"critical"' in line or '"error"' in line)
            and "maintenance_failed" not in line
        ):
            try:
                e = json.loads(line)
            except ValueError:
                continue
            return f"{e.get('event')}: {str(e.get('error'))[-400:]}"
    return "(none logged)"


def _ends(lines) -> int:
    return sum(1 for x in lines if x["ev"] == "end")


def _open_on(lines, host: Host):
    return [
        r
        for rs in twohost.runs(lines).values()
        for r in rs
        if r["host"] == host.hostname and r["end"] is None
    ]


def test_a_sigkill_of_one_host_the_other_finishes_its_jobs(make_cluster, via):
    cluster = make_cluster(**via)
    a, b = cluster["a"], cluster["b"]
    _start(cluster, workers=2)
    ids = cluster.enqueue(120, sleep=0.1)
    wait_for(
        lambda: _ends(cluster.lines()) >= 20 and _open_on(cluster.lines(), a),
        60,
        "host a running jobs, 20 jobs done",
    )
    a.kill()
    killed = time.monotonic()
    cluster.wait_completed(ids, 90)
    lines = cluster.lines()
    rs = twohost.runs(lines)
    cut_short = {
        job: r
        for job, r in rs.items()
        if any(x["host"] == a.hostname and x["end"] is None for x in r)
    }
    assert cut_short, "host a was killed with no job in hand"
    for job, r in cut_short.items():
        later = [x for x in r if x["mono"] > killed]
        assert later and later[-1]["host"] == b.hostname and later[-1]["end"] is not None, r
        # the lease is honoured: the job's last heartbeat was at most one interval before the kill
        waited = later[0]["mono"] - killed
        assert waited >= LEASE - HEARTBEAT - CLOCKS, (
            f"job {job} taken {waited:.2f} s after the kill"
        )
    assert twohost.overlaps(lines) == []
    print(
        f"killed with {len(cut_short)} jobs in hand; re-run after "
        f"{min(x['mono'] for r in cut_short.values() for x in r if x['mono'] > killed) - killed:.2f} s"
    )


class Gone:
    """Records when each watched process disappears (a thread polling every 10 ms)."""

    def __init__(self, pids: list[int]) -> None:
        self.at: dict[int, float] = {}
        self._pids = pids
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set() and len(self.at) < len(self._pids):
            for pid in self._pids:
                if pid not in self.at and pid_gone(pid):
                    self.at[pid] = time.monotonic()
            self._stop.wait(0.01)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


def test_b_cut_off_host_fences_itself_before_the_other_runs_its_jobs(make_cluster, via):
    cluster = make_cluster(**via)
    _start(cluster, workers=2)
    # a first run outlasts the cut, the fencing and the re-run (about the lease) by far; when
    # the two jobs start on different hosts, the other host's run goes on to its end, which the
    # last wait_completed waits for: 15 s, not a minute
    ids = cluster.enqueue(2, sleep=15, rerun_sleep=0.2)
    starts = wait_for(
        lambda: len([x for x in cluster.lines() if x["ev"] == "start"]) >= 2 and cluster.lines(),
        30,
        "both jobs started",
    )
    by_host = {h.hostname: h for h in cluster.hosts.values()}
    counts = {name: sum(1 for x in starts if x["host"] == name) for name in by_host}
    victim = by_host[max(counts, key=counts.get)]
    other = next(h for h in cluster.hosts.values() if h is not victim)
    inner = {x["pid"]: x["job"] for x in starts if x["host"] == victim.hostname}
    workers = victim.workers()
    watched = {workers[p]: job for p, job in inner.items()}
    assert len(watched) == len(inner), f"worker pids {inner} not among {workers}"
    gone = Gone(list(watched))
    victim.proxy.cut("blackhole")
    cut_at = time.monotonic()
    try:

        def rerun_done():
            rs = twohost.runs(cluster.lines())
            return all(
                any(x["host"] == other.hostname and x["end"] is not None for x in rs[j])
                for j in watched.values()
            )

        wait_for(rerun_done, 40, f"host {other.name} re-running host {victim.name}'s jobs")
    finally:
        gone.close()
    lines = cluster.lines()
    rs = twohost.runs(lines)
    report = []
    for pid, job in watched.items():
        rerun = next(x for x in rs[job] if x["host"] == other.hostname)
        assert pid in gone.at, (
            f"worker {pid} of host {victim.name} still running job {job} after its re-run began"
        )
        report.append(
            f"job {job[:8]}: worker gone {gone.at[pid] - cut_at:.2f} s after the cut, "
            f"re-run {rerun['mono'] - cut_at:.2f} s after"
        )
        assert gone.at[pid] < rerun["mono"], report[-1]
        # and not by luck of the rescuer's delay: before the lease could expire anywhere
        assert gone.at[pid] - cut_at < LEASE, (
            f"{report[-1]}: not fenced within the lease ({LEASE} s)"
        )
    assert twohost.overlaps(lines) == []
    print("; ".join(report))
    assert victim.alive(), (
        f"host {victim.name}'s supervisor exited during the cut: {_last_error(victim)}"
    )
    # healed, the victim works again: nothing lost, its workers claim jobs (fed until one does)
    victim.proxy.heal()
    healed = time.monotonic()
    more = cluster.enqueue(20, sleep=0.05)

    def victim_ran():
        if any(
            x["ev"] == "end" and x["host"] == victim.hostname and x["mono"] > healed
            for x in cluster.lines()
        ):
            return True
        if cluster.statuses(more[-4:]).get("pending", 0) == 0:
            more.extend(cluster.enqueue(4, sleep=0.05))
        return False

    wait_for(victim_ran, 30, f"host {victim.name} running jobs again after the heal")
    cluster.wait_completed(ids + more, 60)
    assert twohost.overlaps(cluster.lines()) == []


@pytest.fixture
def private_server():
    bindir = twohost.pg_bindir()
    if bindir is None:
        if twohost.required():
            pytest.fail(
                "JOBQ_REQUIRE_POSTGRES=1: no initdb/pg_ctl to run a server of the test's own"
            )
        pytest.skip("no initdb/pg_ctl to run a server of the test's own")
    # not under tmp_path: pytest's folders are 0700, and the server runs as the postgres user
    folder = Path(tempfile.mkdtemp(prefix="jobq-twohost-pg-"))
    folder.chmod(0o755)
    server = twohost.PrivateServer(folder / "server", bindir)
    yield server
    server.close()


def test_c_server_restart_mid_burn(private_server, make_cluster):  # the server outlives the hosts
    """The restart is of a server of the test's own (initdb in tmp): the machine's shared server
    serves other sessions and test runs at the same time."""
    cluster = make_cluster(url=private_server.url)
    cluster.start(workers=2)
    ids = cluster.enqueue(300, sleep=0.1)
    wait_for(lambda: _ends(cluster.lines()) >= 40, 60, "40 jobs done")
    before = time.monotonic()
    private_server.restart()
    up = time.monotonic()
    pids = {h.hostname: set() for h in cluster.hosts.values()}

    def back():  # every worker slot of every host runs a job that started after the restart
        for x in cluster.lines():
            if x["ev"] == "end" and x["mono"] > up:
                pids[x["host"]].add(x["pid"])
        return all(len(p) >= 2 for p in pids.values())

    try:
        wait_for(back, 30, "every worker running jobs again")
    finally:
        print(
            f"restart took {up - before:.2f} s; workers back: "
            f"{ {h: len(p) for h, p in pids.items()} } at {time.monotonic() - up:.2f} s after"
        )
    took = time.monotonic() - up
    cluster.wait_completed(ids, 120)
    for h in cluster.hosts.values():
        assert h.alive(), f"host {h.name}'s supervisor exited: {_last_error(h)}"
    assert twohost.overlaps(cluster.lines()) == []
    assert took <= 5, f"workers back {took:.2f} s after the server came up (within 5 s)"


# -- cut off in a batch, lost answers --------------------------------------------------------------

# Run inside host b: a worker's batch transaction (two completions, then the next claim) through
# the store's own finish_and_claim, stopped before its COMMIT: the session is left idle in the
# transaction, holding the rows' locks, when the test cuts the host off.
STUCK_WORKER = """
import json, os, sys, time
from shared.runtime.clock import SystemClock
from shared.settings.config import load
from shared.engines import open_store
from shared.model.job import Finish
from shared.runtime.processes import host_id, owner_token
store = open_store(load(sys.argv[1]), migrate=False)
owner, now = owner_token(os.getpid(), host_id()), SystemClock().now
first = store.claim(owner, os.getpid(), now(), 4)
real_tx = store._tx

def stuck(fn):
    def body(c):
        done, claimed = fn(c)
        # the server's own pid (through a pooler, the client's backend_pid is the pooler's)
        backend = c.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"]
        print(json.dumps({"backend": backend, "owner": owner, "first": [j.id for j in first],
                          "claimed": [g.id if hasattr(g, "id") else g[0] for g in claimed]}), flush=True)
        time.sleep(3600)
    return real_tx(body)
store._tx = stuck
# a completion and a retry: a batch of completions alone goes as one autocommit statement (no
# transaction to leave open); a mixed batch is one transaction, the path this case cuts
store.finish_and_claim([Finish("completed", first[0].id, first[0].attempts, None),
                        Finish("retry", first[1].id, first[1].attempts, "retry", run_at=now())], owner,
                       os.getpid(), now(), 2)
"""


def _lease_ages(cluster, ids: list[str]) -> dict[str, float]:
    """Lease ages of those of ``ids`` still running, on the server's clock."""
    with connect(cluster.url) as c:
        return dict(
            c.execute(
                f"SELECT id, extract(epoch FROM statement_timestamp() - heartbeat_at::timestamptz) "
                f'FROM "{cluster.schema}".jobs WHERE id = ANY(%s) AND status = %s',
                (ids, "running"),
            ).fetchall()
        )


def test_d_a_host_cut_mid_transaction_holds_no_lock_past_its_lease(make_cluster, via):
    """Host b is cut off while a session of its is idle in a batch transaction
    (completions done, next claim made, no COMMIT). The server ends that session within the
    lease (its locks go, its work is rolled back); host a keeps working meanwhile: it replaces
    a worker killed after the stuck jobs' leases expired, re-runs every job the session held,
    and stops promptly on SIGTERM, all while b is still cut off."""
    cluster = make_cluster(**via)
    a, b = cluster["a"], cluster["b"]
    _start(cluster, workers=2)
    ids = cluster.enqueue(80, sleep=0.5)  # enough for the stuck worker to claim some
    stuck = subprocess.Popen(
        b.command(sys.executable, "-c", STUCK_WORKER, str(b.config)),
        env=b.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = stuck.stdout.readline()
        assert line, f"the stuck worker did not start: {stuck.stderr.read()[-2000:]}"
        info = json.loads(line)
        b.proxy.cut("blackhole")
        cut_at = time.monotonic()
        held = info["first"] + info["claimed"]
        assert len(info["first"]) == 4 and info["claimed"], info
        with connect(cluster.url) as c:
            wait_for(
                lambda: (
                    c.execute(
                        "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (info["backend"],)
                    ).fetchone()
                    is None
                ),
                LEASE + 10,
                "the server ending the cut session",
            )
        ended = time.monotonic() - cut_at
        assert ended < LEASE, f"the cut session lived {ended:.2f} s (lease {LEASE} s)"
        # the stuck jobs' leases have expired (or a has released them already): a must not be
        # blocked in upkeep now
        wait_for(
            lambda: all(age > LEASE + 0.5 for age in _lease_ages(cluster, held).values()),
            LEASE + 20,
            "the stuck jobs' leases expired",
        )
        before = set(a.workers().values())  # pids in the root namespace
        victim = next(iter(before))
        psutil.Process(victim).kill()
        killed_at = time.monotonic()
        wait_for(
            lambda: len(set(a.workers().values()) - before) >= 1 and len(a.workers()) >= 2,
            15,
            f"host {a.name} replacing its killed worker",
        )
        replaced = time.monotonic() - killed_at
        cluster.wait_completed(ids, 90)
        rs = twohost.runs(cluster.lines())
        for job in held:
            assert any(x["host"] == a.hostname and x["end"] is not None for x in rs.get(job, [])), (
                f"job {job} held by the cut session was not re-run on host {a.name}: {rs.get(job)}"
            )
        assert twohost.overlaps(cluster.lines()) == []
        init = a.init()
        t0 = time.monotonic()
        init.send_signal(signal.SIGTERM)
        a.proc.wait(15)
        stopped = time.monotonic() - t0
        assert a.proc.returncode == 0, f"host {a.name} exited {a.proc.returncode}: {_last_error(a)}"
        print(
            f"cut session ended {ended:.2f} s after the cut; worker replaced in {replaced:.2f} s; "
            f"host a stopped {stopped:.2f} s after SIGTERM"
        )
    finally:
        stuck.kill()
        stuck.wait(10)


def test_e_a_lost_claim_answer_gives_the_job_back_at_once(tmp_path, via):
    """The server commits a worker's claim but its answer never arrives (the
    proxy drops the answer and blackholes, then resets the connection). The job must not stay running under the
    worker, kept alive by its heartbeat, until job_timeout: the worker's first beat after the
    failed claim gives it back without charging the attempt, and it runs once, attempt 1."""
    from shared.producer.api import JobQueue
    from shared.settings.config import load
    from tests.proc import Running, log_events, write_config

    proxy = Proxy("127.0.0.1", via.get("pooler"))
    schema = f"jobq_lostclaim_{uuid.uuid4().hex[:10]}"
    postgres = {"schema": schema, "connect_timeout": 1}
    if via:  # pooled: the listening connection to the server through the same proxy
        listen = twohost.server_url()
        postgres.update(mode="pooled", listen=twohost.host_url(proxy, listen, proxy.route(listen)))
    log, locks = tmp_path / "exec.log", tmp_path / "locks"
    locks.mkdir()
    config = write_config(
        tmp_path,
        database=twohost.host_url(proxy),
        handlers=["twohostjobs"],
        log_format="json",
        supervisor={"workers": 1, "maintenance_interval": 0.2},
        worker={"lease_timeout": 10, "heartbeat_interval": 0.5, "job_timeout": 120},
        postgres=postgres,
    )
    queue = JobQueue(config=load(str(config)).replace(database=twohost.server_url()))
    sup = None
    try:
        # The cut comes once the supervisor has booted (else it could catch the supervisor's own
        # boot-time call, whose reset at the heal fails the boot: exit, nobody left to run the
        # job), with the claim's answer: it holds the job's payload, marked.
        sup = Running(config)
        wait_for(lambda: log_events(sup, "supervisor.started"), 30, "the supervisor booted")
        marker = uuid.uuid4().hex
        proxy.lose_answer(marker.encode())
        [job] = queue.enqueue_many(
            [
                (
                    "twohost:work",
                    {"log": str(log), "locks": str(locks), "sleep": 0.1, "marker": marker},
                )
            ]
        )
        wait_for(lambda: proxy.tripped is not None, 30, "the worker's claim answered")
        wait_for(lambda: queue.get(job).status == "running", 10, "the server committing the claim")
        proxy.heal()  # resets the held connections: the worker never gets the claim's answer
        healed = time.monotonic()
        wait_for(
            lambda: queue.get(job).status == "completed",
            30,
            "the job given back and run (it stayed running under the worker before the fix)",
        )
        took = time.monotonic() - healed
        done = queue.get(job)
        assert (done.attempts, done.error) == (1, None), done
        runs = [
            x for x in (json.loads(s) for s in log.read_text().splitlines()) if x["ev"] == "start"
        ]
        assert len(runs) == 1, runs
        assert "worker.write_failed" in sup.output()  # the worker did see its claim fail
        print(f"job given back and run {took:.2f} s after the heal")
    finally:
        if sup is not None:
            sup.close()
        queue.close()
        proxy.close()
        twohost.drop_schema(schema)
