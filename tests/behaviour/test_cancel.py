"""Stopping a running job, with real supervisors and workers on each engine: a
timeout raises JobTimeout in the handler (its ``finally`` runs, the worker lives on), a handler
that swallows it is killed ``kill_grace`` later; ``jobq cancel`` of a running job ends it
``cancelled`` through ``check_cancelled()`` or, after ``cancel_grace``, by killing its worker's
process group; a cancel racing a completion leaves exactly one of the two; progress reported by
a handler is seen by ``jobq show``."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from shared import JobQueue, ops
from shared.producer.cancels import CancelResult
from shared.settings.config import load
from shared.model.exitcodes import ExitCode
from shared.model.job import Finish
from tests.proc import env, events, log_events, pid_gone, wait_until, write_config

pytestmark = pytest.mark.engines  # the tests that use database (or sup_factory) run on each engine


def config(folder: Path, **sections) -> Path:
    sections.setdefault("handlers", ["canceljobs"])
    sections.setdefault("log_format", "json")
    return write_config(folder, **sections)


def jobq(cfg: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "jobq", "--config", str(cfg), *args],
        capture_output=True,
        text=True,
        env=env(),
        cwd=str(cfg.parent),
        timeout=60,
    )


def seen(log: Path, jid: str, what: str) -> list[dict]:
    return [e for e in events(log) if e["job"] == jid and e["event"].startswith(what)]


def test_a_timeout_raises_in_the_handler_and_its_finally_runs(tmp_path, sup_factory):
    """A 20 s handler with a 2 s timeout sees JobTimeout within 2.5 s, its finally runs, the job
    fails "timed out after 2 s" once (one log line) and the worker goes on; an async handler's
    task is cancelled at its timeout the same way."""
    cfg = config(tmp_path, supervisor={"workers": 2, "kill_grace": 5})
    log = tmp_path / "events.log"
    sup = sup_factory(cfg)
    with JobQueue(config=load(cfg)) as q:
        jid = q.enqueue("cancel:slow", {"log": str(log)})
        aid = q.enqueue("cancel:slow_async", {"log": str(log)})
        wait_until(
            lambda: q.get(jid).status == q.get(aid).status == "failed",
            timeout=20,
            what="the jobs timed out",
        )
        job, ajob = q.get(jid), q.get(aid)
    start, timeout = seen(log, jid, "start")[0], seen(log, jid, "timeout")[0]
    assert timeout["t"] - start["t"] < 2.5
    assert [e["event"] for e in events(log) if e["job"] == jid] == ["start", "timeout", "finally"]
    assert "timed out after 2 s" in job.error and "JobTimeout" in job.error
    lines = [e for e in log_events(sup, "job.timeout") if e["id"] == jid]
    assert len(lines) == 1 and lines[0]["pid"] == start["pid"]
    assert not pid_gone(start["pid"])  # not killed: the handler stopped itself
    assert not log_events(sup, "worker.exited")
    assert "timed out after 2 s" in ajob.error
    assert seen(log, aid, "finally")[0]["t"] - seen(log, aid, "start")[0]["t"] < 2.5


def test_a_handler_that_swallows_its_timeout_is_killed_after_kill_grace(tmp_path, sup_factory):
    cfg = config(tmp_path, supervisor={"workers": 1, "kill_grace": 1})
    log = tmp_path / "events.log"
    sup = sup_factory(cfg)
    with JobQueue(config=load(cfg)) as q:
        jid = q.enqueue("cancel:swallow", {"log": str(log)})
        wait_until(lambda: q.get(jid).status == "failed", timeout=20, what="the job killed")
        assert "timed out after 1 s" in q.get(jid).error
    worker = seen(log, jid, "start")[0]["pid"]
    assert seen(log, jid, "swallowed")
    wait_until(lambda: pid_gone(worker), timeout=5, what="the worker killed")
    assert len([e for e in log_events(sup, "job.timeout") if e["id"] == jid]) == 1
    wait_until(
        lambda: [p for p in sup.workers() if p != worker], timeout=10, what="the worker replaced"
    )


def test_cancel_of_a_running_job_that_checks_ends_it_cancelled_within_a_second(
    tmp_path, sup_factory, monkeypatch
):
    hooks = tmp_path / "hooks.log"
    monkeypatch.setenv("JOBQ_TEST_HOOK_LOG", str(hooks))
    cfg = config(tmp_path, supervisor={"workers": 1})
    log = tmp_path / "events.log"
    sup = sup_factory(cfg)
    with JobQueue(config=load(cfg)) as q:
        jid = q.enqueue("cancel:loop", {"log": str(log)})
        wait_until(lambda: seen(log, jid, "start"), what="the job running")
        out = jobq(cfg, "cancel", jid)
        asked = time.monotonic()
        assert out.returncode == 0, out.stderr
        wait_until(lambda: q.get(jid).status == "cancelled", timeout=5, what="the job cancelled")
        took = time.monotonic() - asked
        job = q.get(jid)
        assert took < 1.0, f"cancelled {took:.2f} s after jobq cancel"
        assert "JobCancelled" in job.error and job.attempts == 1
        assert [r["outcome"] for r in ops.attempt_history(q.store, jid)] == ["cancelled"]
        assert not q.cancel(jid)  # ended: nothing to cancel
    assert seen(log, jid, "finally")
    wait_until(
        lambda: hooks.exists() and jid in hooks.read_text(), timeout=5, what="the on_cancelled hook"
    )
    assert len(seen(log, jid, "start")) == 1  # never retried
    assert [e["id"] for e in log_events(sup, "job.cancelled")] == [jid]


def test_a_handler_that_never_checks_is_killed_after_cancel_grace(tmp_path, sup_factory):
    """Its worker and the worker's child process are gone, the job ends cancelled within
    cancel_grace + 1 s, never runs again, and a new worker takes the slot."""
    cfg = config(tmp_path, supervisor={"workers": 1}, worker={"cancel_grace": 1})
    log = tmp_path / "events.log"
    sup = sup_factory(cfg)
    with JobQueue(config=load(cfg)) as q:
        jid = q.enqueue("cancel:deaf", {"log": str(log)})
        started = wait_until(lambda: seen(log, jid, "child"), what="the job running")[0]
        worker, child = started["pid"], int(started["event"].split()[1])
        assert q.cancel(jid)
        asked = time.monotonic()
        wait_until(lambda: q.get(jid).status == "cancelled", timeout=10, what="the job cancelled")
        took = time.monotonic() - asked
        assert took < 1 + 1.0, f"cancelled {took:.2f} s after the request (cancel_grace 1 s)"
        assert "cancel_grace" in q.get(jid).error
        wait_until(
            lambda: pid_gone(worker) and pid_gone(child), timeout=5, what="worker and child killed"
        )
        wait_until(
            lambda: [p for p in sup.workers() if p != worker],
            timeout=10,
            what="the worker replaced",
        )
        assert q.get(jid).status == "cancelled" and len(seen(log, jid, "child")) == 1
        assert [r["outcome"] for r in ops.attempt_history(q.store, jid)] == ["cancelled"]


def test_progress_reported_by_a_handler_is_seen_by_jobq_show_within_a_second(tmp_path, sup_factory):
    """... and a cancel cancels an async handler's task too (its finally runs)."""
    cfg = config(tmp_path, supervisor={"workers": 2})
    log = tmp_path / "events.log"
    sup_factory(cfg)
    with JobQueue(config=load(cfg)) as q:
        handle = q.handle(q.enqueue("cancel:loop", {"log": str(log)}))
        other = q.handle(q.enqueue("cancel:loop_async", {"log": str(log)}))
        wait_until(lambda: seen(log, handle.id, "start"), what="the job running")
        began = time.monotonic()
        wait_until(lambda: handle.progress() is not None, timeout=5, what="progress stored")
        took = time.monotonic() - began
        assert took < 1.0, f"progress stored {took:.2f} s after the job started"
        shown = jobq(cfg, "show", handle.id).stdout
        assert "progress" in shown and "step" in shown and "%" in shown
        got = handle.progress()
        assert set(got) == {"fraction", "note", "step"} and 0 <= got["fraction"] <= 1
        assert got["note"] == f"step {got['step']}"
        wait_until(lambda: seen(log, other.id, "start"), what="the async job running")
        assert handle.cancel() and other.cancel()
        wait_until(
            lambda: handle.status() == other.status() == "cancelled",
            timeout=5,
            what="the jobs cancelled",
        )
    assert seen(log, other.id, "finally")


