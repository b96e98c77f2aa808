"""A queue made at import of a handler module: a real supervisor on each
engine imports ``tests/fixtures/forkqueue.py``, whose module-level ``JobQueue.from_config()``
holds a database connection in the template. Every job and the follow-up it enqueues through
that queue run exactly once, with no protocol error and no timeout in the log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared import JobQueue
from shared.settings.config import load
from tests.proc import Running, wait_until, write_config

JOBS = 20


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request, tmp_path):
    """The config sections naming a fresh database of each engine."""
    if request.param == "sqlite":
        yield {}
        return
    from tests.engines import PostgresEngine

    pg = PostgresEngine(tmp_path)
    try:
        yield {"database": pg.database, "postgres": {"schema": pg.schema}}
    finally:
        pg.drop()


def _events(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_a_queue_made_at_import_works_in_every_worker(tmp_path, database):
    cfg = write_config(
        tmp_path, handlers=["forkqueue"], log_format="json", supervisor={"workers": 3}, **database
    )
    log = tmp_path / "events.log"
    with JobQueue(config=load(str(cfg))) as q:
        parents = q.enqueue_many([("fork:parent", {"log": str(log)}) for _ in range(JOBS)])
    sup = Running(cfg)
    try:
        wait_until(
            lambda: sum(e["event"] == "child" for e in _events(log)) >= JOBS,
            timeout=30,
            what="every follow-up job ran",
        )
        with JobQueue(config=load(str(cfg))) as q:
            wait_until(lambda: q.counts().get("completed", 0) >= 2 * JOBS, what="all completed")
            counts = q.counts()
        events = _events(log)
        ran = [e["job"] for e in events if e["event"] == "parent"]
        assert sorted(ran) == sorted(parents)  # each parent once
        children = [e["job"] for e in events if e["event"] == "child"]
        assert len(children) == len(set(children)) == JOBS  # each follow-up once
        assert (
            counts.get("completed") == 2 * JOBS
            and not counts.get("failed")
            and not counts.get("pending")
        )
        assert len({e["pid"] for e in events}) >= 1
        out = sup.output()
        for bad in (
            "without prior row description",
            "already exists",
            "timed out",
            "Traceback",
            "job.failed",
            "job.retry",
        ):
            assert bad not in out, f"{bad!r} in the supervisor's log:\n{out[-3000:]}"
    finally:
        sup.close()
