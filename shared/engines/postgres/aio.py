"""The PostgreSQL store's asyncio side (``store.aio``): enqueue and read a job from an event
loop through psycopg's ``AsyncConnection``, with no thread hop.

- Each event loop gets connections of its own (an ``AsyncConnection`` belongs to the loop that
  made it), at most :data:`POOL`, opened as its concurrent calls need them (the server commits
  concurrent transactions together: 1,000 enqueues started at once do not wait for 1,000
  commits one after another) and kept; a lock guards the table of loops, so loops in several
  threads each get theirs.
- The statements are the sync store's (:mod:`.enqueue`, ``shared.engines.sql.jobs``): one job
  without a key is one prepared statement (insert, count deltas and ``pg_notify``), any other
  batch one statement over arrays; a keyed batch runs in one transaction.
- With ``conn`` (the application's ``psycopg.AsyncConnection``) the rows join its
  transaction and the notification goes out when the application commits.
- psycopg's errors become jobq's (:func:`.errors.call_error`, the message naming the server
  without its password); a lost connection is dropped and the next call connects again.
"""

from __future__ import annotations

import asyncio
import re
import threading
import weakref
import contextlib
from typing import Any, AsyncIterator, Sequence

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row, tuple_row

from shared.model.errors import StoreUnavailable
from shared.model.job import Job, NewJob
from shared.runtime.clock import iso
from .connection import _RETRYABLE, TX_RETRIES
from .enqueue import (
    _insert_one_sql,
    _insert_params,
    _insert_sql,
    _refuse_nul_keys,
    _storable,
    one_row,
)
from .errors import call_error, error_for
from .loaders import register_native
from ..sql.jobs import _GET_ON
from ..sql.uniquescope import free_params, free_sql, scoped


POOL = 4  # connections per event loop, at most


class _LoopPool:
    """One event loop's connections: the idle ones, and how many exist."""

    def __init__(self) -> None:
        self.idle: asyncio.Queue[psycopg.AsyncConnection] = asyncio.Queue()
        self.count = 0
        self.all: list[psycopg.AsyncConnection] = []


def _named(sql: str) -> str:
    """The one-job statement with psycopg's named placeholders (``$3`` -> ``%(p3)s``)."""
    return re.sub(r"\$(\d+)", r"%(p\1)s", sql)


