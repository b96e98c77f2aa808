"""``jobq copy``: jobs move between databases of any engine with every column and their
attempt history, idempotent by id, resumable after a stop or a kill, and a move (``--delete``)
never loses a job that started meanwhile. Run as a user runs it: ``python -m supervisor copy`` in
a subprocess. SQLite to SQLite always; to and from PostgreSQL when a server is there (skipped
without one unless JOBQ_REQUIRE_POSTGRES=1)."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
import tomli_w

from shared import ops
from shared.settings.config import Config
from shared.engines.contract import EngineStore
from shared.engines import open_store
from shared.model.errors import StoreError
from shared.model.exitcodes import ExitCode
from shared.model.job import Finish, NewJob, new_id, new_ids
from tests.engines import PostgresEngine
from tests.proc import env, wait_until

T0 = 1_700_000_000.0
TRACE = (
    '{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"k=v"}'
)
OWNER = "copyhost:4242:1"


# -- the databases ----------------------------------------------------------------------------


class Side:
    """One database of a copy: its ``database`` value for the CLI and a store on it."""

    def __init__(self, database: str, schema: str = "jobq") -> None:
        self.database, self.schema = database, schema

    def open(self, migrate: bool = True) -> EngineStore:
        cfg = Config(database=self.database)
        return open_store(
            cfg.replace(postgres=dataclasses.replace(cfg.postgres, schema=self.schema)),
            migrate=migrate,
        )


@pytest.fixture
def pg(tmp_path) -> Iterator[Side]:
    """A PostgreSQL side in a schema of its own (the contract suite's fixture), dropped afterwards."""
    engine = PostgresEngine(
        tmp_path
    )  # skips without a server (fails under JOBQ_REQUIRE_POSTGRES=1)
    yield Side(engine.database, engine.schema)
    engine.drop()


@pytest.fixture
def lite(tmp_path) -> Iterator[Any]:
    """A new SQLite side per call: ``lite('a')``."""
    return lambda name: Side(f"sqlite://{tmp_path / (name + '.db')}")


@pytest.fixture(params=["sqlite-sqlite", "sqlite-postgresql", "postgresql-sqlite"])
def pair(request, lite) -> tuple[Side, Side]:
    """(source, target) for each direction ``jobq copy`` supports."""
    a, b = request.param.split("-")
    src = lite("src") if a == "sqlite" else request.getfixturevalue("pg")
    dst = lite("dst") if b == "sqlite" else request.getfixturevalue("pg")
    return src, dst


def copy(
    tmp_path: Path, src: Side | str, dst: Side | str, *args: str, json_out: bool = True
) -> subprocess.CompletedProcess:
    """``python -m supervisor copy --from SRC --to DST ARGS --json`` with a config naming the
    PostgreSQL side's schema (both sides share the file, as a user's would)."""
    schemas = {
        s.schema for s in (src, dst) if isinstance(s, Side) and s.database.startswith("postgresql")
    }
    cfg = tmp_path / "copy.toml"
    cfg.write_bytes(
        tomli_w.dumps({"postgres": {"schema": schemas.pop() if schemas else "jobq"}}).encode()
    )
    names = [s.database if isinstance(s, Side) else s for s in (src, dst)]
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "supervisor",
            "copy",
            "--from",
            names[0],
            "--to",
            names[1],
            "--config",
            str(cfg),
            *args,
            *(["--json"] if json_out else []),
        ],
        capture_output=True,
        text=True,
        env=env(),
        cwd=str(tmp_path),
        timeout=120,
    )


def summary(r: subprocess.CompletedProcess) -> dict[str, Any]:
    assert r.returncode == 0, f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    return json.loads(r.stdout)


