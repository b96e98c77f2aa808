"""A producer that knows the configuration checks the job types it enqueues:
``JobQueue.from_config`` and ``jobq enqueue`` warn once per type no configured handler module
serves, and refuse it with ``strict_types = true``, on both engines."""
from __future__ import annotations

import json
import warnings

import pytest

from shared.api import JobQueue
from shared.exitcodes import ExitCode
from shared.typecheck import UnservedTypeWarning
from tests.proc import FIXTURES, write_config
from tests.unit.cli.test_cli import jobq, ok


@pytest.fixture
def config_of(engine, tmp_path, monkeypatch):
    """Write a jobq.toml on ``engine``'s database serving the ``opsjobs`` fixture types."""
    monkeypatch.syspath_prepend(FIXTURES)
    db = engine.config()

    def write(**keys):
        extra = {"postgres": {"schema": db.postgres.schema}} if db.database.startswith("postgres") else {}
        return write_config(tmp_path, database=db.database, handlers=["opsjobs"], **extra, **keys)
    return write


def test_from_config_warns_once_per_type_no_handler_serves(config_of):
    path = config_of()
    with JobQueue.from_config(str(path)) as q:
        with pytest.warns(UnservedTypeWarning, match=r"job type 'ops:okk' is served by none of .*handlers key in "
                                                     r".*jobq.toml \(opsjobs\) \(did you mean 'ops:ok'\?\)"):
            first = q.enqueue("ops:okk", {})
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            q.enqueue("ops:okk", {})                       # once per type
            q.enqueue("ops:ok", {})                        # served: silent
            q.enqueue_many([("ops:fail", {})])
        assert q.get(first).status == "pending" and sum(q.counts().values()) == 4


def test_from_config_with_strict_types_refuses_the_type_and_writes_nothing(config_of):
    path = config_of(strict_types=True)
    with JobQueue.from_config(str(path)) as q:
        with pytest.raises(ValueError, match=r"job type 'ops:nope' is served by none of .*\(opsjobs\).*strict_types"):
            q.enqueue("ops:nope", {})
        with pytest.raises(ValueError, match=r"enqueue_many item 1: job type 'ops:nope'"):
            q.enqueue_many([("ops:ok", {}), ("ops:nope", {})])
        assert q.counts() == {}
        assert q.get(q.enqueue("ops:ok", {})).type == "ops:ok"


def test_a_queue_opened_without_the_config_file_does_not_check(config_of):
    with JobQueue(config=JobQueue.from_config(str(config_of(strict_types=True))).config) as q:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            q.enqueue("anything:at-all", {})


def test_jobq_enqueue_warns_on_stderr_and_refuses_with_strict_types(tmp_path):
    cfg = write_config(tmp_path, handlers=["opsjobs"])
    r = jobq(cfg, "enqueue", "ops:okk", "{}")
    job_id = ok(r).strip()
    assert "jobq: warning: job type 'ops:okk' is served by none of" in r.stderr and "did you mean 'ops:ok'" in r.stderr
    assert r.stderr.count("\n") == 1
    assert "warning" not in jobq(cfg, "enqueue", "ops:ok").stderr
    ok(jobq(cfg, "config", "set", "strict_types", "true"))
    r = jobq(cfg, "enqueue", "ops:okk", "{}")
    assert r.returncode == ExitCode.USAGE, r.stderr
    assert "job type 'ops:okk'" in r.stderr and "handlers key" in r.stderr and "strict_types = true" in r.stderr
    r = jobq(cfg, "enqueue", "--file", "-", stdin='{"type": "ops:ok"}\n{"type": "ops:okk"}\n')
    assert r.returncode == ExitCode.USAGE and "line 2: job type 'ops:okk'" in r.stderr
    assert sorted(j["type"] for j in json.loads(ok(jobq(cfg, "jobs", "--json")))) == ["ops:ok", "ops:okk"]
    assert job_id