class PgAsync:
    """The asyncio calls of one :class:`.store.PgStore` (see the module's docstring)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.location = store.location
        self._pools: weakref.WeakKeyDictionary[Any, _LoopPool] = weakref.WeakKeyDictionary()
        self._guard = threading.Lock()  # the table of loops, shared by every thread's loop
        self._one = _named(_insert_one_sql(store.table, later=False))
        self._one_later = _named(_insert_one_sql(store.table, later=True))
        self._many = _insert_sql(store.table)
        self._get = store.dialect.sql(_GET_ON.format(jobs=store.named("jobs")))

    async def enqueue(self, jobs: Sequence[NewJob], now: float, conn: Any = None) -> list[str]:
        """``PgStore.enqueue`` for asyncio: the jobs' ids in order (a kept job's id where a
        job's ``key`` is taken)."""
        if not jobs:
            return []
        _refuse_nul_keys(jobs)
        stamp = iso(now)
        try:
            if conn is not None:
                return await self._insert(
                    conn, _insert_params(jobs, now, stamp, self._channel), jobs, now
                )
            async with self.connection() as c:
                return await self._write(c, jobs, now, stamp)
        except psycopg.Error as exc:
            raise self._error(exc, conn) from exc

    async def _write(self, c: Any, jobs: Sequence[NewJob], now: float, stamp: str) -> list[str]:
        """The jobs inserted on one of the loop's connections ``c``."""
        if len(jobs) == 1 and jobs[0].key is None and _storable(jobs[0]):
            await self._insert_one(c, jobs[0], now, stamp)
            return [jobs[0].id]
        params = _insert_params(jobs, now, stamp, self._channel)
        if len(jobs) > 1 and any(j.key is not None for j in jobs) or scoped(jobs):
            return await self._in_transaction(c, params, jobs, now)
        return await self._insert(c, params, jobs, now)

    async def get(self, job_id: str, conn: Any = None) -> Job | None:
        """The job with this id, or None (through ``conn``, in its transaction, when given)."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                c = conn if conn is not None else await stack.enter_async_context(self.connection())
                async with c.cursor(row_factory=dict_row) as cur:
                    register_native(cur.adapters)  # the application's connection: this cursor's
                    await cur.execute(self._get, {"id": job_id})
                    row = await cur.fetchone()
        except psycopg.Error as exc:
            raise self._error(exc, conn) from exc
        return Job.from_row(row) if row else None

    @property
    def _channel(self) -> str:
        return str(self.store.channel)

    async def _insert_one(self, c: Any, j: NewJob, now: float, stamp: str) -> None:
        """One job without a key: the sync store's prepared statement, its parameters as text."""
        later, values = one_row(j, now, stamp, self.store.lanes)
        params = {f"p{i}": v for i, v in enumerate(values, 1)}
        await c.execute(self._one_later if later else self._one, params, prepare=not self.pooled)

    async def _insert(self, c: Any, params: dict, jobs: Sequence[NewJob], now: float) -> list[str]:
        async with c.cursor(row_factory=tuple_row) as cur:
            register_native(cur.adapters)  # the application's connection: this cursor's only
            for j in scoped(jobs):  # keys held outside their scopes, freed first (uniquescope)
                assert j.unique is not None
                sql = self.store.dialect.sql(free_sql(self.store.table, j.unique))
                await cur.execute(sql, free_params(j, now))
            await cur.execute(self._many, params)
            inserted = {r[0] for r in await cur.fetchall() if r[0] is not None}
            missing = [j.key for j in jobs if j.id not in inserted and j.key is not None]
            if not missing:
                return [j.id for j in jobs]
            await cur.execute(
                f"SELECT key, id FROM {self.store.table} WHERE key = ANY(%s)", (missing,)
            )
            found = dict(await cur.fetchall())
        return [j.id if j.id in inserted else found.get(j.key, j.id) for j in jobs]

    async def _in_transaction(
        self, c: Any, params: dict, jobs: Sequence[NewJob], now: float
    ) -> list[str]:
        """A keyed batch in one transaction, run again after a serialization failure."""
        for attempt in range(TX_RETRIES + 1):
            try:
                async with c.transaction():
                    if self.pooled and self.store.local_limits:
                        await c.execute(self.store.local_limits)
                    return await self._insert(c, params, jobs, now)
            except _RETRYABLE:
                if attempt == TX_RETRIES:
                    raise
        raise AssertionError("unreachable")

    @property
    def pooled(self) -> bool:
        return bool(self.store.pooled)

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection]:
        """One of this loop's connections for one call: an idle one, a new one while fewer than
        :data:`POOL` exist, else the next one given back. A broken one is not given back."""
        if self.store.closed:
            raise StoreUnavailable(
                f"database {self.location}: store is closed", database=self.location
            )
        loop = asyncio.get_running_loop()
        with self._guard:
            pool = self._pools.get(loop) or self._pools.setdefault(loop, _LoopPool())
        c = await self._take(pool)
        try:
            yield c
        finally:
            if c.closed or c.broken:
                pool.count -= 1
                pool.all.remove(c)
            else:
                pool.idle.put_nowait(c)

    async def _take(self, pool: _LoopPool) -> psycopg.AsyncConnection:
        while not pool.idle.empty() or pool.count >= POOL:
            c = await pool.idle.get()
            if not (c.closed or c.broken):
                return c
            pool.count -= 1
            pool.all.remove(c)
        pool.count += 1
        try:
            c = await self._connect()
        except BaseException:
            pool.count -= 1
            raise
        pool.all.append(c)
        return c

    async def _connect(self) -> psycopg.AsyncConnection:
        """A connection made as the store's own are (:meth:`.connection.PgConnection._open`):
        autocommit, the session limits as startup options (none in pooled mode, where every
        statement names its schema and nothing is prepared)."""
        given = conninfo_to_dict(self.store.url)
        common: dict[str, Any] = dict(
            autocommit=True,
            connect_timeout=max(1, int(self.store.connect_timeout)),
            application_name=given.get("application_name") or "jobq",
        )
        if self.pooled:
            common["prepare_threshold"] = None
        else:
            limits = [f"-c {k}={v}" for k, v in self.store.limits.items()]
            common["options"] = " ".join([*limits, given.get("options") or ""]).strip()
        try:
            c = await psycopg.AsyncConnection.connect(self.store.url, **common)
        except psycopg.Error as exc:
            raise error_for(self.location, exc, url=self.store.url) from exc
        register_native(c.adapters)  # the native types read as jobq's text (.loaders)
        return c

    def _error(self, exc: psycopg.Error, conn: Any) -> Exception:
        """jobq's error for ``exc`` (a lost connection of the loop's is not given back)."""
        broken = bool(getattr(conn, "broken", False)) if conn is not None else False
        return call_error(self.location, exc, broken)

    def close(self) -> None:
        """Close every loop's connections (from any thread: the sockets are simply closed)."""
        with self._guard:
            pools, self._pools = list(self._pools.values()), weakref.WeakKeyDictionary()
        for c in [c for pool in pools for c in pool.all]:
            try:
                c.pgconn.finish()
            except Exception:  # noqa: BLE001 - a connection that already failed
                pass