def fill(s: EngineStore) -> dict[str, str]:
    """Jobs in every state, with attempt history; name -> id. Each step enqueues what it then
    claims, so a claim takes exactly the job meant."""
    t = [T0]

    def now() -> float:
        t[0] += 1.5
        return t[0]

    def one(name: str, **kw: Any) -> str:
        job = NewJob(
            id=new_id(),
            type=f"copy:{name}",
            payload=json.dumps({"name": name, "ü": [1, 2]}),
            priority=kw.get("priority", 0),
            run_at=kw.get("run_at", t[0]),
            max_attempts=kw.get("max_attempts"),
            key=kw.get("key"),
            trace=kw.get("trace"),
        )
        return s.enqueue([job], now())[0]

    ids = {"done": one("done", trace=TRACE)}
    (j,) = s.claim(OWNER, 4242, now())
    s.check_in(OWNER, [(j.id, j.attempts, '{"done": 3, "total": 4}')])  # its progress travels too
    s.finish_and_claim(
        [Finish("completed", j.id, j.attempts, json.dumps({"ok": True}))], OWNER, 4242, now(), 0
    )
    ids["failed"] = one("failed", max_attempts=2)
    (j,) = s.claim(OWNER, 4242, now())
    s.finish_and_claim(
        [Finish("retry", j.id, j.attempts, "boom 1", run_at=t[0], max_attempts=2)],
        OWNER,
        4242,
        now(),
        0,
    )
    (j,) = s.claim(OWNER, 4242, now())
    s.finish_and_claim(
        [Finish("failed", j.id, j.attempts, "boom 2", max_attempts=2)], OWNER, 4242, now(), 0
    )
    ids["cancelled"] = one("cancelled")
    assert ops.cancel_jobs(s, [ids["cancelled"]], now()) == [ids["cancelled"]]
    ids["running"] = one("running")
    (j,) = s.claim(OWNER, 4242, now())
    assert j.id == ids["running"]
    assert ops.cancel_jobs(s, [j.id], now()) == [
        j.id
    ]  # running: a cancel is asked of its worker (copied with it)
    ids["keyed"] = one("keyed", key="the-key", priority=5, max_attempts=7)
    ids["scheduled"] = one("scheduled", run_at=T0 + 86400)
    for k in range(4):
        ids[f"pending{k}"] = one(f"pending{k}", priority=k)
    return ids


def seed(tmp_path: Path, src: Side) -> dict[str, str]:
    """:func:`fill` the source; a PostgreSQL source is filled on SQLite and copied over whole
    (``--status all``), so the jobs that reach the target have made the round trip."""
    if not src.database.startswith("postgresql"):
        with src.open() as s:
            return fill(s)
    first = Side(f"sqlite://{tmp_path / 'seed.db'}")
    with first.open() as s:
        ids = fill(s)
        want, want_history = rows(s), history(s, rows(s))
    summary(copy(tmp_path, first, src, "--status", "all"))
    with src.open() as s:
        assert rows(s) == want and history(s, want) == want_history
    return ids


def rows(s: EngineStore, statuses: Any = None) -> dict[str, dict[str, Any]]:
    """The exported rows by id, their JSON columns decoded: engines store the same values, not
    the same text (PostgreSQL's jsonb orders keys and spaces them its own way)."""
    return {r["id"]: _decoded(r) for r in s.export_jobs("", 1_000_000, statuses)}


def _decoded(row: Any) -> dict[str, Any]:
    out = dict(row)
    for f in ("payload", "result", "progress"):
        if out[f] is not None:
            out[f] = json.loads(out[f])
    return out


def history(s: EngineStore, ids: Any) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for a in s.export_attempts(sorted(ids)):
        out.setdefault(a["job_id"], []).append(dict(a))
    return out


# -- every direction ----------------------------------------------------------------------------


def table_columns(side: Side) -> set[str]:
    """The columns of the ``jobs`` table as the database itself lists them."""
    if side.database.startswith("postgresql"):
        import psycopg

        with psycopg.connect(side.database) as c:
            return {
                r[0]
                for r in c.execute(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_schema = %s AND table_name = 'jobs'",
                    (side.schema,),
                )
            }
    import sqlite3

    c = sqlite3.connect(side.database.removeprefix("sqlite://"))
    try:
        return {r[1] for r in c.execute("PRAGMA table_info(jobs)")}
    finally:
        c.close()


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_a_copy_carries_every_column_of_the_jobs_table(request, lite, engine):
    """ "Every column" (docs/scaling-out.md): what an export reads is the whole row, but for the
    engine's own bookkeeping, which the target writes for itself. A migration that adds a column
    to ``jobs`` fails here until ``jobq copy`` carries it."""
    side = lite("cols") if engine == "sqlite" else request.getfixturevalue("pg")
    with side.open() as s:
        s.enqueue(
            [
                NewJob(
                    id=new_id(),
                    type="copy:cols",
                    payload="{}",
                    priority=0,
                    run_at=T0,
                    max_attempts=None,
                    key=None,
                )
            ],
            T0,
        )
        (row,) = s.export_jobs("", 10)
    from shared.engines.transfer import LOCAL_FIELDS

    assert set(row) == table_columns(side) - set(LOCAL_FIELDS)


