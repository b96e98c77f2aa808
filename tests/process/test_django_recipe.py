"""The Django recipe (examples/django_app, docs/django.md): a view saves an order and enqueues its
job in one transaction through jobq's ``conn=``; a request that fails after the enqueue leaves
neither the order nor the job. Real Django, real requests (the test client), one SQLite file.
The recipe runs from a temporary copy: the source tree is left as it was."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

django = pytest.importorskip(
    "django", reason="Django is in the test extra: pip install -e '.[test]'"
)

APP = (
    next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
    / "examples"
    / "django_app"
)


def copy_of_app(folder: Path) -> Path:
    """The recipe's files, copied to ``folder`` (no byte code): run there, never in the tree."""
    return Path(
        shutil.copytree(APP, folder / "django_app", ignore=shutil.ignore_patterns("__pycache__"))
    )


def tree_files() -> set[Path]:
    return {p for p in APP.rglob("*") if "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Django set up on a fresh database file, migrated (Django's tables and jobq's)."""
    from django.conf import settings

    db = tmp_path_factory.mktemp("django") / "db.sqlite3"
    if settings.configured:
        pytest.skip("Django was already set up in this process with other settings")
    app = copy_of_app(db.parent)
    os.environ["DJANGO_SETTINGS_MODULE"] = "shop.settings"
    os.environ["JOBQ_DJANGO_DB"] = str(db)
    sys.path.insert(0, str(app))
    try:
        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        from shared import JobQueue

        JobQueue(str(db)).close()  # jobq's tables, as `python -m supervisor` would create them
        yield db
    finally:
        sys.path.remove(str(app))
        os.environ.pop("JOBQ_DJANGO_DB", None)
        os.environ.pop("DJANGO_SETTINGS_MODULE", None)  # not inherited by later tests' processes


def rows(db: Path, sql: str) -> list[tuple]:
    """Read through a connection of its own: only committed rows are visible."""
    c = sqlite3.connect(db)
    try:
        return c.execute(sql).fetchall()
    finally:
        c.close()


def post(payload: dict):
    import json

    from django.test import Client

    return Client().post("/orders/", json.dumps(payload), content_type="application/json")


def test_a_committed_request_enqueues_its_job(site):
    before = rows(site, "SELECT count(*) FROM jobs")[0][0]
    r = post({"item": "teapot", "quantity": 2})
    assert r.status_code == 201, r.content
    order_id, job_id = r.json()["order"], r.json()["job"]
    assert rows(site, f"SELECT item, quantity, job_id FROM orders_order WHERE id = {order_id}") == [
        ("teapot", 2, job_id)
    ]
    assert rows(site, f"SELECT type, status, payload FROM jobs WHERE id = '{job_id}'") == [
        ("order:confirm", "pending", f'{{"order_id":{order_id}}}')
    ]
    assert rows(site, "SELECT count(*) FROM jobs")[0][0] == before + 1


def test_a_rolled_back_request_enqueues_nothing(site):
    orders_before = rows(site, "SELECT count(*) FROM orders_order")[0][0]
    jobs_before = rows(site, "SELECT count(*) FROM jobs")[0][0]
    r = post({"item": "teapot", "quantity": 11})  # refused after the enqueue: rolled back
    assert r.status_code == 400 and "at most 10" in r.json()["error"]
    assert rows(site, "SELECT count(*) FROM orders_order")[0][0] == orders_before
    assert rows(site, "SELECT count(*) FROM jobs")[0][0] == jobs_before


def test_the_worker_side_handler_confirms_the_order(site):
    """The handler module a worker imports (orders.jobs) runs on the committed job."""
    from orders import jobs
    from orders.models import Order
    from shared import JobQueue

    r = post({"item": "kettle", "quantity": 1})
    order_id = r.json()["order"]
    with JobQueue(str(site), handlers=[jobs]) as q:
        assert q.drain(types=["order:confirm"])["completed"] >= 1
        assert q.get(r.json()["job"]).result == {"order": order_id, "confirmed": True}
    assert Order.objects.get(id=order_id).confirmed


def test_running_the_recipe_as_documented_leaves_its_folder_clean(tmp_path):
    """`python manage.py migrate` in examples/django_app left db.sqlite3* there. The
    site's database is jobq's (jobq.toml, or $JOBQ_DATABASE), outside the source tree."""
    before = tree_files()
    app = copy_of_app(tmp_path)
    db = tmp_path / "elsewhere" / "shop.sqlite3"
    env = {
        k: v for k, v in os.environ.items() if k not in ("JOBQ_DJANGO_DB", "DJANGO_SETTINGS_MODULE")
    }
    env.update(JOBQ_DATABASE=str(db), PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--verbosity", "0"],
        cwd=app,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert rows(db, "SELECT count(*) FROM django_migrations")[0][0] > 0
    assert sorted(p.name for p in app.iterdir()) == ["jobq.toml", "manage.py", "orders", "shop"]
    del env["JOBQ_DATABASE"]
    env["DJANGO_SETTINGS_MODULE"] = "shop.settings"
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "from django.conf import settings; print(settings.DATABASES['default']['NAME'])",
        ],
        cwd=app,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert not Path(r.stdout.strip()).is_relative_to(app)  # the default is outside the tree too
    assert tree_files() == before
