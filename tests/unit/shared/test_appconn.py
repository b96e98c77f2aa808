"""shared.producer.appconn: what ``conn=`` makes of the application's connection or session,
recognised without importing SQLAlchemy or a driver; psycopg2 and asyncpg refused naming the fix."""

from __future__ import annotations

import asyncio
import sqlite3
import sys

import pytest
from sqlalchemy import create_engine
from sqlalchemy.orm import Session, scoped_session, sessionmaker

from shared.producer.appconn import ASYNCPG, PSYCOPG2, async_target, sync_conn


def fake(module: str, name: str = "connection") -> object:
    """An object whose type comes from ``module``, as a driver's connection would."""
    return type(name, (), {"__module__": module})()


def test_a_driver_connection_is_used_as_it_is(tmp_path):
    c = sqlite3.connect(tmp_path / "x.db")
    assert sync_conn(c) is c
    assert sync_conn(None) is None
    assert asyncio.run(async_target(c)).how == "sync"


def test_psycopg2_and_asyncpg_are_refused_naming_the_fix():
    with pytest.raises(TypeError) as info:
        sync_conn(fake("psycopg2.extensions"))
    assert str(info.value) == PSYCOPG2 and "postgresql+psycopg://" in PSYCOPG2
    with pytest.raises(TypeError, match="asyncpg"):
        sync_conn(fake("asyncpg.connection", "Connection"))
    assert "postgresql+psycopg://" in ASYNCPG


def test_a_psycopg_async_connection_is_async_only():
    conn = fake("psycopg.connection_async", "AsyncConnection")
    with pytest.raises(TypeError, match="enqueue_async"):
        sync_conn(conn)
    target = asyncio.run(async_target(conn))
    assert (target.how, target.driver) == ("native", conn)


def test_a_sqlalchemy_session_gives_its_dbapi_connection_in_a_begun_transaction(tmp_path):
    engine = create_engine(f"sqlite:///{tmp_path / 'x.db'}")
    with Session(engine) as s:
        raw = sync_conn(s)
        assert isinstance(raw, sqlite3.Connection)
        assert s.in_transaction()
    with engine.connect() as c:
        assert sync_conn(c) is c.connection.dbapi_connection and c.in_transaction()
    scoped = scoped_session(sessionmaker(engine))  # Flask-SQLAlchemy's db.session
    assert isinstance(sync_conn(scoped), sqlite3.Connection)
    scoped.remove()
    engine.dispose()


def test_nothing_imports_sqlalchemy_for_a_plain_connection(tmp_path):
    code = (
        "import sys, sqlite3; from shared.producer.appconn import sync_conn;"
        f"sync_conn(sqlite3.connect({str(tmp_path / 'y.db')!r}));"
        "assert 'sqlalchemy' not in sys.modules"
    )
    import subprocess

    subprocess.run([sys.executable, "-c", code], check=True)