def test_every_job_arrives_with_every_column_and_a_second_run_copies_none(tmp_path, pair):
    src, dst = pair
    ids = seed(tmp_path, src)
    with src.open() as s:
        before = rows(s)
        before_history = history(s, before)
    got = summary(copy(tmp_path, src, dst))
    assert got["copied"] == len(ids) - 1 and got["already_there"] == 0 and got["done"]
    assert got["attempts"] == 3  # done: 1; failed: a retry and the failure
    with dst.open() as d:
        after = rows(d)
        assert after == {i: r for i, r in before.items() if r["status"] != "running"}
        assert ids["running"] not in after
        assert after[ids["done"]]["trace"] == TRACE  # the enqueuer's trace context travels too
        assert history(d, after) == {i: h for i, h in before_history.items() if i in after}
        assert d.counts() == {"pending": 6, "completed": 1, "failed": 1, "cancelled": 1}
        assert d.next_due() == T0 + 86400  # the scheduled job, still ahead
    again = summary(copy(tmp_path, src, dst))
    assert (again["copied"], again["already_there"], again["attempts"]) == (0, len(ids) - 1, 0)
    with dst.open() as d:
        assert rows(d) == after and d.counts()["pending"] == 6
    with src.open() as s:
        assert rows(s) == before  # a copy leaves the source as it was


def test_running_jobs_are_copied_only_when_asked(tmp_path, pair):
    src, dst = pair
    ids = seed(tmp_path, src)
    with src.open() as s:
        running = rows(s, ["running"])
    got = summary(copy(tmp_path, src, dst, "--status", "running"))
    assert got["copied"] == 1 and got["statuses"] == ["running"]
    with dst.open() as d:
        assert rows(d) == running and d.running()[0].id == ids["running"]


def test_move_deletes_what_was_copied_and_keeps_what_is_running(tmp_path, pair):
    src, dst = pair
    ids = seed(tmp_path, src)
    with src.open() as s:
        before = rows(s)
    got = summary(copy(tmp_path, src, dst, "--delete"))
    assert got["copied"] == len(ids) - 1 and got["deleted"] == len(ids) - 1
    with src.open() as s:
        assert list(rows(s)) == [ids["running"]]
        assert history(s, [ids["done"], ids["failed"]]) == {}  # the history went with its jobs
    with dst.open() as d:
        assert rows(d) == {i: r for i, r in before.items() if r["status"] != "running"}


# -- resuming --------------------------------------------------------------------------------------


def test_a_limited_copy_resumes_where_it_stopped(tmp_path, lite):
    src, dst = lite("a"), lite("b")
    with src.open() as s:
        fill(s)
        want = rows(s, ["pending", "completed", "failed", "cancelled"])
    first = summary(copy(tmp_path, src, dst, "--limit", "3", "--chunk", "2"))
    assert first["copied"] == 3 and first["read"] == 3
    with dst.open() as d:
        assert sorted(rows(d)) == sorted(want)[:3] and first["last_id"] == sorted(want)[2]
    rest = summary(copy(tmp_path, src, dst, "--after", first["last_id"]))
    assert rest["copied"] == len(want) - 3 and rest["already_there"] == 0
    whole = summary(copy(tmp_path, src, dst, "--chunk", "4"))
    assert whole["copied"] == 0 and whole["already_there"] == len(want)
    with dst.open() as d:
        assert rows(d) == want


