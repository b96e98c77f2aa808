"""The FastAPI recipe (docs/fastapi.md): a sign-up route saves a user and enqueues its welcome
mail in the request's transaction (SQLAlchemy ``AsyncSession``), then awaits the mail's result;
nothing blocks the event loop. A sign-up that fails after the enqueue leaves neither the user
nor the job.

    uvicorn --factory fastapi_signup:from_env   # JOBQ_CONFIG=jobq.toml DATABASE_URL=...
"""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

from fastapi import FastAPI, HTTPException
from sqlalchemy import String
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

import jobq
from fastapi_tasks import welcome
from jobq import JobQueue


class Base(DeclarativeBase):
    pass


class User(Base):
    __tablename__ = "users"
    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(200))


def create_app(config: str, database_url: str) -> FastAPI:
    """The app: jobq's config file, and the application's own database (``sqlite+aiosqlite://``
    or ``postgresql+psycopg://``: the database jobq's config names)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = create_async_engine(database_url)
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        app.state.sessions = async_sessionmaker(engine, expire_on_commit=False)
        queue = JobQueue.from_config(config)
        jobq.configure(queue)  # the default queue of every task's enqueue
        yield
        jobq.configure(None)
        queue.close()
        await engine.dispose()

    app = FastAPI(lifespan=lifespan)

    @app.post("/signup")
    async def signup(email: str, fail: bool = False) -> dict[str, Any]:
        async with app.state.sessions() as session, session.begin():
            user = User(email=email)
            session.add(user)
            await session.flush()  # the user's id
            handle = await welcome.using(conn=session).enqueue_async(user.id, email)
            if fail:  # anything that fails before the commit: the job goes with the user
                raise HTTPException(status_code=400, detail="sign-up refused")
        mail = await handle.wait_async(timeout=30)  # committed: a worker runs it
        return {"user": user.id, "job": handle.id, "mail": mail}

    return app


def from_env() -> FastAPI:
    return create_app(os.environ.get("JOBQ_CONFIG", "jobq.toml"), os.environ["DATABASE_URL"])