def test_the_last_progress_report_before_a_handler_ends_stays_with_the_job(tmp_path, sup_factory):
    """Jobs that report and end within a few milliseconds (a batch's completions, a failure,
    async jobs) keep their last report, though no check-in ran while they did."""
    cfg = config(tmp_path, supervisor={"workers": 1})
    sup_factory(cfg)
    with JobQueue(config=load(cfg)) as q:
        ids = {
            f"{kind} {n}": q.enqueue(kind, f"{kind} {n}")
            for n in range(12)
            for kind in ("cancel:report", "cancel:report_async", "cancel:report_aio")
        }
        ids["raise"] = q.enqueue("cancel:report", "raise")
        wait_until(
            lambda: all(q.get(i).status in ("completed", "failed") for i in ids.values()),
            timeout=30,
            what="the jobs ended",
        )
        notes = {p: (q.get(i).progress or {}).get("note") for p, i in ids.items()}
        assert notes == {p: f"last of {p}" for p in ids}
        assert q.get(ids["raise"]).status == "failed"


def race(tmp_path: Path, sup_factory, n: int) -> None:
    """Cancel ``n`` jobs of 0-300 ms each at random moments of their run: each ends exactly one
    of completed or cancelled, and none ran twice (attempt history, and the handlers' log)."""
    cfg = config(tmp_path, supervisor={"workers": 4}, worker={"max_batch": 1})
    log = tmp_path / "events.log"
    rng = random.Random(27)
    sup_factory(cfg)
    with JobQueue(config=load(cfg)) as q:
        ids = q.enqueue_many(
            [("cancel:quick", {"log": str(log), "ms": rng.uniform(0, 300)}) for _ in range(n)]
        )
        asked: set[str] = set()

        def cancel_running() -> None:
            with JobQueue(config=load(cfg)) as mine:
                while len(asked) < n and not stop.is_set():
                    running = [j.id for j in mine.store.running() if j.id not in asked]
                    for jid in running:
                        time.sleep(rng.uniform(0, 0.05))
                        mine.cancel(jid)
                        asked.add(jid)
                    time.sleep(0.005)

        stop = threading.Event()
        canceller = threading.Thread(target=cancel_running)
        canceller.start()
        try:
            wait_until(
                lambda: all(
                    s in ("completed", "cancelled") for s in ops.statuses(q.store, ids).values()
                ),
                timeout=30 + n * 0.1,
                what="every job ended",
                interval=0.2,
            )
        finally:
            stop.set()
            canceller.join()
        final = ops.statuses(q.store, ids)
        assert set(final.values()) <= {"completed", "cancelled"}
        assert "completed" in final.values() and "cancelled" in final.values()
        for jid in ids:
            history = ops.attempt_history(q.store, jid)
            assert [r["outcome"] for r in history] == [final[jid]], jid
    starts = [e["job"] for e in events(log) if e["event"] == "start"]
    assert len(starts) == len(set(starts)) == n