def test_a_killed_copy_resumes_and_loses_nothing(tmp_path, lite):
    src, dst = lite("a"), lite("b")
    n = 20_000
    with src.open() as s:
        jobs = [
            NewJob(
                id=i,
                type="bulk",
                payload=str(k),
                priority=0,
                run_at=T0,
                max_attempts=None,
                key=None,
            )
            for k, i in enumerate(new_ids(n))
        ]
        for k in range(0, n, 1000):
            s.enqueue(jobs[k : k + 1000], T0)
    cfg = tmp_path / "copy.toml"
    cfg.write_text("")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "supervisor",
            "copy",
            "--from",
            src.database,
            "--to",
            dst.database,
            "--chunk",
            "50",
            "--config",
            str(cfg),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(),
        cwd=str(tmp_path),
    )
    try:

        def some_copied() -> bool:
            if proc.poll() is not None or not Path(dst.database[len("sqlite://") :]).exists():
                return proc.poll() is not None
            try:
                with dst.open(migrate=False) as d:
                    return bool(d.export_jobs("", 1))
            except StoreError:  # the file is there, its tables not yet
                return False

        wait_until(some_copied, timeout=60, what="the first chunk in the target")
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()
    with dst.open() as d:
        part = len(d.export_jobs("", n + 1))
        assert (
            0 < part < n and part % 50 == 0
        )  # killed midway; whole chunks: each is one transaction
    got = summary(copy(tmp_path, src, dst))
    assert got["copied"] == n - part and got["already_there"] == part
    with src.open() as s, dst.open() as d:
        assert rows(d) == rows(s) and d.counts() == {"pending": n}


# -- what is not overwritten ---------------------------------------------------------------------


def test_a_job_changed_since_the_last_copy_and_a_taken_key_are_reported_not_overwritten(
    tmp_path, lite
):
    src, dst = lite("a"), lite("b")
    with src.open() as s:
        ids = fill(s)
    summary(copy(tmp_path, src, dst))
    with src.open() as s:
        assert ops.cancel_jobs(s, [ids["pending0"]], T0 + 500) == [ids["pending0"]]
        stray = NewJob(
            id=new_id(),
            type="copy:stray",
            payload="1",
            priority=0,
            run_at=T0,
            max_attempts=None,
            key="second-key",
        )
        s.enqueue([stray], T0 + 501)
    with dst.open() as d:
        other = NewJob(
            id=new_id(),
            type="copy:other",
            payload="2",
            priority=0,
            run_at=T0,
            max_attempts=None,
            key="second-key",
        )
        d.enqueue([other], T0 + 502)
    r = copy(tmp_path, src, dst, "--delete")
    got = summary(r)
    assert (
        got["copied"] == 0
        and got["differing"] == [ids["pending0"]]
        and got["key_taken"] == [stray.id]
    )
    with dst.open() as d:
        assert d.get(ids["pending0"]).status == "pending"  # the target's row is kept
        assert d.get(stray.id) is None and d.get(other.id).type == "copy:other"
    with src.open() as s:  # neither is deleted from the source: the target does not hold them
        assert s.get(ids["pending0"]).status == "cancelled" and s.get(stray.id) is not None
    text = copy(tmp_path, src, dst, json_out=False)
    assert "in another state" in text.stderr and "idempotency key" in text.stderr
    assert "skipped" in text.stdout


# -- bad input --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source, target, named",
    [
        ("mysql://u:secret@db.example/x", "b.db", "--from mysql://u:***@db.example/x"),
        ("a.db", "mysql://u:secret@db.example/x", "--to mysql://u:***@db.example/x"),
        ("missing.db", "b.db", "--from missing.db: no such database file"),
        ("a.db", "/no/such/folder/b.db", "--to /no/such/folder/b.db"),
    ],
)
def test_a_database_that_cannot_be_opened_is_exit_5_and_one_line(
    tmp_path, lite, source, target, named
):
    with lite("a").open() as s:
        s.enqueue([NewJob(new_id(), "t", "1", 0, T0, None, None)], T0)
    r = copy(tmp_path, source, target)
    assert r.returncode == ExitCode.DATABASE_UNAVAILABLE, r.stderr
    assert r.stderr.count("\n") == 1 and named in r.stderr and "secret" not in r.stderr
    assert "Traceback" not in r.stderr


