"""Transactional enqueue through the application's own session, on each engine: ``conn=``
takes SQLAlchemy's ``Session``, ``Connection``, ``AsyncSession`` and ``AsyncConnection``,
psycopg 3's connections (PostgreSQL) and ``sqlite3`` connections (SQLite), and the job commits
or rolls back with the application's transaction (shared.producer.appconn)."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from jobq import JobQueue

pytestmark = pytest.mark.engines


@pytest.fixture
def q(tmp_path, database):
    queue = JobQueue(config=database.config(tmp_path))
    yield queue
    queue.close()


def urls(q: JobQueue) -> tuple[str, str]:
    """SQLAlchemy's sync and async URLs of the queue's database."""
    db = q.config.database
    if db.startswith("postgres"):
        url = "postgresql+psycopg://" + db.split("://", 1)[1]
        return url, url
    return f"sqlite:///{db}", f"sqlite+aiosqlite:///{db}"


def test_a_session_commits_or_rolls_back_the_job_with_its_rows(q):
    engine = create_engine(urls(q)[0])
    with Session(engine) as s:
        kept = q.enqueue("app:welcome", {"user": 1}, conn=s)
        assert q.get(kept, conn=s).status == "pending"  # seen inside the transaction
        s.commit()
    with Session(engine) as s:
        dropped = q.enqueue_many([("app:welcome", {"user": 2})], conn=s)[0]
        s.rollback()
    with engine.begin() as c:  # a Connection in a transaction block
        block = q.enqueue("app:welcome", {"user": 3}, conn=c)
    with engine.connect() as c:  # commit as you go: the job joins the transaction it begins
        going = q.enqueue("app:welcome", {"user": 4}, conn=c)
        c.commit()
    with engine.connect() as c:
        closed = q.enqueue("app:welcome", {"user": 5}, conn=c)  # never committed
    engine.dispose()
    assert q.get(kept) and q.get(block) and q.get(going)
    assert q.get(dropped) is None and q.get(closed) is None


def test_an_async_session_commits_or_rolls_back_the_job(q):
    async def main():
        engine = create_async_engine(urls(q)[1])
        async with AsyncSession(engine) as s:
            kept = await q.enqueue_async("app:welcome", {"user": 1}, conn=s)
            assert (await q.get_async(kept, conn=s)).status == "pending"
            await s.commit()
        async with AsyncSession(engine) as s:
            dropped = (await q.enqueue_many_async([("app:welcome", {})], conn=s))[0]
            await s.rollback()
        async with engine.begin() as c:
            block = await q.enqueue_async("app:welcome", {"user": 3}, conn=c)
        async with engine.connect() as c:
            lost = await q.enqueue_async("app:welcome", {"user": 4}, conn=c)
            await c.rollback()
        await engine.dispose()
        return kept, dropped, block, lost

    kept, dropped, block, lost = asyncio.run(main())
    assert q.get(kept) and q.get(block)
    assert q.get(dropped) is None and q.get(lost) is None


def test_the_drivers_own_connections(q, database):
    if database.name == "sqlite":
        c = sqlite3.connect(q.config.database)
        kept = q.enqueue("app:welcome", {}, conn=c)
        c.commit()
        dropped = q.enqueue("app:welcome", {}, conn=c)
        c.rollback()
        c.close()
    else:
        import psycopg

        with psycopg.connect(q.config.database) as c:
            kept = q.enqueue("app:welcome", {}, conn=c)

        async def rolled_back():
            async with await psycopg.AsyncConnection.connect(q.config.database) as c:
                job_id = await q.enqueue_async("app:welcome", {}, conn=c)
                assert (await q.get_async(job_id, conn=c)) is not None
                await c.rollback()
            return job_id

        dropped = asyncio.run(rolled_back())
    assert q.get(kept) is not None and q.get(dropped) is None


def test_an_async_session_given_to_a_sync_call_is_refused_by_name(q):
    async def main():
        engine = create_async_engine(urls(q)[1])
        async with AsyncSession(engine) as s:
            with pytest.raises(TypeError, match="enqueue_async"):
                q.enqueue("app:welcome", {}, conn=s)
        await engine.dispose()

    asyncio.run(main())