def test_cancels_racing_completions_leave_exactly_one_outcome(tmp_path, sup_factory):
    race(tmp_path, sup_factory, 60)


@pytest.mark.slow
def test_a_thousand_cancels_racing_completions(tmp_path, sup_factory):
    race(tmp_path, sup_factory, 1000)


# -- what a cancel reports: ended apart from asked to stop -----------------------------------------

FAKE_OWNER = "elsewhere:1:1"  # a worker of another host, fresh: nothing here judges it


def _running(q: JobQueue, n: int) -> list[str]:
    """``n`` jobs claimed by a worker of another host (no supervisor runs here)."""
    ids = q.enqueue_many([("cancel:quick", {}) for _ in range(n)])
    claimed = q.store.claim(FAKE_OWNER, 1, time.time(), n)
    assert sorted(j.id for j in claimed) == sorted(ids)
    return ids


def _finish_once_asked(cfg: Path, outcomes: dict[str, str]) -> threading.Thread:
    """A thread that ends each job of ``outcomes`` (``completed`` or ``cancelled``) as its worker
    would, once the job has a cancel request (so the cancel under test has run first)."""

    def run() -> None:
        with JobQueue(config=load(cfg)) as mine:
            for jid, how in outcomes.items():
                wait_until(
                    lambda: mine.get(jid).cancel_requested_at, timeout=30, what="the cancel request"
                )
                result = '"done"' if how == "completed" else "stopped"
                assert mine.store.finish(Finish(how, jid, 1, result), FAKE_OWNER, time.time())

    t = threading.Thread(target=run)
    t.start()
    return t


