"""Hostile input: whatever jobq accepts,
every reader decodes; no handler output crashes a worker; one failing upkeep task never stops
the others; a timeout charges only the job that timed out; every time is bounded at the year
9999. Limits: docs/limits.md. Real supervisors and workers where the defect needs them; every
wait polls a condition."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shared import JobQueue, RetryAfter
from shared.model.bounds import MAX_DEPTH, MAX_TYPE_LEN, too_deep
from shared.model.job import new_id
from shared.runtime.clock import iso, parse_iso
from shared.settings.config import Config, load
from shared.model.exitcodes import ExitCode
from shared.runtime.processes import host_id
from shared.engines import open_store
from tests.engines import raw
from tests.proc import (
    REPO,
    db,
    log_events,
    Running,
    env,
    job_row,
    wait_until,
    worker_rows,
    write_config,
)

pytestmark = (
    pytest.mark.engines
)  # the tests that use database (or make_config, queue) run on each engine

DEEP = "[" * 5000 + "]" * 5000


def nested(depth: int, leaf=0):
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def hostile_config(folder: Path, **sections) -> Path:
    sections.setdefault("handlers", ["hostilejobs"])
    sections.setdefault("log_format", "json")
    return write_config(folder, **sections)


def terminal(cfg: Path, job_id: str):
    row = job_row(cfg, job_id)
    return row if row["status"] in ("completed", "failed", "cancelled") else None


def jobq(cfg: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args, "--config", str(cfg)],
        capture_output=True,
        text=True,
        input=stdin,
        env=env(),
        timeout=60,
        cwd=str(cfg.parent),
    )


def insert_raw(
    cfg: Path, job_id: str, jtype: str, payload: str, status: str = "pending", **cols
) -> None:
    """A row written around jobq (another program, an old version, a hand edit)."""
    now = iso(time.time())
    row = {
        **dict(
            id=job_id,
            type=jtype,
            status=status,
            payload=payload,
            attempts=0,
            priority=0,
            run_at=now,
            created_at=now,
            updated_at=now,
        ),
        **cols,
    }
    with db(cfg) as c:
        c.execute(
            f"INSERT INTO jobs ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
            list(row.values()),
        )


def one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == ExitCode.USAGE, (
        f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    )
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    return r.stderr


# -- case 1: a deep payload; isolated upkeep ----------------------------------------------------


def test_deep_row_fails_at_once_and_timeouts_are_still_enforced(database, tmp_path):
    """A row nested 5,000 deep (written around enqueue) used to crash its worker while decoding
    and every maintenance round after it: a job with a 2 s timeout then ran its full 20 s. A
    running row whose times are not times is policed no worse."""
    cfg = hostile_config(tmp_path, supervisor={"workers": 2, "kill_grace": 0.5})
    sup = Running(cfg)
    try:
        wait_until(lambda: len(worker_rows(cfg)) == 2, timeout=30, what="2 workers registered")
        insert_raw(cfg, "d" * 32, "hostile:do", DEEP)
        garbage = dict(started_at="garbage", heartbeat_at="garbage")
        if database.name == "postgresql":  # timestamptz columns: the server refuses it
            with pytest.raises(Exception, match="timestamp with time zone"):
                insert_raw(cfg, "e" * 32, "hostile:do", "{}", **garbage)
            garbage = dict(started_at="0001-01-01T00:00:00.000Z", heartbeat_at=None)
        insert_raw(
            cfg,
            "e" * 32,
            "hostile:do",
            "{}",
            status="running",
            attempts=1,
            owner=f"{host_id()}:999999:1",
            owner_pid=999999,
            **garbage,
        )
        slow = JobQueue(config=load(cfg)).enqueue("hostile:slow", {"sleep": 20})
        deep = wait_until(lambda: terminal(cfg, "d" * 32), timeout=10, what="the deep job to end")
        assert deep["status"] == "failed" and deep["attempts"] == 1
        assert "cannot be decoded" in deep["error"] and "nested too deep" in deep["error"]
        row = wait_until(
            lambda: terminal(cfg, slow), timeout=12, what="the 2 s timeout to be enforced"
        )
        assert row["status"] == "failed" and "timed out after 2 s" in row["error"]
        assert parse_iso(row["completed_at"]) - parse_iso(row["started_at"]) < 12
        # the row with garbage times: recovered from its dead owner, then failed for want of a handler
        wait_until(
            lambda: terminal(cfg, "e" * 32), timeout=10, what="the garbage row to be recovered"
        )
        r = jobq(cfg, "show", "d" * 32)
        assert r.returncode == 0 and "Traceback" not in r.stderr and "[[[[" in r.stdout
        assert not [
            e
            for e in log_events(sup, "supervisor.maintenance_failed")
            if e.get("task") != "timeouts"
        ]
        sup.signal(signal.SIGTERM)
        assert sup.wait(30) == 0
    finally:
        sup.close()


def test_one_failing_upkeep_task_does_not_stop_the_others(database, tmp_path, monkeypatch):
    from supervisor import arbiter as arbiter_mod
    from supervisor import maintenance, scheduler
    from supervisor.upkeep import Upkeep

    cfg = load(hostile_config(tmp_path))
    calls = []

    def broken(*a, **k):
        calls.append("timeouts")
        raise RuntimeError("judge broke")

    monkeypatch.setattr(maintenance, "worth_a_look", lambda *a, **k: True)  # read the running jobs
    monkeypatch.setattr(maintenance, "judge_running", broken)
    monkeypatch.setattr(scheduler, "run_due", lambda *a, **k: calls.append("schedules"))
    monkeypatch.setattr(
        maintenance, "recover_foreign", lambda *a, **k: calls.append("recovery") or 0
    )
    arb = arbiter_mod.Arbiter(cfg)
    arb.upkeep = Upkeep(arb.upkeep_tasks())  # what load() sets up
    try:
        arb.maintain()
        # recovery: this host's owners, then other hosts' (no election given: we lead)
        assert calls == ["timeouts", "recovery", "recovery", "schedules"]
    finally:
        arb.close_db()
        arb.signals.close()


def test_enqueue_bounds_nesting_depth(queue):
    ok = queue.enqueue("t", nested(MAX_DEPTH))
    assert queue.get(ok).payload == nested(MAX_DEPTH)
    for depth in (MAX_DEPTH + 1, 990, 5000):
        with pytest.raises(ValueError, match=f"nests deeper than {MAX_DEPTH} levels"):
            queue.enqueue("t", nested(depth))
    with pytest.raises(ValueError, match="item 1: .*nests deeper"):
        queue.enqueue_many([("t", 1), ("t", {"a": nested(200)})])
    assert queue.counts() == {"pending": 1}
    assert not too_deep(json.dumps({"s": "[" * 500}))  # brackets inside strings do not count


def test_every_reader_decodes_a_deep_row(database, tmp_path):
    """Job.from_row/from_tuple never raise: the raw text is kept and payload_error says why."""
    config, jid = database.config(tmp_path), new_id()
    with open_store(config) as s, raw(config) as c:
        c.execute(
            "INSERT INTO jobs (id, type, status, payload, result, attempts, priority, run_at, owner, "
            "created_at, updated_at) VALUES (?, 't', 'running', ?, ?, 1, 0, '2026-01-01T00:00:00.000Z', 'o', "
            "'2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
            (jid, DEEP, DEEP),
        )
        (job,) = s.running()
        assert job.payload == DEEP and job.result == DEEP and "nested too deep" in job.payload_error
        assert s.get(jid).payload_error == job.payload_error


# -- case 2: lone surrogates from a handler -----------------------------------------------------


def test_lone_surrogates_from_handlers_never_crash_the_worker(database, tmp_path):
    cfg = hostile_config(tmp_path, supervisor={"workers": 1})
    sup = Running(cfg)
    try:
        wait_until(lambda: len(worker_rows(cfg)) == 1, timeout=30, what="the worker registered")
        pid = worker_rows(cfg)[0]["pid"]
        with JobQueue(config=load(cfg)) as q:
            ret = q.enqueue("hostile:do", {"act": "return", "value": "file-", "surrogate": True})
            err = q.enqueue("hostile:do", {"act": "raise", "value": "bad name ", "surrogate": True})
            logged = q.enqueue("hostile:do", {"act": "log", "value": "name ", "surrogate": True})
            later = q.enqueue(
                "hostile:do",
                {"act": "retry_after", "value": 3600, "message": "m ", "surrogate": True},
                max_attempts=2,
            )
            wait_until(
                lambda: (
                    all(terminal(cfg, j) for j in (ret, err, logged))
                    and job_row(cfg, later)["attempts"] == 1
                ),
                timeout=20,
                what="the jobs to end",
            )
            assert q.get(ret).status == "completed"
            assert q.get(ret).result == database.kept("file-\udc80")  # kept (visible on jsonb)
            in_payload = q.enqueue(
                "hostile:do", {"act": "return", "value": "p\udc80q"}
            )  # a file name, say
            assert wait_until(lambda: terminal(cfg, in_payload))["status"] == "completed"
            got = q.get(in_payload)
            assert got.result == got.payload["value"] == database.kept("p\udc80q")
            assert q.get(logged).status == "completed"
            e = q.get(err)
            assert (
                e.status == "failed"
                and "ValueError: bad name \\udc80" in e.error
                and e.attempts == 1
            )
            r = q.get(later)
            assert r.status == "pending" and "m \\udc80" in r.error
        assert [w["pid"] for w in worker_rows(cfg)] == [pid]
        assert not log_events(sup, "worker.exited")
        shown = jobq(cfg, "show", ret)
        # (on jsonb the result holds the escape's text: shown with its backslash escaped)
        shown_as = "file-\\udc80" if database.name == "sqlite" else "file-\\\\udc80"
        assert shown.returncode == 0 and shown_as in shown.stdout, shown.stderr
        shown_json = json.loads(jobq(cfg, "show", ret, "--json").stdout)
        assert shown_json["job"]["result"] == database.kept("file-\udc80")
        sup.signal(signal.SIGTERM)
        assert sup.wait(30) == 0
    finally:
        sup.close()


# -- case 3: a batch with a job that times out --------------------------------------------------


def test_a_timeout_charges_only_the_job_that_timed_out(database, tmp_path):
    """Fast jobs claimed in one batch with a slow one: their outcomes are committed within
    about 50 ms (the heartbeat thread does it while the slow job runs), so the slow job's
    timeout kill neither re-runs nor charges them."""
    cfg = hostile_config(
        tmp_path,
        supervisor={"workers": 1, "kill_grace": 0.5},
        worker={"max_batch": 8, "batch_wait": 30},
    )
    with JobQueue(config=load(cfg)) as q:
        q.pause()
        first = q.enqueue_many(
            [("hostile:fast", {"i": i}, {"priority": 2, "max_attempts": 2}) for i in range(20)]
        )
        slow = q.enqueue("hostile:slow", {"sleep": 20}, priority=1)
        rest = q.enqueue_many(
            [("hostile:fast", {"i": i}, {"priority": 0, "max_attempts": 2}) for i in range(20)]
        )
        q.resume()
    sup = Running(cfg)
    try:
        row = wait_until(lambda: terminal(cfg, slow), timeout=30, what="the slow job to time out")
        assert row["status"] == "failed" and "timed out after 2 s" in row["error"]
        wait_until(
            lambda: all(terminal(cfg, j) for j in first + rest), timeout=30, what="the fast jobs"
        )
        killed_at = parse_iso(row["completed_at"])
        for j in first + rest:
            r = job_row(cfg, j)
            assert (r["status"], r["attempts"]) == ("completed", 1), (j, dict(r))
        for j in first:  # they had returned before the slow job began: committed before its kill
            assert parse_iso(job_row(cfg, j)["completed_at"]) < killed_at - 1.0
        sup.signal(signal.SIGTERM)
        assert sup.wait(30) == 0
    finally:
        sup.close()


def test_a_death_is_charged_to_the_job_in_hand_only(tmp_path):
    from shared.execution.progress import ProgressWriter, not_in_hand, unstarted

    path = str(tmp_path / "slot.progress")
    assert not_in_hand(path) == []  # no file: unknown, the supervisor charges every running job
    w = ProgressWriter(path)
    w.batch(["a", "b", "c", "d"])
    assert not_in_hand(path) == ["a", "b", "c", "d"] and unstarted(path) == ["a", "b", "c", "d"]
    w.started(3)  # a and b returned, c was running
    assert not_in_hand(path) == ["a", "b", "d"] and unstarted(path) == ["d"]
    w.close()


# -- case 6: enqueue --file ---------------------------------------------------------------------


def test_enqueue_file_validates_every_line_first(database, tmp_path):
    cfg = hostile_config(tmp_path)
    good = [json.dumps({"type": "hostile:fast", "payload": {"i": i}}) for i in range(1500)]

    def count() -> int:
        with JobQueue(config=load(cfg)) as q:
            return sum(q.counts().values())

    for bad, why in [
        ('{"type": "hostile:fast", "key": "\\ud800"}', "valid Unicode"),
        ('{"type": "a\\u0000b"}', "control character"),
        (json.dumps({"type": "x" * 1000}), f"above the limit of {MAX_TYPE_LEN}"),
        ('{"type": "t", "payload": ' + DEEP + "}", "nests too deep"),
        ('{"type": "t", "payload": ' + json.dumps(nested(150)) + "}", "nests deeper than 100"),
        ('{"type": "t", "delay": 3.2e12}', "years 1 to 9999"),
        ('{"type": "t", "priority": 99999999999999999999}', "32 bits"),
    ]:
        path = tmp_path / "jobs.jsonl"
        path.write_text("\n".join(good[:1200] + [bad] + good[1200:]) + "\n")
        err = one_line_error(jobq(cfg, "enqueue", "--file", str(path)))
        assert "line 1201" in err and why in err and "nothing was written" in err, err
        assert count() == 0, bad
    # a lone surrogate in a payload is valid JSON: kept exactly, like any other text
    path.write_text(
        "\n".join(good[:1200] + ['{"type": "hostile:fast", "payload": "\\udc80"}'] + good[1200:])
    )
    r = jobq(cfg, "enqueue", "--file", str(path), "--json")
    assert r.returncode == 0, r.stderr
    ids = json.loads(r.stdout)["ids"]
    assert len(ids) == 1501 and count() == 1501
    with JobQueue(config=load(cfg)) as q:
        assert q.get(ids[1200]).payload == database.kept("\udc80")


def test_cli_prints_one_line_for_hostile_arguments(database, tmp_path):
    cfg = hostile_config(tmp_path)
    one_line_error(jobq(cfg, "enqueue", "t", DEEP))
    one_line_error(jobq(cfg, "enqueue", "t", json.dumps(nested(101))))
    one_line_error(jobq(cfg, "jobs", "--limit", "99999999999999999999"))
    one_line_error(jobq(cfg, "enqueue", "t", "--priority", "99999999999999999999"))
    one_line_error(jobq(cfg, "enqueue", "t", "--delay", "1e300"))
    one_line_error(jobq(cfg, "enqueue", "a\tb"))
    assert jobq(cfg, "jobs", "--limit", "10000000").returncode == 0


# -- case 8 and the time bound ------------------------------------------------------------------


@pytest.mark.parametrize("seconds", [1e300, 3.2e12, float("inf"), float("nan"), -1, 10**400])
def test_retry_after_out_of_range_is_refused_naming_the_limit(seconds):
    with pytest.raises(
        ValueError, match="RetryAfter seconds must be a finite number from 0 to .*9999-12-31"
    ):
        RetryAfter(seconds)


@pytest.mark.parametrize(
    "kw",
    [
        dict(delay=3.2e12),
        dict(delay=1e300),
        dict(delay=10**400),
        dict(run_at=3.2e12),
        dict(run_at=10**400),
        dict(run_at=float("inf")),
    ],
)
def test_enqueue_times_are_bounded_at_year_9999(queue, kw):
    with pytest.raises(ValueError, match="years 1 to 9999"):
        queue.enqueue("t", None, **kw)
    assert queue.counts() == {}


def test_iso_refuses_times_it_cannot_write():
    for ts in (1e300, 3.2e12, float("nan"), float("inf"), -1e14):
        with pytest.raises(ValueError, match="years 1 to 9999"):
            iso(ts)
    assert iso(253_402_300_799.0) == "9999-12-31T23:59:59.000Z"


def test_retry_after_past_the_latest_time_through_a_real_worker(database, tmp_path):
    """RetryAfter(1e300) used to crash the worker inside the commit; RetryAfter(3.2e12) stored
    a six-digit year. Now: an ordinary failure naming the limit (retried after the backoff,
    failed when attempts are used up), and the worker lives on."""
    cfg = hostile_config(tmp_path, supervisor={"workers": 1})
    sup = Running(cfg)
    try:
        wait_until(lambda: len(worker_rows(cfg)) == 1, timeout=30, what="the worker registered")
        pid = worker_rows(cfg)[0]["pid"]
        with JobQueue(config=load(cfg)) as q:
            ids = {
                s: q.enqueue("hostile:do", {"act": "retry_after", "value": s}, max_attempts=2)
                for s in (1e300, 3.2e12, 2.53e11)
            }
            ok = q.enqueue("hostile:do", {"act": "retry_after", "value": 7200}, max_attempts=2)
            wait_until(
                lambda: (
                    all(terminal(cfg, j) for j in ids.values())
                    and job_row(cfg, ok)["attempts"] == 1
                ),
                timeout=20,
                what="the jobs to end",
            )
            for s, j in ids.items():
                job = q.get(j)
                assert job.status == "failed" and job.attempts == 2, (s, job)
                assert "9999-12-31T23:59:59Z" in job.error
            assert "would make job" in q.get(ids[2.53e11]).error
            job = q.get(ok)
            assert (
                job.status == "pending"
                and abs(parse_iso(job.run_at) - parse_iso(job.updated_at) - 7200) < 1
            )
        assert [w["pid"] for w in worker_rows(cfg)] == [pid]
        sup.signal(signal.SIGTERM)
        assert sup.wait(30) == 0
    finally:
        sup.close()


# -- Low: type names, max_result_bytes ----------------------------------------------------------


@pytest.mark.parametrize(
    "jtype, why",
    [
        ("a\x00b", "control character"),
        ("x" * 1_000_000, "above the limit of 200"),
        ("a\nb", "control character"),
        ("a\udc80", "valid Unicode"),
        ("", "non-empty"),
        ("  ", "non-empty"),
        (5, "non-empty string"),
    ],
)
def test_bad_type_names(queue, jtype, why):
    with pytest.raises(ValueError, match=why):
        queue.enqueue(jtype)
    with pytest.raises(ValueError, match=why):
        queue.enqueue_many([(jtype, None)])
    assert queue.counts() == {}
    assert queue.get(queue.enqueue("x" * MAX_TYPE_LEN)).type == "x" * MAX_TYPE_LEN


@pytest.mark.parametrize(
    "field, bad, why",
    [
        ("limit_key", "a\x00b", "NUL"),
        ("limit_key", "\udc80", "lone surrogate"),
        ("payload", "a\x00b", "NUL"),
        ("payload", "k\udc80", "lone surrogate"),
        ("queue", "a\x00b", "control character"),
        ("queue", "q\udc80", "lone surrogate"),
    ],
)
def test_hostile_limit_keys_and_queue_names_are_refused_naming_them(
    tmp_path, make_config, clock, field, bad, why
):
    """A limit key (given, or found by the type's key path in the payload) or a queue name
    with a NUL or a lone surrogate: a ValueError naming the field and the value, on every
    path in, and nothing written (not an outage, not a bare UnicodeEncodeError)."""
    cfg = load(make_config(tmp_path, types={"keyed": {"key": "payload.k"}}))
    named = {"limit_key": "limit_key", "payload": "payload.k", "queue": "queue name"}[field]
    pattern = (
        f"{named} {re.escape(repr(bad))}.*{why}"
        if field != "payload"
        else f"payload.k = {re.escape(repr(bad))} cannot be a limit key.*{why}"
    )
    if field == "payload":
        args, opts = ({"k": bad},), {}
    else:
        args, opts = ({"k": "fine"},), {field: bad}
    with JobQueue(config=cfg, clock=clock) as q:
        app = raw(cfg)
        calls = [
            lambda: q.enqueue("keyed", *args, **opts),
            lambda: q.enqueue("keyed", *args, **opts, key="k1"),
            lambda: q.enqueue("keyed", *args, **opts, conn=getattr(app, "conn", app)),
            lambda: q.enqueue_many([("keyed", *args, opts)]),
            lambda: q.enqueue_many(
                [("keyed", {"k": "ok"}), ("keyed", *args, {**opts, "after": [0]})]
            ),
        ]
        if field == "payload":
            calls.append(lambda: q.enqueue_many([("keyed", *args)]))
        for call in calls:
            with pytest.raises(ValueError, match=pattern):
                call()
        app.close()
        assert q.counts() == {}
    with raw(cfg) as c:
        assert c.execute("SELECT count(*) FROM jobs").fetchone()[0] == 0


def test_max_result_bytes_fails_a_larger_result(database, tmp_path):
    cfg = hostile_config(tmp_path, max_result_bytes=10_000, supervisor={"workers": 1})
    sup = Running(cfg)
    try:
        with JobQueue(config=load(cfg)) as q:
            big = q.enqueue("hostile:do", {"act": "return", "size": 20_000})
            fits = q.enqueue("hostile:do", {"act": "return", "size": 9_990})
            deep = q.enqueue("hostile:do", {"act": "return", "nest": 150})
            wait_until(
                lambda: all(terminal(cfg, j) for j in (big, fits, deep)),
                timeout=20,
                what="jobs to end",
            )
            assert q.get(fits).status == "completed" and q.get(fits).result == "r" * 9_990
            b = q.get(big)
            assert b.status == "failed" and b.result is None
            assert "result of 20002 bytes exceeds max_result_bytes=10000" in b.error
            d = q.get(deep)
            assert d.status == "failed" and f"nests deeper than {MAX_DEPTH} levels" in d.error
        sup.signal(signal.SIGTERM)
        assert sup.wait(30) == 0
    finally:
        sup.close()


def test_max_result_bytes_is_a_config_key_beside_max_payload_bytes():
    from supervisor.cli.template import default_toml

    assert Config().max_result_bytes == Config().max_payload_bytes == 1 << 20
    text = default_toml()
    assert "max_result_bytes = 1048576" in text
    assert text.index("max_payload_bytes =") < text.index("max_result_bytes =")
    shipped = (REPO / "jobq.toml").read_text()
    assert "max_result_bytes = 1048576" in shipped


def test_an_outcome_that_cannot_be_recorded_fails_its_job_instead(
    tmp_path, make_config, monkeypatch
):
    """The last resort on the commit path: anything but a database error raised while recording
    outcomes fails those jobs with the error (the worker lives on)."""
    from shared.execution.handlers import Registry, handler
    from worker.loop import Worker

    @handler("t:ok")
    def ok(payload, job):
        return 1

    cfg = load(make_config(tmp_path))
    w = Worker(cfg, Registry([ok.__jobq_handler__]))
    w.store = open_store(cfg)
    try:
        with JobQueue(config=cfg) as q:
            jid = q.enqueue("t:ok")
            (job,) = w.store.claim(w.owner, w.pid, time.time(), 1)
            w.held.done.append(w.process(job))
            real, calls = w.store.finish_and_claim, []

            def first_call_raises(finishes, *a, **k):
                calls.append([f.kind for f in finishes])
                if len(calls) == 1:
                    raise UnicodeEncodeError("utf-8", "\udc80", 0, 1, "surrogates not allowed")
                return real(finishes, *a, **k)

            monkeypatch.setattr(w.store, "finish_and_claim", first_call_raises)
            w.commit(limit=0, must=True)
            assert calls == [["completed"], ["failed"]]
            job = q.get(jid)
            assert (
                job.status == "failed" and "could not be recorded (UnicodeEncodeError" in job.error
            )
    finally:
        w.store.close()
        w.signals.close()
