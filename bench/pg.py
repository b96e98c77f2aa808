"""PostgreSQL plumbing for the benchmark: fresh schemas, connections, and the server backends
that belong to a process tree (for idle CPU).

Every system measured gets a schema of its own (:func:`fresh_schema`), dropped afterwards. Each
process tree under test runs with ``PGAPPNAME`` set to a tag of its own, so its backends can be
told apart from other sessions' in ``pg_stat_activity`` (libpq reads ``PGAPPNAME``).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from typing import Any, Iterator

import psycopg

from .procs import Tree, _schedstat_seconds


def connect(
    url: str,
    schema: str | None = None,
    *,
    autocommit: bool = True,
    appname: str | None = None,
    **kwargs: Any,
) -> psycopg.Connection:
    """A connection with ``schema`` first on its search path (and ``public`` after it)."""
    opts = {}
    if schema:
        opts["options"] = f"-c search_path={schema},public"
    if appname:
        opts["application_name"] = appname
    conn = psycopg.connect(url, autocommit=autocommit, **opts, **kwargs)
    # jobq's times and JSON read as its own connections read them (text), as on SQLite
    from shared.engines.postgres.loaders import register_native

    register_native(conn.adapters)
    return conn


def search_path_options(schema: str) -> str:
    return f"-c search_path={schema},public"


def new_name(prefix: str) -> str:
    return f"bench_{prefix}_{uuid.uuid4().hex[:10]}"


@contextlib.contextmanager
def fresh_schema(url: str, prefix: str, *, create: bool = True) -> Iterator[str]:
    """A new schema's name (created unless ``create`` is false: jobq migrates its own), dropped
    with everything in it at the end."""
    name = new_name(prefix)
    if create:
        with connect(url) as c:
            c.execute(f'CREATE SCHEMA "{name}"')
    try:
        yield name
    finally:
        drop_schema(url, name)


def drop_schema(url: str, name: str) -> None:
    with connect(url) as c:
        c.execute("SET lock_timeout = '30s'")
        c.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def server_settings(url: str) -> dict[str, str]:
    """What the run was measured at (the targets ask for the server's default durability)."""
    names = ("server_version", "synchronous_commit", "fsync", "shared_buffers", "max_connections")
    with connect(url) as c:
        return {n: c.execute(f"SHOW {n}").fetchone()[0] for n in names}


def new_appname(system: str) -> str:
    return f"bench-{system}-{uuid.uuid4().hex[:8]}"


def backends(url: str, appname: str) -> list[int]:
    """Pids of the server backends whose client set ``application_name`` = ``appname``."""
    with connect(url) as c:
        rows = c.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (appname,)
        ).fetchall()
    return [r[0] for r in rows]


class WithBackends:
    """A process tree plus its server backends, as one thing whose CPU is measured
    (:func:`bench.procs.cpu_percent_of_core` reads ``cpu_seconds``)."""

    def __init__(self, tree: Tree, url: str, appname: str) -> None:
        self.tree, self.url, self.appname = tree, url, appname

    def cpu_seconds(self) -> dict[int, float]:
        out = self.tree.cpu_seconds()
        for pid in backends(self.url, self.appname):
            s = _schedstat_seconds(pid)
            if s is not None:
                out[-pid] = s  # negative keys: backends (a pid may also be a local process)
        return out

    def members(self):
        return self.tree.members()

    def close(self):
        return self.tree.close()


def child_env(appname: str, **extra: str) -> dict[str, str]:
    """Environment entries for a tree under test: its backends tagged ``appname``."""
    return {"PGAPPNAME": appname, **extra}


def env_url() -> str:
    return os.environ.get("JOBQ_TEST_POSTGRES", "postgresql:///test?host=/var/run/postgresql")


# A server of the benches that make a database of their own (their statements counted alone).
SERVER = os.environ.get("JOBQ_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/")


def admin(sql: str) -> None:
    """``sql`` on the server's ``postgres`` database (CREATE/DROP DATABASE, ALTER DATABASE)."""
    with psycopg.connect(SERVER + "postgres", autocommit=True) as c:
        c.execute(sql)


def commits(name: str) -> int:
    """The transactions committed so far in database ``name`` (``pg_stat_database``, read in a
    fresh snapshot)."""
    with psycopg.connect(SERVER + "postgres", autocommit=True) as c:
        row = c.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (name,)
        ).fetchone()
        c.execute("SELECT pg_stat_clear_snapshot()")
        return int(row[0])


def forked_drain(target: Any, args: tuple, procs: int, timeout: float) -> tuple[list[Any], float]:
    """Run ``target(*args, out)`` in ``procs`` forked processes at once; each puts one answer
    on ``out`` (a tuple whose first item is ``"error"`` if it failed). Returns the answers and
    the wall seconds from the first start to the last answer; raises if any failed."""
    import multiprocessing
    import time

    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    ps = [ctx.Process(target=target, args=(*args, out)) for _ in range(procs)]
    t0 = time.perf_counter()
    for p in ps:
        p.start()
    got = [out.get(timeout=timeout) for _ in ps]
    wall = time.perf_counter() - t0
    for p in ps:
        p.join()
    if any(g[0] == "error" for g in got):
        raise RuntimeError(f"a worker failed: {got}")
    return got, wall
