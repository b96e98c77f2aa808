"""The Django recipe (examples/django_app, docs/django.md): a view saves an order and enqueues its
job in one transaction through jobq's ``conn=``; a request that fails after the enqueue leaves
neither the order nor the job. Real Django, real requests (the test client), one SQLite file."""
from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import pytest

django = pytest.importorskip("django", reason="Django is in the test extra: pip install -e '.[test]'")

APP = Path(__file__).resolve().parents[1] / "examples" / "django_app"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Django set up on a fresh database file, migrated (Django's tables and jobq's)."""
    from django.conf import settings
    db = tmp_path_factory.mktemp("django") / "db.sqlite3"
    if settings.configured:
        pytest.skip("Django was already set up in this process with other settings")
    os.environ["DJANGO_SETTINGS_MODULE"] = "shop.settings"
    os.environ["JOBQ_DJANGO_DB"] = str(db)
    sys.path.insert(0, str(APP))
    try:
        django.setup()
        from django.core.management import call_command
        call_command("migrate", verbosity=0)
        from shared import JobQueue
        JobQueue(str(db)).close()   # jobq's tables, as `python -m supervisor` would create them
        yield db
    finally:
        sys.path.remove(str(APP))
        os.environ.pop("JOBQ_DJANGO_DB", None)
        os.environ.pop("DJANGO_SETTINGS_MODULE", None)   # not inherited by later tests' processes


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
        ("teapot", 2, job_id)]
    assert rows(site, f"SELECT type, status, payload FROM jobs WHERE id = '{job_id}'") == [
        ("order:confirm", "pending", f'{{"order_id":{order_id}}}')]
    assert rows(site, "SELECT count(*) FROM jobs")[0][0] == before + 1


def test_a_rolled_back_request_enqueues_nothing(site):
    orders_before = rows(site, "SELECT count(*) FROM orders_order")[0][0]
    jobs_before = rows(site, "SELECT count(*) FROM jobs")[0][0]
    r = post({"item": "teapot", "quantity": 11})   # refused after the enqueue: rolled back
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
