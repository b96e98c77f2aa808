"""The Django Tasks backend (``jobq.django.JobqBackend``), on each engine, against real
Django (the ``django-tasks`` backport on Django 5.2 here) with a real supervisor started by
``python -m django jobq run``.

The web process is played by ``python -m djtasks.drive`` (tests/fixtures/djtasks): each step is
a process of its own, so every result is read from another process than the one that enqueued
it. Django is never set up in the pytest process (test_django_recipe.py sets it up with
other settings). The project's signal receivers append to a file: which process sent what.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("django", reason="Django is in the test extra: pip install -e '.[test]'")
if importlib.util.find_spec("django.tasks") is None:  # Django 6 has it; 5.2 needs the backport
    pytest.importorskip("django_tasks", reason="the django-tasks backport is in the test extra")

from shared.producer.api import JobQueue  # noqa: E402
from shared.settings.config import load  # noqa: E402
from tests.proc import FIXTURES, kill_tree, wait_until, write_config  # noqa: E402

from tests.proc import REPO  # the checkout

FAILS = "djtasks.tasks.always_fails"


class Project:
    """The test project on one engine: its jobq.toml, the environment of its processes, and
    the supervisor ``manage.py jobq run`` started."""

    def __init__(self, folder: Path, django_db: str, **config: object) -> None:
        self.folder = folder
        self.config = write_config(
            folder,
            handlers=["jobq.django.worker", "djtasks.tasks"],
            supervisor={"workers": 1},
            types={FAILS: {"max_attempts": 3}},
            **config,
        )
        self.signals = folder / "signals.jsonl"
        self.env = dict(
            os.environ,
            DJANGO_SETTINGS_MODULE="djtasks.settings",
            DJTASKS_DB=django_db,
            DJTASKS_JOBQ_CONFIG=str(self.config),
            DJTASKS_SIGNALS=str(self.signals),
            PYTHONPATH=os.pathsep.join([FIXTURES, str(REPO)]),
        )
        self.env.pop("JOBQ_CONFIG", None)
        self.env.pop("JOBQ_DATABASE", None)
        self.procs: list[subprocess.Popen] = []

    def drive(self, step: str, arg: dict | None = None) -> dict:
        r = subprocess.run(
            [sys.executable, "-m", "djtasks.drive", step, json.dumps(arg or {})],
            env=self.env,
            cwd=self.folder,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout.strip().splitlines()[-1])

    def manage(self, *args: str, log: str) -> subprocess.Popen:
        """``python -m django ARGS`` (manage.py's command line) in the background."""
        out = open(self.folder / log, "wb")
        p = subprocess.Popen(
            [sys.executable, "-m", "django", *args],
            env=self.env,
            cwd=self.folder,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        out.close()
        self.procs.append(p)
        return p

    def queue(self) -> JobQueue:
        return JobQueue(config=load(self.config))

    def signal_lines(self, job_id: str) -> list[dict]:
        if not self.signals.exists():
            return []
        lines = [json.loads(x) for x in self.signals.read_text().splitlines() if x.strip()]
        return [x for x in lines if x["id"] == job_id]

    def close(self) -> None:
        for p in self.procs:
            kill_tree(p)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def project(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(f"django-{request.param}")
    extra: dict = {}
    django_db = str(folder / "q.db")  # write_config's database, beside jobq.toml
    pg = None
    if request.param == "postgresql":
        from tests.engines import PostgresEngine

        pg = PostgresEngine(folder)
        extra = {"database": pg.database, "postgres": {"schema": pg.schema}}
        django_db = pg.database
    proj = Project(folder, django_db, **extra)
    try:
        with proj.queue() as q:  # jobq's tables before the supervisor: the tests pause it first
            pass
        # the default queue only: a task on Django's queue "emails" waits
        sup = proj.manage("jobq", "run", "--queues", "default", log="supervisor.log")
        with proj.queue() as q:
            wait_until(
                lambda: sup.poll() is not None or q.store.processes("worker"), 60, "a worker"
            )
        assert sup.poll() is None, (folder / "supervisor.log").read_text()
        yield proj
    finally:
        proj.close()
        if pg is not None:
            pg.drop()


def test_a_rolled_back_atomic_leaves_no_job_and_a_committed_one_completes(project):
    gone = project.drive("enqueue", {"task": "add", "args": [1, 2], "atomic": "rollback"})
    kept = project.drive("enqueue", {"task": "add", "args": [2, 3], "atomic": "commit"})
    with project.queue() as q:
        assert gone["id"] and q.get(gone["id"]) is None
        assert q.get(kept["id"]).type == "djtasks.tasks.add"
    done = project.drive("wait", {"id": kept["id"]})  # result.refresh() until finished
    assert done["status"] == "SUCCESSFUL" and done["return_value"] == 5 and done["args"] == [2, 3]
    assert len(done["worker_ids"]) == 1 and done["errors"] == []
    sent = project.signal_lines(kept["id"])
    assert [s["signal"] for s in sent] == [
        "enqueued",
        "started",
        "finished",
    ]  # sent in the transaction
    assert sent[-1]["status"] == "SUCCESSFUL" and {s["sender"] for s in sent} == {"JobqBackend"}
    assert sent[0]["pid"] != sent[1]["pid"] == sent[2]["pid"]  # enqueued here, run by a worker
    assert project.signal_lines(gone["id"])[0]["signal"] == "enqueued"  # sent, then rolled back
    assert [s["signal"] for s in project.signal_lines(gone["id"])] == ["enqueued"]


def test_a_django_queue_is_a_jobq_queue_that_a_supervisor_of_another_leaves(project):
    """Django's ``queue_name`` is the job's jobq queue: a task on "emails" waits while the
    fixture's supervisor (``manage.py jobq run --queues default``) runs the default queue's."""
    emails = project.drive("enqueue", {"task": "add", "args": [1, 1], "queue": "emails"})
    default = project.drive("enqueue", {"task": "add", "args": [2, 2]})  # after it, same priority
    assert project.drive("wait", {"id": default["id"]})["status"] == "SUCCESSFUL"
    with project.queue() as q:
        job, ran = q.get(emails["id"]), q.get(default["id"])
        assert (job.queue, job.status, job.attempts) == ("emails", "pending", 0)
        assert ran.queue == "default"
    assert project.drive("get", {"id": emails["id"]})["status"] == "READY"


def test_get_result_and_aget_result_work_from_other_processes(project):
    job_id = project.drive("enqueue", {"task": "add", "args": [40, 2]})["id"]
    project.drive("wait", {"id": job_id})
    for step in ("get", "aget"):
        got = project.drive(step, {"id": job_id})
        assert got["status"] == "SUCCESSFUL" and got["return_value"] == 42 and got["id"] == job_id
    with project.queue() as q:
        assert q.get(job_id).result == 42  # the stored result is the return value


def test_a_task_30_seconds_ahead_is_not_run_early(project):
    later = project.drive("enqueue", {"task": "add", "args": [1, 1], "delay": 30})
    now = project.drive("enqueue", {"task": "add", "args": [2, 2]})
    assert (
        project.drive("wait", {"id": now["id"]})["status"] == "SUCCESSFUL"
    )  # the worker is serving
    assert project.drive("get", {"id": later["id"]})["status"] == "READY"
    with project.queue() as q:
        job = q.get(later["id"])
        assert job.status == "pending" and job.run_at > job.created_at


def test_priorities_order_the_runs(project, tmp_path):
    out = tmp_path / "order.txt"
    with project.queue() as q:
        q.pause()
        try:
            ids = [
                project.drive(
                    "enqueue", {"task": "record", "args": [str(out), label], "priority": p}
                )["id"]
                for label, p in (("low", -50), ("high", 90), ("middle", 5))
            ]
        finally:
            q.resume()
    for job_id in ids:
        assert project.drive("wait", {"id": job_id})["status"] == "SUCCESSFUL"
    assert out.read_text().split() == ["high", "middle", "low"]


def test_a_failing_task_with_3_attempts_ends_failed_with_3_errors(project):
    job_id = project.drive("enqueue", {"task": "always_fails", "args": ["no address"]})["id"]
    result = project.drive("wait", {"id": job_id})
    assert result["status"] == "FAILED" and len(result["worker_ids"]) == 3
    assert [e["class"] for e in result["errors"]] == ["builtins.ValueError"] * 3
    assert all("ValueError: cannot: no address" in e["traceback"] for e in result["errors"])
    enqueued, run = by_process(project.signal_lines(job_id))
    assert enqueued == ["enqueued"] and [s["signal"] for s in run] == ["started"] * 3 + ["finished"]
    assert run[-1]["status"] == "FAILED"


def by_process(sent: list[dict]) -> tuple[list[str], list[dict]]:
    """A job's signals split into the enqueuing process's names and the worker's lines. Outside a
    transaction ``task_enqueued`` is sent once the job is written, as Django's own backends do: a
    worker may claim the job (and send ``task_started``) before the enqueuing process appends its
    line, so only the order within each process is promised."""
    enqueuer = next(s["pid"] for s in sent if s["signal"] == "enqueued")
    return (
        [s["signal"] for s in sent if s["pid"] == enqueuer],
        [s for s in sent if s["pid"] != enqueuer],
    )


@pytest.mark.parametrize("kind", ["lambda", "nested"])
def test_a_lambda_or_a_nested_function_is_an_invalid_task(project, kind):
    got = project.drive("invalid", {"kind": kind})
    assert got["raised"] in ("InvalidTask", "InvalidTaskError"), got


def test_an_async_task_runs(project):
    job_id = project.drive("enqueue", {"task": "async_add", "args": [3, 4]})["id"]
    assert project.drive("wait", {"id": job_id})["return_value"] == {"sum": 7, "async": True}


def test_a_task_takes_its_context(project):
    job_id = project.drive("enqueue", {"task": "which_attempt"})["id"]
    assert project.drive("wait", {"id": job_id})["return_value"] == 1


def test_django_check_passes(project):
    r = subprocess.run(
        [sys.executable, "-m", "django", "check"],
        env=project.env,
        cwd=project.folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and "no issues" in r.stdout, r.stdout + r.stderr


def test_workers_are_forked_from_a_template_that_set_django_up(project):
    """django.setup() ran once in the template (jobq.django.worker, first of the handlers), which
    stayed safe to fork: no thread, no database open; so workers start by fork, not exec."""
    log = (project.folder / "supervisor.log").read_text()
    assert "template.ready" in log and "how=fork" in log and "types=6" in log, log
    assert "forked=True" in log and "forked=False" not in log and "unsafe" not in log, log


def test_manage_py_jobq_status_and_the_tasks_in_jobq_web(project):
    import httpx

    job_id = project.drive("enqueue", {"task": "add", "args": [5, 5]})["id"]
    project.drive("wait", {"id": job_id})
    status = subprocess.run(
        [sys.executable, "-m", "django", "jobq", "status"],
        env=project.env,
        cwd=project.folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert status.returncode == 0, status.stderr
    assert "djtasks.tasks.add" in status.stdout
    as_json = subprocess.run(
        [sys.executable, "-m", "django", "jobq", "status", "--json"],
        env=project.env,
        cwd=project.folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert as_json.returncode == 0 and isinstance(json.loads(as_json.stdout), dict), as_json.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    web = project.manage("jobq", "web", "--host", "127.0.0.1", "--port", str(port), log="web.log")
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert web.poll() is None, (project.folder / "web.log").read_text()
        try:
            return httpx.get(url + "/healthz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    wait_until(up, 60, "jobq web to answer")
    page = httpx.get(f"{url}/jobs?status=completed", timeout=10).text
    assert "djtasks.tasks.add" in page
    assert "djtasks.tasks.add" in httpx.get(f"{url}/jobs/{job_id}", timeout=10).text


def test_another_database_is_written_on_commit_and_check_says_so(tmp_path):
    """Django on one SQLite file, jobq on another: no write inside the transaction (a warning
    from check); the job is written when the transaction commits, never after a rollback."""
    proj = Project(tmp_path, str(tmp_path / "django.sqlite3"))
    r = subprocess.run(
        [sys.executable, "-m", "django", "check"],
        env=proj.env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and "jobq.W001" in r.stderr + r.stdout, r.stdout + r.stderr
    with proj.queue() as q:
        before = q.counts()
        gone = proj.drive("enqueue", {"task": "add", "args": [1, 2], "atomic": "rollback"})
        kept = proj.drive("enqueue", {"task": "add", "args": [2, 3], "atomic": "commit"})
        assert gone["id"] == "" and kept["id"]  # the id comes with the commit
        assert q.get(kept["id"]).status == "pending"
        assert sum(q.counts().values()) == sum(before.values()) + 1


def test_the_django_integration_stays_in_its_package():
    """Only ``jobq/django`` imports Django, and it never imports the supervisor (the command
    runs ``python -m jobq``): a worker or the CLI never needs Django installed."""
    found = []
    for path in sorted(REPO.glob("*/**/*.py")):
        rel = path.relative_to(REPO)
        if rel.parts[0] not in ("shared", "worker", "supervisor", "jobq"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            for name in names:
                top = name.split(".")[0]
                inside = rel.parts[:2] == ("jobq", "django")
                if top in ("django", "django_tasks") and not inside:
                    found.append(f"{rel}: imports {name}")
                if top == "supervisor" and inside:
                    found.append(f"{rel}: imports {name}")
    assert found == []


EXAMPLE = REPO / "examples" / "django_tasks_app"
POST = """
import json
from django.test import Client
r = Client().post("/orders/", json.dumps({"item": "teapot", "quantity": %d}), content_type="application/json")
print(r.status_code, r.content.decode())
"""


def test_the_example_project_runs_as_documented(tmp_path):
    """examples/django_tasks_app (docs/django.md), from a copy: migrate, check, `manage.py jobq
    run`; a request's order is confirmed by its task, a refused one leaves no task."""
    import shutil

    app = Path(
        shutil.copytree(EXAMPLE, tmp_path / "app", ignore=shutil.ignore_patterns("__pycache__"))
    )
    db = tmp_path / "shop.sqlite3"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBQ_", "DJANGO_"))}
    env.update(JOBQ_DATABASE=str(db), PYTHONPATH=str(REPO), PYTHONDONTWRITEBYTECODE="1")

    def manage(*args: str) -> str:
        r = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=app,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        return (r.stdout.strip().splitlines() or [""])[-1]  # `shell` may say what it imported first

    manage("migrate", "--verbosity", "0")
    assert "no issues" in manage("check")
    refused = manage("shell", "-c", POST % 11)
    assert refused.startswith("400")
    placed = manage("shell", "-c", POST % 2)
    assert placed.startswith("201")
    task_id = json.loads(placed.split(" ", 1)[1])["task"]
    out = open(tmp_path / "supervisor.log", "wb")
    sup = subprocess.Popen(
        [sys.executable, "manage.py", "jobq", "run"],
        cwd=app,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    try:
        with JobQueue(str(db)) as q:
            assert q.handle(task_id).wait(timeout=60) == {"order": 1, "confirmed": True}
            assert sum(q.counts().values()) == 1  # the refused order's task was rolled back
        shown = manage(
            "shell",
            "-c",
            "from django.test import Client; "
            f"print(Client().get('/orders/tasks/{task_id}/').content.decode())",
        )
        assert json.loads(shown)["status"] == "SUCCESSFUL"
    finally:
        kill_tree(sup)
        out.close()
    assert sorted(p.name for p in app.iterdir()) == ["jobq.toml", "manage.py", "orders", "shop"]


def test_a_test_without_a_supervisor_drains_the_tasks_in_its_own_process(tmp_path):
    proj = Project(tmp_path, str(tmp_path / "q.db"))
    ids = [
        proj.drive("enqueue", {"task": "add", "args": [1, 2]})["id"],
        proj.drive("enqueue", {"task": "async_add", "args": [2, 3]})["id"],
    ]
    assert proj.drive("drain") == {"completed": 2, "retried": 0, "failed": 0}
    assert [proj.drive("get", {"id": i})["return_value"] for i in ids] == [
        3,
        {"sum": 5, "async": True},
    ]


@pytest.mark.parametrize(
    "settings_dict, vendor, database, same",
    [
        ({"NAME": "{tmp}/a/../db.sqlite3"}, "sqlite", "{tmp}/db.sqlite3", True),
        ({"NAME": "{tmp}/db.sqlite3"}, "sqlite", "sqlite://{tmp}/db.sqlite3", True),
        ({"NAME": "{tmp}/other.sqlite3"}, "sqlite", "{tmp}/db.sqlite3", False),
        ({"NAME": ":memory:"}, "sqlite", ":memory:", False),
        ({"NAME": "{tmp}/db.sqlite3"}, "postgresql", "{tmp}/db.sqlite3", False),
        (
            {"NAME": "test", "HOST": "/var/run/postgresql"},
            "postgresql",
            "postgresql:///test?host=/var/run/postgresql",
            True,
        ),
        (
            {"NAME": "test", "HOST": "127.0.0.1", "PORT": 5432},
            "postgresql",
            "postgresql://u:secret@localhost/test",
            True,
        ),
        (
            {"NAME": "test", "HOST": "db.example", "PORT": "5433"},
            "postgresql",
            "postgresql://db.example:5433/test",
            True,
        ),
        (
            {"NAME": "test", "HOST": "db.example"},
            "postgresql",
            "postgresql://db.example:5433/test",
            False,
        ),
        ({"NAME": "shop"}, "postgresql", "postgresql:///test", False),
        ({"NAME": "test", "OPTIONS": {"service": "x"}}, "postgresql", "postgresql:///test", False),
        ({"NAME": "test"}, "sqlite", "postgresql:///test", False),
    ],
)
def test_which_django_database_is_the_jobq_database(
    tmp_path, settings_dict, vendor, database, same
):
    from jobq.django.databases import same_database

    filled = {
        k: v.replace("{tmp}", str(tmp_path)) if isinstance(v, str) else v
        for k, v in settings_dict.items()
    }
    assert same_database(filled, vendor, database.replace("{tmp}", str(tmp_path))) is same
