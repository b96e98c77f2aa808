"""A producer that knows the configuration checks the job types it enqueues:
``JobQueue.from_config`` against what the running supervisors recorded, importing no handler
module; ``jobq enqueue`` and ``strict_types = true`` against the imported handler modules; a
type none serves is warned about once, or refused when strict, on both engines."""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

import pytest

from shared.producer.api import JobQueue
from shared.model.exitcodes import ExitCode
from shared.ops.served import record_served
from shared.producer.typecheck import UnservedTypeWarning
from tests.proc import FIXTURES, write_config
from tests.unit.cli.test_cli import jobq, ok


@pytest.fixture
def config_of(engine, tmp_path, monkeypatch):
    """Write a jobq.toml on ``engine``'s database serving the ``opsjobs`` fixture types."""
    monkeypatch.syspath_prepend(FIXTURES)
    db = engine.config()

    def write(**keys):
        extra = (
            {"postgres": {"schema": db.postgres.schema}}
            if db.database.startswith("postgres")
            else {}
        )
        keys = {"database": db.database, "handlers": ["opsjobs"], **extra, **keys}
        return write_config(tmp_path, **keys)

    return write


def imported(name: str, marks) -> bool:
    """Did this process import the fixture module ``name`` (it writes its pid to ``marks``)?"""
    return name in sys.modules or (marks.exists() and str(os.getpid()) in marks.read_text().split())


@pytest.fixture
def marks(tmp_path, monkeypatch):
    """The file the ``importmark`` fixture module writes each importing process's pid to."""
    path = tmp_path / "import-marks"
    monkeypatch.setenv("JOBQ_TEST_IMPORT_MARKS", str(path))
    monkeypatch.delitem(sys.modules, "importmark", raising=False)
    return path


def record_supervisor(q, token, queues, modules=("opsjobs", "importmark")):
    """Do what a booted supervisor does (supervisor.duties): its process row, then its record."""
    q.store.register_process(token, "supervisor", os.getpid(), "h", time.time())
    record_served(q.store, token, list(modules), queues)


def test_from_config_imports_no_handler_module_and_says_nothing_while_no_supervisor_runs(
    config_of, marks
):
    path = config_of(handlers=["opsjobs", "importmark"])
    with JobQueue.from_config(str(path)) as q:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ids = [q.enqueue("ops:okk", {}), q.enqueue("mark:ok", {})]
            ids += q.enqueue_many([("ops:ok", {})])
        assert [q.get(i).status for i in ids] == ["pending"] * 3
    assert not imported("importmark", marks) and not imported("opsjobs", marks)


def test_from_config_warns_once_per_type_the_running_supervisors_do_not_serve(config_of, marks):
    path = config_of(handlers=["opsjobs", "importmark"])
    with JobQueue.from_config(str(path)) as q:
        record_served(q.store, "gone:1:2", ["old"], {"ops:okk": None})  # no process row: ignored
        record_supervisor(q, "h:1:1", {"ops:ok": None, "ops:fail": None, "mark:ok": "marked"})
        unserved = (
            r"job type 'ops:okk' is served by none of the handler modules the running "
            r"supervisors loaded \(opsjobs, importmark\) \(did you mean 'ops:ok'\?\)"
        )
        with pytest.warns(UnservedTypeWarning, match=unserved):
            first = q.enqueue("ops:okk", {})
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            q.enqueue("ops:okk", {})  # once per type
            q.enqueue("ops:ok", {})  # served: silent
            q.enqueue_many([("ops:fail", {})])
            marked = q.enqueue("mark:ok", {})  # its handler's queue, from the record
        assert q.get(first).status == "pending" and sum(q.counts().values()) == 5
        assert q.get(marked).queue == "marked"
        record_supervisor(q, "h:2:2", {"ops:new": None})  # a supervisor started since: read again
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            q.enqueue("ops:new", {})
    assert not imported("importmark", marks)


def test_from_config_with_strict_types_refuses_the_type_and_writes_nothing(config_of):
    path = config_of(strict_types=True)
    with JobQueue.from_config(str(path)) as q:
        with pytest.raises(
            ValueError,
            match=r"job type 'ops:nope' is served by none of .*\(opsjobs\).*strict_types",
        ):
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
    assert (
        "jobq: warning: job type 'ops:okk' is served by none of" in r.stderr
        and "did you mean 'ops:ok'" in r.stderr
    )
    assert r.stderr.count("\n") == 1
    assert "warning" not in jobq(cfg, "enqueue", "ops:ok").stderr
    ok(jobq(cfg, "config", "set", "strict_types", "true"))
    r = jobq(cfg, "enqueue", "ops:okk", "{}")
    assert r.returncode == ExitCode.USAGE, r.stderr
    assert (
        "job type 'ops:okk'" in r.stderr
        and "handlers key" in r.stderr
        and "strict_types = true" in r.stderr
    )
    r = jobq(cfg, "enqueue", "--file", "-", stdin='{"type": "ops:ok"}\n{"type": "ops:okk"}\n')
    assert r.returncode == ExitCode.USAGE and "line 2: job type 'ops:okk'" in r.stderr
    assert sorted(j["type"] for j in json.loads(ok(jobq(cfg, "jobs", "--json")))) == [
        "ops:ok",
        "ops:okk",
    ]
    assert job_id
