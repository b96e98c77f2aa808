"""The Django Tasks backend contract on jobq's backend, on each engine: the cases of
tests/fixtures/djtasks/contract.py, run by ``python -m djtasks.contract`` in a process of its
own (Django is never set up in the pytest process: test_django_recipe.py sets it up with other
settings). Tasks run there by ``JobQueue.drain()``; a real supervisor is the point of
test_django_backend.py, not of these.

The cases follow the behaviours that the django-tasks project's own backend tests check (its
test_tasks.py, test_dummy_backend.py, test_immediate_backend.py and the database backend's
test_database_backend.py), written again for jobq:

Covered:
- tasks and ``using()``: the decorator, priority, queue name and run_after (each checked by
  the backend: ``QUEUES``, the priority range, an aware run_after), unknown and missing
  backends, ``call``/``acall``, module-level functions only, ``takes_context`` needing a
  ``context`` argument, names and module paths, no backends at all;
- enqueue (sync and async): a READY result, its task, arguments, times and attempts, the
  ``task_enqueued`` signal sent once with the result, arguments that are not JSON refused,
  ``QUEUES`` checked at enqueue;
- results: ``get_result``/``aget_result`` equal to what enqueue gave (``enqueued_at`` read from
  the stored row both times; ``refresh()`` changes nothing before the task runs), the task as
  ``using()`` set it (priority, run_after, queue), a missing id or one that is not a task's
  raising ``TaskResultDoesNotExist``, another task's result raising ``TaskResultMismatch``,
  run_after with and without ``USE_TZ``;
- transactions: the job is written inside ``atomic()`` (another connection sees it only at the
  commit), and ``get_result``/``refresh`` inside that transaction find it;
- runs: success with its return value and times in order, a batch of good and failing tasks,
  failures by ``ValueError``, ``SystemExit`` and ``KeyboardInterrupt`` with their class and a
  traceback ending as ``format_exception`` ends it (final newline included, no jobq sentence;
  jobq keeps its own in the job's error), a nested exception, a return value that is not
  JSON, run_after in the future not run, ``TaskContext`` (the result's id, the attempt);
- ``check()``: no message for a sound backend, an error for a ``QUEUES`` name jobq cannot use.

Left out, and why:
- the dummy backend's ``results`` list and ``clear()``, the immediate backend's refusal of
  run_after and get_result, its logging through the ``django_tasks`` logger: those backends'
  own internals (jobq logs its events through its own loggers);
- the database backend's model (``DBTaskResult``, its querysets, indexes, row locks, exclusive
  transactions, uuid ids and ``id_function``), its query counts and its ``db_worker`` and
  ``prune_db_task_results`` commands with their options, signals and process handling: that
  backend's internals and commands. jobq's supervisor, ``jobq run --queues``, purge and
  retention have tests of their own; a worker for one queue leaving another queue's task is in
  test_django_backend.py, with a real supervisor;
- ``metadata``: not in the django-tasks version the backend supports;
- the example project's views: tests/process/test_django_backend.py runs a project's requests.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("django", reason="Django is in the test extra: pip install -e '.[test]'")
if importlib.util.find_spec("django.tasks") is None:  # Django 6 has it; 5.2 needs the backport
    pytest.importorskip("django_tasks", reason="the django-tasks backport is in the test extra")

from tests.proc import FIXTURES, REPO, write_config  # noqa: E402

CASES = 48  # the cases of djtasks.contract: none may go missing unnoticed


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_the_backend_keeps_the_django_tasks_contract(tmp_path, engine):
    extra: dict = {}
    django_db = str(tmp_path / "q.db")  # write_config's database, beside jobq.toml
    pg = None
    if engine == "postgresql":
        from tests.engines import PostgresEngine

        pg = PostgresEngine(tmp_path)
        extra = {"database": pg.database, "postgres": {"schema": pg.schema}}
        django_db = pg.database
    config = write_config(
        tmp_path,
        handlers=["jobq.django.worker", "djtasks.contract_tasks"],
        retry={"max_attempts": 1, "backoff_base": 0, "backoff_max": 0},
        **extra,
    )
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="djtasks.settings",
        DJTASKS_DB=django_db,
        DJTASKS_JOBQ_CONFIG=str(config),
        PYTHONPATH=os.pathsep.join([FIXTURES, str(REPO)]),
    )
    env.pop("JOBQ_CONFIG", None)
    env.pop("JOBQ_DATABASE", None)
    try:
        r = subprocess.run(
            [sys.executable, "-m", "djtasks.contract"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        if pg is not None:
            pg.drop()
    lines = r.stdout.strip().splitlines()
    assert lines, r.stderr[-5000:]
    report = json.loads(lines[-1])
    assert report["failures"] == [] and report["skipped"] == [], "\n".join(report["failures"])
    assert len(report["tests"]) == report["ran"] == CASES, report["tests"]
    assert r.returncode == 0, r.stderr[-5000:]
