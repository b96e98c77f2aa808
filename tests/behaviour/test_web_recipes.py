"""The web recipes (docs/fastapi.md, docs/flask.md), driven over HTTP with real workers on each
engine: a sign-up saves a user and enqueues its welcome mail in the request's transaction
(FastAPI: SQLAlchemy ``AsyncSession``, awaited; Flask: Flask-SQLAlchemy's session); the mail
comes back from a worker; a sign-up that fails after the enqueue leaves neither the user nor the
job. The recipes run from a temporary copy of examples/."""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import pytest

from jobq import JobQueue
from shared.settings.config import load
from tests.engines import DATABASE_VAR
from tests.proc import write_config

pytestmark = pytest.mark.engines
EXAMPLES = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
EXAMPLES = EXAMPLES / "examples"


def recipe(name: str, folder: Path, monkeypatch) -> Path:
    """The example app ``name`` copied to ``folder``, importable from there."""
    shutil.copytree(EXAMPLES / name, folder, dirs_exist_ok=True)
    monkeypatch.syspath_prepend(str(folder))
    return folder


def app_url(database, folder: Path, driver: str) -> str:
    """The application's SQLAlchemy URL of the database jobq's config names."""
    if database.name == "sqlite":
        return f"sqlite+{driver}:///{folder / 'q.db'}" if driver else f"sqlite:///{folder / 'q.db'}"
    rest = database.env[DATABASE_VAR].split("://", 1)[1]
    joiner = "&" if "?" in rest else "?"
    return f"postgresql+psycopg://{rest}{joiner}options=-csearch_path%3D{database.schema}"


def queue_of(folder: Path) -> JobQueue:
    return JobQueue(config=load(folder / "jobq.toml"))


def test_the_fastapi_recipe(tmp_path, database, sup_factory, monkeypatch):
    from fastapi.testclient import TestClient

    folder = recipe("fastapi_app", tmp_path, monkeypatch)
    config = write_config(folder, handlers=["fastapi_tasks"])
    sup_factory(config)
    q = queue_of(folder)  # (jobq's schema made: the app's tables go there on PostgreSQL)
    app = importlib.import_module("fastapi_signup").create_app(
        str(config), app_url(database, folder, "aiosqlite")
    )
    with TestClient(app) as client:
        ok = client.post("/signup", params={"email": "a@example.com"})
        assert ok.status_code == 200, ok.text
        assert ok.json()["mail"] == f"welcome mail for user {ok.json()['user']} to a@example.com"
        refused = client.post("/signup", params={"email": "b@example.com", "fail": True})
        assert refused.status_code == 400
    assert q.counts() == {"completed": 1}  # the refused sign-up's job rolled back with it
    q.close()


def test_the_flask_recipe(tmp_path, database, sup_factory, monkeypatch):
    folder = recipe("flask_app", tmp_path, monkeypatch)
    config = write_config(folder, handlers=["flask_tasks"])
    sup_factory(config)
    q = queue_of(folder)  # (jobq's schema made: the app's tables go there on PostgreSQL)
    app = importlib.import_module("flask_signup").create_app(
        str(config), app_url(database, folder, "")
    )
    client = app.test_client()
    ok = client.post("/signup", data={"email": "a@example.com"})
    assert ok.status_code == 200, ok.text
    assert ok.json["mail"] == f"welcome mail for user {ok.json['user']} to a@example.com"
    assert client.post("/signup", data={"email": "b@example.com", "fail": "1"}).status_code == 400
    assert q.counts() == {"completed": 1}
    q.close()
    app.extensions["jobq"].close()