def test_an_unreachable_server_is_exit_5_naming_it_without_the_password(tmp_path, lite):
    pytest.importorskip("psycopg", reason="the postgres extra is not installed")
    with lite("a").open() as s:
        s.enqueue([NewJob(new_id(), "t", "1", 0, T0, None, None)], T0)
    url = "postgresql://jobq:secret@127.0.0.1:1/jobq"
    r = copy(tmp_path, lite("a"), url)
    assert r.returncode == ExitCode.DATABASE_UNAVAILABLE, r.stderr
    assert r.stderr.count("\n") == 1 and "--to postgresql://jobq:***@127.0.0.1:1/jobq" in r.stderr
    assert "secret" not in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "args, named",
    [
        (["--status", "bogus"], "unknown --status bogus"),
        (["--chunk", "0"], "--chunk must be >= 1"),
    ],
)
def test_bad_arguments_are_exit_2(tmp_path, lite, args, named):
    with lite("a").open():
        pass
    r = copy(tmp_path, lite("a"), lite("b"), *args)
    assert r.returncode == ExitCode.USAGE and named in r.stderr


def test_the_same_database_on_both_sides_is_refused(tmp_path, lite):
    with lite("a").open():
        pass
    r = copy(tmp_path, lite("a"), str(tmp_path / "a.db"))
    assert r.returncode == ExitCode.USAGE and "same database" in r.stderr


@pytest.fixture(params=["sqlite", "postgresql"])
def side(request, lite) -> Side:
    return lite("one") if request.param == "sqlite" else request.getfixturevalue("pg")


def test_delete_copied_keeps_a_job_that_started_or_changed_meanwhile(side):
    with side.open() as s:
        jobs = [NewJob(new_id(), "t", str(k), 0, T0, None, None) for k in range(4)]
        s.enqueue(jobs, T0)
        read = s.export_jobs("", 10, ["pending"])
        (started,) = s.claim(OWNER, 4242, T0 + 1)  # starts after it was read
        s.release_unstarted(OWNER, [started.id], T0 + 2)  # and is pending again, changed
        (running,) = s.claim(OWNER, 4242, T0 + 3)
        assert running.id != started.id  # the released job is due later than the others
        gone = s.delete_copied(read)
        assert started.id not in gone and running.id not in gone
        assert sorted(gone) == sorted({j.id for j in jobs} - {started.id, running.id})
        assert {r["id"] for r in s.export_jobs("", 10)} == {started.id, running.id}
        assert s.counts() == {"pending": 1, "running": 1}


# -- what the target engine can store --------------------------------------------------------------


def _nul_source(src: Side) -> dict[str, str]:
    """A SQLite source whose texts hold NUL where SQLite lets them: a failure's error (and its
    attempt's), a result, a payload; one job with NUL in its key, one with a priority beyond
    PostgreSQL's integer, one plain job. name -> id."""
    import sqlite3

    with src.open() as s:
        ids = {}
        for name in ("failed", "done", "payload", "keyed", "huge", "plain"):
            ids[name] = s.enqueue(
                [
                    NewJob(
                        id=new_id(),
                        type=f"copy:{name}",
                        payload='{"n": 1}',
                        priority=0,
                        run_at=T0,
                        max_attempts=1,
                        key=None,
                    )
                ],
                T0,
            )[0]
        claimed = {j.id: j for j in s.claim(OWNER, 4242, T0 + 1, limit=10)}
        s.finish_and_claim(
            [
                Finish(
                    "failed",
                    ids["failed"],
                    claimed[ids["failed"]].attempts,
                    "bad\x00byte",
                    max_attempts=1,
                ),
                Finish("completed", ids["done"], claimed[ids["done"]].attempts, '"ok"'),
            ],
            OWNER,
            4242,
            T0 + 2,
            0,
        )
    c = sqlite3.connect(src.database.removeprefix("sqlite://"), isolation_level=None)
    c.execute(
        "UPDATE jobs SET status = 'pending', owner = NULL, owner_pid = NULL, heartbeat_at = NULL, "
        "started_at = NULL WHERE status = 'running'"
    )
    c.execute("UPDATE jobs SET result = ? WHERE id = ?", ('"a\x00b"', ids["done"]))
    c.execute("UPDATE jobs SET payload = ? WHERE id = ?", ('{"s": "x\x00y"}', ids["payload"]))
    c.execute("UPDATE jobs SET key = ? WHERE id = ?", ("k\x00ey", ids["keyed"]))
    c.execute("UPDATE jobs SET priority = ? WHERE id = ?", (1 << 40, ids["huge"]))
    c.close()
    return ids


