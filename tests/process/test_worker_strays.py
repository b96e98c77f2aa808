"""What a handler does to its own process never reaches the worker loop:
a child the handler forked that returns or raises instead of ending with ``os._exit`` ends there
(it never commits, claims or runs a job), so two runs of one job never overlap; a handler that
closes the worker's descriptors makes the worker exit at once (DESCRIPTORS_CLOSED) and its job
runs again as for a dead worker. And a timed-out job is logged once per attempt. Real
supervisors and handler modules (tests/fixtures/strayjobs.py), on both engines."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from shared import ops
from shared import JobQueue
from shared.settings.config import load
from shared.model.exitcodes import ExitCode
from tests.proc import Running, log_events, wait_until, write_config

ENGINES = ["sqlite", "postgresql"]
ENDED = ("completed", "failed", "cancelled")


class Setup:
    """A config for a real supervisor on ``engine`` running the stray handlers; ``close()``
    drops a PostgreSQL schema."""

    def __init__(self, tmp_path: Path, engine: str, **sections) -> None:
        self.pg = None
        extra = {}
        if engine == "postgresql":
            from tests.engines import PostgresEngine

            self.pg = PostgresEngine(tmp_path)
            extra = {"database": self.pg.database, "postgres": {"schema": self.pg.schema}}
        self.config = write_config(
            tmp_path, handlers=["strayjobs"], log_format="json", **extra, **sections
        )
        self.side = str(tmp_path / "runs.jsonl")

    def queue(self) -> JobQueue:
        return JobQueue(config=load(self.config))

    def runs(self) -> list[dict]:
        if not os.path.exists(self.side):
            return []
        return [json.loads(line) for line in open(self.side)]

    def close(self) -> None:
        if self.pg is not None:
            self.pg.drop()

    @contextmanager
    def running(self, workers: int) -> Iterator[Running]:
        """A supervisor on the config, once its ``workers`` have started; everything is gone after."""
        sup = Running(self.config)
        try:
            wait_until(
                lambda: len(worker_pids(sup)) == workers,
                timeout=30,
                what=f"{workers} workers started",
            )
            yield sup
        finally:
            sup.close()
            self.close()

    def run(self, q: JobQueue, type: str, what: str, **payload) -> str:
        """Enqueue a job of ``type`` (logging to the side file) and wait until it ended."""
        job = q.enqueue(type, {"log": self.side, **payload})
        wait_until(lambda: ended(q, [job]), timeout=30, what=what)
        return job


def ended(q: JobQueue, ids: list[str]) -> bool:
    return all(q.get(i).status in ENDED for i in ids)


def worker_pids(sup: Running) -> set[int]:
    return {e["pid"] for e in log_events(sup, "worker.started")}


def owner_pid(owner: str) -> int:
    return int(owner.rsplit(":", 2)[1])


# -- case 4: a handler's forked child ------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_a_handlers_forked_child_never_reaches_the_worker_loop(tmp_path, engine):
    """Children that raise, return or sys.exit() instead of os._exit: each ends where the handler
    returned; the job's runs never overlap, every run and every recorded attempt is a real
    worker's, and the workers keep serving."""
    s = Setup(tmp_path, engine, supervisor={"workers": 2})
    with s.running(2) as sup, s.queue() as q:
        ids = [
            q.enqueue("stray:fork", {"child": mode, "log": s.side})
            for mode in ("raise", "return", "exit")
        ]
        wait_until(lambda: ended(q, ids), timeout=30, what="the forking jobs to end")
        later = [q.enqueue("stray:ok", {"log": s.side}) for _ in range(4)]
        wait_until(lambda: ended(q, later), timeout=30, what="the jobs enqueued after them")
        workers = worker_pids(sup)
        for i in ids + later:
            job = q.get(i)
            assert (job.status, job.attempts) == ("completed", 1), (job.id, job.status, job.error)
            assert {owner_pid(a["owner"]) for a in ops.attempt_history(q.store, i)} <= workers
        runs = s.runs()
        assert {r["pid"] for r in runs} <= workers, runs
        for i, expected in zip(ids, (1, 0, 3)):
            mine = [r for r in runs if r["job"] == i]
            assert [r["event"] for r in mine] == ["start", "end"], mine  # one run, which ended
            assert mine[1]["status"] == expected
        assert not log_events(sup, "worker.exited")  # no worker died or wedged over it
        strays = {e["id"]: e for e in log_events(sup, "job.stray_process")}
        assert {i: strays[i]["code"] for i in ids} == dict(zip(ids, (1, 0, 3)))
        assert "the child failed" in strays[ids[0]]["error"] and strays[ids[0]]["parent"] in workers


# -- case 13: a handler that closes the worker's descriptors -------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_a_handler_that_closes_the_workers_descriptors(tmp_path, engine):
    """``os.closerange(3, 1000)`` in a handler: the worker notices and exits at once with
    DESCRIPTORS_CLOSED, touching nothing (no phantom reload from a reused descriptor); the job
    runs again as for a dead worker, and the other jobs keep running."""
    s = Setup(tmp_path, engine, supervisor={"workers": 2})
    with s.running(2) as sup, s.queue() as q:
        job = s.run(q, "stray:closefds", "the job to end")
        later = [q.enqueue("stray:ok", {"log": s.side}) for _ in range(4)]
        wait_until(lambda: ended(q, later), timeout=30, what="the jobs enqueued after it")
        got = q.get(job)
        assert (got.status, got.attempts, got.result) == ("completed", 2, "ok")
        first = ops.attempt_history(q.store, job)[0]
        assert first["outcome"] == "retry" and "descriptors_closed" in first["error"]
        assert all(q.get(i).status == "completed" for i in later)
        culprit = next(r["pid"] for r in s.runs() if r["job"] == job and r["attempt"] == 1)
        exits = [e for e in log_events(sup, "worker.exited") if e["pid"] == culprit]
        assert (
            len(exits) == 1
            and f"exited with {int(ExitCode.DESCRIPTORS_CLOSED)} " in exits[0]["how"]
        )
        said = log_events(sup, "worker.descriptors_closed")
        assert len(said) == 1 and said[0]["pid"] == culprit and said[0]["id"] == job
        assert not log_events(sup, "config.reloaded")
        assert not log_events(sup, "worker.write_failed")
        assert "Traceback" not in sup.output()


# -- a timed-out job is logged once per attempt -------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_a_timed_out_job_is_logged_once(tmp_path, engine):
    """A handler that swallows its JobTimeout keeps its worker until kill_grace after the
    timeout ends it: the supervisor's maintenance (every 0.1 s here) sees the timeout every round
    meanwhile, and logs ``job.timeout`` once for the attempt."""
    s = Setup(tmp_path, engine, supervisor={"workers": 1, "kill_grace": 2})
    with s.running(1) as sup, s.queue() as q:
        job = s.run(q, "stray:stubborn", "the job to time out")
        assert q.get(job).status == "failed" and "timed out" in q.get(job).error
        wait_until(lambda: log_events(sup, "worker.exited"), timeout=10, what="the worker killed")
        timeouts = [e for e in log_events(sup, "job.timeout") if e["id"] == job]
        assert len(timeouts) == 1 and timeouts[0]["attempt"] == 1
