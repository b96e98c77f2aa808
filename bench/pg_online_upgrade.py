"""The online native-type upgrade (``jobq db upgrade``) on a big live queue, measured from the
version before it.

    python -m bench.pg_online_upgrade --old-tree PATH [--database postgresql:///test?host=...]
        [--rows 1000000] [--batch 5000] [--writers 2] [--baseline 10] [--keep]

``--old-tree`` (required): a checkout of the jobq whose PostgreSQL schema version is the one
before the native step (``schema.NATIVE_VERSION - 1``: text times and JSON), checked by asking
it. Everything the old version does runs in subprocesses with that checkout on PYTHONPATH (and
as their working directory), by :mod:`bench.pg_online_old`: a store opened on a scratch schema
creates it (the old migrations), which is then filled with ``--rows`` jobs of the old (text)
form by ``generate_series`` (1 in 100 pending, the rest completed with a result; a quarter of
those with an attempt row); ``--writers`` old workers loop enqueue + claim + complete through
their store, each statement timed, for ``--baseline`` seconds, then while this version's
:func:`shared.engines.postgres.online.prepare` runs over
:data:`~shared.engines.postgres.native.NATIVE_COLUMNS`. Then they stop (a stop file, as a
deploy stops the old workers) and :func:`~shared.engines.postgres.online.finish` runs (``after``
``schema.NATIVE_AFTER``, to ``schema.NATIVE_VERSION``); then a store of this version opens the
schema (it runs the steps after the native one) and reads back an old job and one an old worker
completed during prepare.

Reports prepare's time, the writers' p50/p99/max per operation before and during it (the
longest is the longest any claim or outcome took, waiting on a lock or on the machine), their
rate, the writers' statements seen waiting on a lock during prepare (``pg_stat_activity``
sampled every 20 ms: how many, the longest wait and its statement), finish's time and lock
time, and the time the new store took to open. The schema is dropped unless ``--keep``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import Any

DEFAULT = "postgresql:///test?host=/var/run/postgresql"
OLD_SIDE = pathlib.Path(__file__).with_name("pg_online_old.py")
ISO = """to_char((timestamptz '2026-01-01' + (i + {d}) * interval '10 ms') AT TIME ZONE 'UTC',
'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')"""
FILL = f"""
INSERT INTO jobs (id, type, status, payload, result, attempts, priority, run_at, started_at,
                  completed_at, created_at, updated_at, ended_at, queue, tally)
SELECT md5(i::text), 'bench:old', CASE WHEN i % 100 = 0 THEN 'pending' ELSE 'completed' END,
       '{{"i": ' || i || ', "note": "an old job''s payload of a typical length"}}',
       CASE WHEN i % 100 = 0 THEN NULL ELSE '{{"ok": true, "n": ' || i || '}}' END,
       CASE WHEN i % 100 = 0 THEN 0 ELSE 1 END, 0, {ISO.format(d=0)},
       CASE WHEN i % 100 = 0 THEN NULL ELSE {ISO.format(d=1)} END,
       CASE WHEN i % 100 = 0 THEN NULL ELSE {ISO.format(d=2)} END,
       {ISO.format(d=0)}, {ISO.format(d=2)},
       CASE WHEN i % 100 = 0 THEN NULL ELSE {ISO.format(d=2)} END, 'default', 1