def test_cancel_returns_cancelled_requested_or_unchanged_and_waits_for_the_outcome(
    tmp_path, database
):
    """``q.cancel``: a pending job CANCELLED, a running one only REQUESTED (both truthy, as the
    True they replace), a missing or ended one UNCHANGED (falsy); ``wait=True`` gives the
    running job's outcome: CANCELLED, FINISHED_FIRST when it completed first, REQUESTED when the
    timeout passed."""
    cfg = config(tmp_path)
    with JobQueue(config=load(cfg)) as q:
        first, later, stops, deaf = _running(q, 4)
        pending = q.enqueue("cancel:quick", {})
        assert q.cancel(pending) is CancelResult.CANCELLED
        assert q.cancel(pending) is CancelResult.UNCHANGED
        got = q.cancel(first)
        assert got is CancelResult.REQUESTED and got and got == "requested"
        assert q.get(first).status == "running"
        assert not q.cancel("f" * 32) and q.cancel("f" * 32) is CancelResult.UNCHANGED
        # (a job with no earlier request: the finisher ends it only once the waiting cancel asked)
        finisher = _finish_once_asked(cfg, {later: "completed", stops: "cancelled"})
        try:
            waited = q.cancel(later, wait=True, timeout=30)
            assert waited is CancelResult.FINISHED_FIRST and not waited
            assert q.handle(stops).cancel(wait=True, timeout=30) is CancelResult.CANCELLED
        finally:
            finisher.join()
        assert q.cancel(deaf, wait=True, timeout=0.2) is CancelResult.REQUESTED
        ended = [q.get(i).status for i in (later, stops, deaf)]
        assert ended == ["completed", "cancelled", "running"]


def test_jobq_cancel_says_asked_to_stop_for_a_running_job_and_waits_with_wait(tmp_path, database):
    """``jobq cancel``: ``cancelled`` only for what ended so; a running job is ``asked to stop``
    (text and --json); ``--wait`` reports each asked job's end (exit 10 for one that completed
    first) and exits 1 when its timeout passes with one still running."""
    cfg = config(tmp_path)
    with JobQueue(config=load(cfg)) as q:
        running, completes, stops, deaf = _running(q, 4)
        pending = q.enqueue("cancel:quick", {})
        r = jobq(cfg, "cancel", pending, running)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines() == [
            f"cancelled {pending}",
            f"asked to stop {running} (running: it ends cancelled when its handler stops, "
            "unless it completes first)",
        ]
        data = json.loads(jobq(cfg, "cancel", running, "--json").stdout)
        assert data == {
            "cancelled": [],
            "requested": [running],
            "finished_first": {},
            "skipped": {},
        }
        finisher = _finish_once_asked(cfg, {completes: "completed", stops: "cancelled"})
        try:
            r = jobq(cfg, "cancel", completes, stops, "--wait", "--timeout", "60", "--json")
        finally:
            finisher.join()
        assert r.returncode == ExitCode.NOT_FOUND, r.stderr
        assert json.loads(r.stdout) == {
            "cancelled": [stops],
            "requested": [],
            "finished_first": {completes: "completed"},
            "skipped": {},
        }
        r = jobq(cfg, "cancel", deaf, "--wait", "--timeout", "0.2")
        assert r.returncode == ExitCode.ERROR and "1 jobs still running after 0.2 s" in r.stderr
        assert f"asked to stop {deaf}" in r.stdout
        assert jobq(cfg, "cancel", deaf, "--timeout", "1").returncode == ExitCode.USAGE