def test_nul_in_texts_is_copied_as_the_target_stores_it_and_a_row_it_cannot_store_is_named(
    tmp_path, lite, pg
):
    """SQLite to PostgreSQL: NUL in an error and an attempt's error arrive as ``\\x00`` (how the
    engine writes errors), in a result or payload (JSON) as the text ``\\u0000`` (jsonb cannot
    hold a NUL: kept visible, as in errors); the job with NUL in its key and the one whose priority the target cannot hold are not
    copied but named with why; the rest is copied."""
    src = lite("nul")
    ids = _nul_source(src)
    r = copy(tmp_path, src, pg, "--status", "all")
    got = summary(r)
    assert sorted(got["rejected"]) == sorted([ids["keyed"], ids["huge"]])
    assert "NUL" in got["rejected"][ids["keyed"]] and "key" in got["rejected"][ids["keyed"]]
    assert got["copied"] == 4
    with pg.open() as d:
        assert (
            d.get(ids["failed"]).error == "bad\\x00byte" and d.get(ids["failed"]).status == "failed"
        )
        assert d.get(ids["done"]).status == "completed"
        # a NUL jsonb cannot hold is kept visible as its escape (dialect.pg_json)
        assert rows(d)[ids["done"]]["result"] == "a\\u0000b"
        assert rows(d)[ids["payload"]]["payload"] == {"s": "x\\u0000y"}
        assert d.get(ids["plain"]) is not None
        assert d.get(ids["keyed"]) is None and d.get(ids["huge"]) is None
        assert [a["error"] for a in history(d, [ids["failed"]])[ids["failed"]]] == ["bad\\x00byte"]
    text = copy(tmp_path, src, pg, "--status", "all", json_out=False)  # again: named on stderr
    assert text.returncode == 0
    assert (
        f"job {ids['keyed']} was not copied" in text.stderr and f"job {ids['huge']}" in text.stderr
    )


@pytest.mark.parametrize("engine", ["postgresql", "sqlite"])
def test_copied_due_jobs_wake_the_targets_idle_workers(tmp_path, lite, request, engine):
    """A supervisor on the target whose worker is idle (poll_interval 30 s, and no follower that
    polls): a due job copied in starts at once, as an enqueued one does (on PostgreSQL it used to
    wait for the next poll)."""
    from shared import JobQueue
    from shared.settings.config import load
    from tests.proc import Running, write_config

    log = tmp_path / "events.log"
    target = (
        request.getfixturevalue("pg")
        if engine == "postgresql"
        else Side(f"sqlite://{tmp_path / 'q.db'}")
    )
    where = (
        {"database": target.database, "postgres": {"schema": target.schema}}
        if engine == "postgresql"
        else {}
    )
    cfg = write_config(tmp_path, worker={"poll_interval": 30}, supervisor={"workers": 1}, **where)
    sup = Running(cfg)
    try:
        with JobQueue(config=load(str(cfg))) as q:  # the workers have run one: they are idle now
            q.enqueue("test:noop", {"log": str(log)})
            wait_until(lambda: q.counts().get("completed") == 1, what="the warm-up job done")
        src = lite("wake")
        with JobQueue(src.database.removeprefix("sqlite://")) as s:
            job = s.enqueue("test:noop", {"log": str(log)})
        summary(copy(tmp_path, src, target))
        wait_until(lambda: job in log.read_text(), timeout=3, what="the copied job to start")
    finally:
        sup.close()


def test_an_id_that_cannot_be_a_postgresql_uuid_is_named_and_the_rest_copied(tmp_path, lite, pg):
    """SQLite keeps any text as an id (a job written around jobq); PostgreSQL's ids are uuids:
    such a job is not copied but named with why, and the others are."""
    import sqlite3

    src = lite("hexless")
    with src.open() as s:
        keep, odd = (
            s.enqueue([NewJob(new_id(), "copy:t", "{}", 0, T0, None, None)], T0)[0]
            for _ in range(2)
        )
    c = sqlite3.connect(src.database.removeprefix("sqlite://"), isolation_level=None)
    c.execute("UPDATE jobs SET id = 'order-42' WHERE id = ?", (odd,))
    c.close()
    got = summary(copy(tmp_path, src, pg, "--status", "all"))
    assert list(got["rejected"]) == ["order-42"] and "32 hex digits" in got["rejected"]["order-42"]
    assert got["copied"] == 1
    with pg.open() as d:
        assert d.get(keep) is not None and d.get("order-42") is None