FROM generate_series(1, {{rows}}) i;
INSERT INTO job_attempts (job_id, type, attempt, outcome, due_at, started_at, ended_at, owner)
SELECT id, type, 1, 'completed', run_at, started_at, ended_at, 'old:1:1' FROM jobs
WHERE status = 'completed' AND right(id, 1) IN ('0', '1', '2', '3');
INSERT INTO job_counts (type, status, n) SELECT type, status, count(*) FROM jobs GROUP BY 1, 2;
"""


def _config(url: str, schema: str) -> Any:
    from shared.settings.config import Config

    cfg = Config().replace(database=url)
    return cfg.replace(postgres=dataclasses.replace(cfg.postgres, schema=schema))


def _old(*args: str) -> list[str]:
    """The command that runs :mod:`bench.pg_online_old` with ``args``; run it with the old
    tree's :func:`_old_env` and the old tree as its working directory (``-c`` puts the working
    directory first on sys.path)."""
    return [sys.executable, "-c", OLD_SIDE.read_text(), *args]


def _old_env(tree: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": tree}


def old_tree_error(tree: str) -> str | None:
    """Why ``tree`` is not a checkout of the jobq before the native step (its
    ``shared/engines/postgres/schema.py`` has ``VERSION == schema.NATIVE_VERSION - 1``, as a
    subprocess with it on PYTHONPATH prints), or None when it is."""
    from shared.engines.postgres import schema as schema_mod

    want = schema_mod.NATIVE_VERSION - 1
    path = pathlib.Path(tree) / "shared" / "engines" / "postgres" / "schema.py"
    if not path.is_file():
        return f"--old-tree {tree}: no {path} there (a jobq checkout of schema version {want})"
    got = subprocess.run(
        _old("version"), cwd=tree, env=_old_env(tree), capture_output=True, text=True
    )
    found = got.stdout.strip()
    if got.returncode != 0 or found != str(want):
        said = f"version {found}" if got.returncode == 0 else got.stderr.strip()[-300:]
        return (
            f"--old-tree {tree}: its PostgreSQL schema is {said}; the online upgrade starts "
            f"from version {want} (schema.NATIVE_VERSION - 1: a checkout before the native step)"
        )
    return None


def _create(tree: str, url: str, schema: str, rows: int) -> int:
    """The schema created by the old tree's migrations, filled with old-form rows; returns its
    ``meta.version``."""
    import psycopg

    subprocess.run(_old("create", url, schema), cwd=tree, env=_old_env(tree), check=True)
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f'SET search_path = "{schema}"')
        with c.transaction():
            for statement in FILL.replace("{rows}", str(int(rows))).split(";\n"):
                if statement.strip():
                    c.execute(statement)
        c.execute("VACUUM ANALYZE jobs")
        c.execute("VACUUM ANALYZE job_attempts")
        version = int(c.execute("SELECT version FROM meta").fetchone()[0])
    print(f"filled {rows:,} jobs in {time.perf_counter() - started:.1f} s", flush=True)
    return version


class Writers:
    """The old workers: subprocesses of :mod:`bench.pg_online_old` ``write``, each with an out
    file in ``work``, stopped by the stop file there (SIGTERM if one lingers)."""

    def __init__(self, tree: str, url: str, schema: str, n: int, work: str) -> None:
        self.stop_file = os.path.join(work, "stop")
        self.outs = [os.path.join(work, f"writer{i}.json") for i in range(n)]
        self.procs = [
            subprocess.Popen(
                _old("write", _named(url), schema, self.stop_file, out),
                cwd=tree,
                env=_old_env(tree),
            )
            for out in self.outs
        ]

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Until each has opened its store (RuntimeError if one exits or ``timeout`` passes)."""
        deadline = time.monotonic() + timeout
        while not all(os.path.exists(out + ".ready") for out in self.outs):
            if any(p.poll() is not None for p in self.procs) or time.monotonic() > deadline:
                raise RuntimeError("an old writer did not start (see its error above)")
            time.sleep(0.05)  # a bench: polling the writers' ready files

    def stop(self, timeout: float = 60.0) -> tuple[list[Any], list[str]]:
        """Stop them (the stop file) and wait; their timings and the ids they completed."""
        open(self.stop_file, "w").close()
        times: list[Any] = []
        ids: list[str] = []
        for proc, out in zip(self.procs, self.outs):
            if proc.wait(timeout) != 0:
                raise RuntimeError(f"an old writer exited with {proc.returncode}")
            with open(out) as f:
                got = json.load(f)
            times += [tuple(t) for t in got["times"]]
            ids += got["ids"]
        return times, ids

    def kill(self) -> None:
        """SIGTERM to any still running (each of them ours), then wait for it."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


WRITER = "bench_online_writer"  # the writers' application_name, for the lock watch
WATCH = """SELECT pid, query_start, extract(epoch FROM clock_timestamp() - query_start), query
FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'"""


def _named(url: str) -> str:
    return url + ("&" if "?" in url else "?") + f"application_name={WRITER}"


def _watch(url: str, stop: Any, found: dict[Any, tuple[float, str]]) -> None:
    """Every 20 ms, the writers' statements waiting on a lock, by (pid, start): the longest
    wait seen and the statement (the wait of each, within 20 ms)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as c:
        while not stop.wait(0.02):
            for pid, start, waited, query in c.execute(WATCH, (WRITER,)).fetchall():
                if waited > found.get((pid, start), (0.0, ""))[0]:
                    found[(pid, start)] = (float(waited), " ".join(query.split())[:60])


def _stats(times: list[tuple[float, str, float]], since: float, until: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for op in ("enqueue", "claim", "complete"):
        xs = sorted(d for t, o, d in times if o == op and since <= t < until)
        if xs:
            out[op] = {
                "n": len(xs),
                "per_s": round(len(xs) / max(until - since, 1e-9), 1),
                "p50_ms": round(1000 * xs[len(xs) // 2], 2),
                "p99_ms": round(1000 * xs[min(len(xs) - 1, int(len(xs) * 0.99))], 2),
                "max_ms": round(1000 * xs[-1], 1),
            }
    return out


def _prepare(url: str, schema: str, batch: int) -> tuple[float, float, dict[Any, Any]]:
    """This version's prepare, the writers' lock waits watched: (start, end, waits)."""
    import psycopg

    from shared.engines.postgres import online
    from shared.engines.postgres.native import NATIVE_COLUMNS

    waits: dict[Any, tuple[float, str]] = {}
    watching = threading.Event()
    watch = threading.Thread(target=_watch, args=(url, watching, waits))
    with psycopg.connect(url, autocommit=True) as c:
        t0 = time.time()
        watch.start()
        try:
            online.prepare(c, schema, NATIVE_COLUMNS, batch=batch, progress=_printer(t0))
        finally:
            watching.set()
            watch.join()
    return t0, time.time(), waits


def _finish(url: str, schema: str) -> Any:
    """This version's finish: to ``NATIVE_VERSION``, running ``NATIVE_AFTER`` after the swap."""
    import psycopg

    from shared.engines.postgres import online
    from shared.engines.postgres import schema as schema_mod
    from shared.engines.postgres.native import NATIVE_COLUMNS

    def after(conn: Any) -> None:
        conn.execute(schema_mod.NATIVE_AFTER)

    with psycopg.connect(url, autocommit=True) as c:
        return online.finish(
            c, schema, NATIVE_COLUMNS, version=schema_mod.NATIVE_VERSION, after=after
        )


