"""A task's options in code, on each engine, served by a real supervisor: ``retry_for`` /
``no_retry_for`` decide what is retried (and ``.using()``'s replace the task's), the config's
``[types]`` back-off wins over the task's, a ``[types] key`` naming a parameter finds the
customer however it was passed, and the supervisor runs the schedules declared in code beside
the file's, the file's entry winning on a shared name.

The tasks are tests/fixtures/optjobs.py, imported as ``optjobs``."""

from __future__ import annotations

import sys
import time

import pytest

import shared.producer.tasks
from jobq import JobFailed, JobQueue
from shared.engines import open_store
from shared.execution.handlers import ATTR
from shared.ops.jobs import list_jobs
from shared.settings import schedule
from shared.settings.config import load
from tests.proc import FIXTURES, wait_until

if FIXTURES not in sys.path:
    sys.path.insert(0, FIXTURES)
import optjobs  # noqa: E402

pytestmark = pytest.mark.engines

TYPES = {
    "optjobs.slow_backoff": {
        "backoff_base": 0,
        "backoff_max": 0,
    },  # the file beats the code's 300 s
    "optjobs.charge": {"key": "customer_id", "concurrency_per_key": 1},
}
FILE_ENTRY = {
    "name": "optjobs.overridden",
    "type": "optjobs.overridden",
    "cron": "* * * * *",
    "payload": {"args": ["from the file"]},
}


@pytest.fixture
def served(make_config, sup_factory, tmp_path, monkeypatch):
    """A supervisor serving optjobs (its schedules anchored two minutes back, so a tick is due
    at its first round), and a queue on its database."""
    path = make_config(
        tmp_path,
        handlers=["optjobs"],
        types=TYPES,
        schedule=[FILE_ENTRY],
        retry={"backoff_base": 0, "backoff_max": 0},
        worker={"poll_interval": 0.05},
        supervisor={"workers": 2, "maintenance_interval": 0.1},
    )
    monkeypatch.setattr(shared.producer.tasks, "_configured", None)
    config = load(path)
    _anchor_back(config, 120.0)
    sup_factory(path)
    q = JobQueue(config=config)
    yield q
    q.close()


def _anchor_back(config, seconds: float) -> None:
    """Mark each schedule as first seen ``seconds`` ago (as a supervisor would have)."""
    entries = [getattr(optjobs.tick, ATTR).schedule, *config.schedules]
    store = open_store(config)
    try:
        for spec in entries:
            store.run_schedule(
                spec.name, schedule.fingerprint(spec), time.time() - seconds, lambda _: ([], None)
            )
    finally:
        store.close()


def test_retry_for_retries_what_it_names_and_fails_the_rest_at_once(served):
    q = served
    assert optjobs.charge.using(queue=q).enqueue("c1", "gateway").wait(timeout=60) == 2
    for error, rule in (("value", "retry_for"), ("declined", "no_retry_for")):
        handle = optjobs.charge.using(queue=q).enqueue("c1", error)
        with pytest.raises(JobFailed) as info:
            handle.wait(timeout=60)
        assert info.value.job.attempts == 1, error
        assert f"is not covered by {rule}" in info.value.traceback or (
            f"covered by {rule}" in info.value.traceback
        )
    # the job's own rule (.using()) replaces the task's: a ValueError is now retried
    again = optjobs.charge.using(queue=q, retry_for=(ValueError, optjobs.GatewayDown))
    assert again.enqueue("c2", "value").wait(timeout=60) == 2


def test_the_config_back_off_wins_over_the_tasks(served):
    # the task says 300 s (600 s after the first failure); [types] says 0: it retries at once
    assert optjobs.slow_backoff.using(queue=served).enqueue(7).wait(timeout=30) == 7


def test_a_key_naming_a_parameter_finds_it_however_it_was_passed(served):
    q = served
    by_position = optjobs.charge.using(queue=q).enqueue("cus_1")
    by_keyword = optjobs.charge.using(queue=q).enqueue(customer_id="cus_2")
    assert [by_position.wait(timeout=60), by_keyword.wait(timeout=60)] == [1, 1]
    assert q.get(by_position.id).limit_key == "cus_1"
    assert q.get(by_keyword.id).limit_key == "cus_2"


def test_the_supervisor_runs_the_schedules_in_code_the_file_winning_a_shared_name(served):
    q = served

    def done(jtype):
        return [q.get(r["id"]) for r in list_jobs(q.store, "completed", jtype)]

    wait_until(lambda: done("optjobs.tick") and done("optjobs.overridden"), 60)
    assert done("optjobs.tick")[0].result == "from code"
    assert done("optjobs.overridden")[0].result == "from the file"  # the [[schedule]] entry's