def _reopen(url: str, schema: str, written: list[str]) -> dict[str, Any]:
    """A store of this version opened on the upgraded schema (its later steps run), timed; an
    old job and the last one an old writer completed read back (RuntimeError if not as
    written)."""
    from shared.engines import open_store
    from shared.engines.postgres import schema as schema_mod

    started = time.perf_counter()
    store = open_store(_config(url, schema))
    opened = time.perf_counter() - started
    try:
        old, new = store.get(_md5("1")), store.get(written[-1]) if written else None
    finally:
        store.close()
    if old is None or old.status != "completed" or old.result != {"ok": True, "n": 1}:
        raise RuntimeError(f"the old job {_md5('1')} did not read back as written: {old}")
    if new is None or new.status != "completed" or new.result != "ok":
        raise RuntimeError(f"the old writer's last job did not read back as written: {new}")
    return {
        "open_s": round(opened, 3),
        "version": schema_mod.VERSION,
        "old_job": {"id": old.id, "completed_at": old.completed_at, "result": old.result},
        "written_job": {"id": new.id, "completed_at": new.completed_at, "result": new.result},
    }


def _md5(text: str) -> str:
    import hashlib

    return hashlib.md5(text.encode()).hexdigest()


def run(args: argparse.Namespace) -> dict[str, Any]:
    import psycopg

    url, schema = args.database, f"jobq_bench_online_{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="jobq_bench_online_") as work:
        writers: Writers | None = None
        try:
            version = _create(args.old_tree, url, schema, args.rows)
            writers = Writers(args.old_tree, url, schema, args.writers, work)
            writers.wait_ready()
            time.sleep(args.baseline)  # a bench: the writers' baseline is a span of time
            t0, t1, waits = _prepare(url, schema, args.batch)
            times, written = writers.stop()
            done = _finish(url, schema)
            reopened = _reopen(url, schema, written)
            return {
                "rows": args.rows,
                "batch": args.batch,
                "writers": args.writers,
                "old_tree": args.old_tree,
                "from_version": version,
                "prepare_s": round(t1 - t0, 1),
                "finish_s": round(done.seconds, 3),
                "finish_lock_ms": round(1000 * done.lock_seconds, 1),
                "before": _stats(times, t0 - args.baseline, t0),
                "during_prepare": _stats(times, t0, t1),
                "lock_waits_seen": len(waits),
                "longest_lock_wait": _longest(waits),
                "new_store_open_s": reopened.pop("open_s"),
                "read_back": reopened,
            }
        finally:
            if writers is not None:
                writers.kill()
            if not args.keep:
                with psycopg.connect(url, autocommit=True) as c:
                    c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _longest(waits: dict[Any, tuple[float, str]]) -> dict[str, Any] | None:
    if not waits:
        return None
    seconds, query = max(waits.values())
    return {"ms": round(1000 * seconds, 1), "statement": query}


def _printer(t0: float) -> Any:
    last = [0.0]

    def say(text: str, batch_line: bool) -> None:
        now = time.time()
        if not batch_line or now - last[0] >= 5:
            last[0] = now
            print(f"  +{now - t0:6.1f} s  {text}", flush=True)

    return say


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.pg_online_upgrade")
    p.add_argument(
        "--old-tree",
        metavar="PATH",
        required=True,
        help="a jobq checkout of the schema version before the native step "
        "(schema.NATIVE_VERSION - 1); the old workers and the old migrations run from it",
    )
    p.add_argument("--database", default=os.environ.get("JOBQ_TEST_POSTGRES") or DEFAULT)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--batch", type=int, default=5_000)
    p.add_argument("--writers", type=int, default=2)
    p.add_argument("--baseline", type=float, default=10.0, help="seconds of writes before")
    p.add_argument("--keep", action="store_true", help="keep the schema afterwards")
    args = p.parse_args(argv)
    if not args.old_tree:
        p.error("--old-tree PATH is required: a jobq checkout before the native step")
    args.old_tree = os.path.abspath(args.old_tree)
    if (why := old_tree_error(args.old_tree)) is not None:
        p.error(why)
    print(json.dumps(run(args), indent=2))


if __name__ == "__main__":
    main()
