"""An online step of ``jobq db upgrade`` (:mod:`shared.engines.postgres.onlinesteps`) on a big
live queue, measured from the version before it.

    python -m bench.pg_online_upgrade --old-tree PATH [--step native|ids]
        [--database postgresql:///test?host=...] [--rows 1000000] [--batch 5000] [--writers 2]
        [--baseline 10] [--keep]

``--step``: ``native`` (the default: times and JSON to native types) or ``ids`` (the job ids to
uuid). ``--old-tree`` (required): a checkout of the jobq whose PostgreSQL schema version is the
one before the step (``native``: ``schema.NATIVE_VERSION - 1``, text times and JSON; ``ids``:
``schema.IDS_VERSION - 1``, text ids), checked by asking it. Everything the old version does runs in subprocesses with that checkout on PYTHONPATH (and
as their working directory), by :mod:`bench.pg_online_old`: a store opened on a scratch schema
creates it (the old migrations), which is then filled with ``--rows`` jobs of the old (text)
form by ``generate_series`` (1 in 100 pending, the rest completed with a result; a quarter of
those with an attempt row; the ``ids`` step also a workflow edge for 1 job in 10);
``--writers`` old workers loop enqueue + claim + complete through their store, each statement
timed, for ``--baseline`` seconds, then while this version's
:func:`shared.engines.postgres.online.prepare` runs over the step's columns. Then they stop (a
stop file, as a deploy stops the old workers) and :func:`~shared.engines.postgres.online.finish`
runs (the step's ``after`` SQL, to its version); then an old job and one an old worker
completed during prepare are read back: ``native`` by a store of this version (it runs the
steps after the native one), ``ids`` in plain SQL (their ids compared as 32 hex digits).

Reports prepare's time, the writers' p50/p99/max per operation before and during it (the
longest is the longest any claim or outcome took, waiting on a lock or on the machine), their
rate, the writers' statements seen waiting on a lock during prepare (``pg_stat_activity``
sampled every 20 ms: how many, the longest wait and its statement, the longest a claim
waited), finish's time and lock time, and the time the new store took to open. The schema is dropped unless ``--keep``.
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
       ('{{"i": ' || i || ', "note": "an old job''s payload of a typical length"}}'){{js}},
       (CASE WHEN i % 100 = 0 THEN NULL ELSE '{{"ok": true, "n": ' || i || '}}' END){{js}},
       CASE WHEN i % 100 = 0 THEN 0 ELSE 1 END, 0, ({ISO.format(d=0)}){{ts}},
       (CASE WHEN i % 100 = 0 THEN NULL ELSE {ISO.format(d=1)} END){{ts}},
       (CASE WHEN i % 100 = 0 THEN NULL ELSE {ISO.format(d=2)} END){{ts}},
       ({ISO.format(d=0)}){{ts}}, ({ISO.format(d=2)}){{ts}},
       (CASE WHEN i % 100 = 0 THEN NULL ELSE {ISO.format(d=2)} END){{ts}}, 'default', 1
FROM generate_series(1, {{rows}}) i;
INSERT INTO job_attempts (job_id, type, attempt, outcome, due_at, started_at, ended_at, owner)
SELECT id, type, 1, 'completed', run_at, started_at, ended_at, 'old:1:1' FROM jobs
WHERE status = 'completed' AND right(id, 1) IN ('0', '1', '2', '3');
INSERT INTO job_counts (type, status, n) SELECT type, status, count(*) FROM jobs GROUP BY 1, 2;
"""
# The ids' step: workflow edges too (their both ends are converted), 1 job in 10 a child of the
# job before it, done.
EDGES = """
INSERT INTO job_deps (child, parent, pos, done)
SELECT md5(i::text), md5((i - 1)::text), 0, 1 FROM generate_series(2, {rows}, 10) i;
"""
# How the old schema takes times and JSON written as text: as they are (before the native
# step) or cast (after it: no assignment cast from text there).
CASTS = {
    "native": {"{ts}": "", "{js}": ""},
    "ids": {"{ts}": "::timestamptz", "{js}": "::jsonb"},
}


def online_step(name: str) -> Any:
    """The :class:`~shared.engines.postgres.onlinesteps.OnlineStep` ``--step name`` measures."""
    from shared.engines.postgres import onlinesteps

    return next(s for s in onlinesteps.steps() if s.name == name.upper())


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


def old_tree_error(tree: str, step: str = "native") -> str | None:
    """Why ``tree`` is not a checkout of the jobq before the online ``step`` (its
    ``shared/engines/postgres/schema.py`` has ``VERSION`` the step's version - 1, as a
    subprocess with it on PYTHONPATH prints), or None when it is."""
    measured = online_step(step)
    want = measured.version - 1
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
            f"--old-tree {tree}: its PostgreSQL schema is {said}; the online step "
            f"{measured.name} starts from version {want} "
            f"(schema.{measured.name}_VERSION - 1: a checkout before that step)"
        )
    return None


def _create(tree: str, url: str, schema: str, rows: int, step: str) -> int:
    """The schema created by the old tree's migrations, filled with old-form rows (those of
    the version before ``step``); returns its ``meta.version``."""
    import psycopg

    subprocess.run(_old("create", url, schema), cwd=tree, env=_old_env(tree), check=True)
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f'SET search_path = "{schema}"')
        with c.transaction():
            for statement in _fill(step, rows).split(";\n"):
                if statement.strip():
                    c.execute(statement)
        c.execute("VACUUM ANALYZE jobs")
        c.execute("VACUUM ANALYZE job_attempts")
        c.execute("VACUUM ANALYZE job_deps")
        version = int(c.execute("SELECT version FROM meta").fetchone()[0])
    print(f"filled {rows:,} jobs in {time.perf_counter() - started:.1f} s", flush=True)
    return version


def _fill(step: str, rows: int) -> str:
    """The fill's SQL for the schema before ``step``, ``rows`` jobs."""
    sql = FILL + (EDGES if step == "ids" else "")
    for marker, cast in CASTS[step].items():
        sql = sql.replace(marker, cast)
    return sql.replace("{rows}", str(int(rows)))


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


CLAIM = "SET status = 'running'"  # how a claim's statement begins (its first 60 characters)
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


def _prepare(url: str, schema: str, batch: int, step: Any) -> tuple[float, float, dict[Any, Any]]:
    """This version's prepare of ``step``, the writers' lock waits watched: (start, end,
    waits)."""
    import psycopg

    from shared.engines.postgres import online

    waits: dict[Any, tuple[float, str]] = {}
    watching = threading.Event()
    watch = threading.Thread(target=_watch, args=(url, watching, waits))
    with psycopg.connect(url, autocommit=True) as c:
        t0 = time.time()
        watch.start()
        try:
            online.prepare(c, schema, step.columns, batch=batch, progress=_printer(t0))
        finally:
            watching.set()
            watch.join()
    return t0, time.time(), waits


def _finish(url: str, schema: str, step: Any) -> Any:
    """This version's finish of ``step``: to its version, running its ``after`` SQL after the
    swap."""
    import psycopg

    from shared.engines.postgres import online

    def after(conn: Any) -> None:
        conn.execute(step.after)

    with psycopg.connect(url, autocommit=True) as c:
        return online.finish(
            c, schema, step.columns, version=step.version, after=after if step.after else None
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


def _read_back_ids(url: str, schema: str, written: list[str]) -> dict[str, Any]:
    """An old job and the last one an old writer completed, found by their 32-hex ids in the
    uuid column and read back as 32 hex digits (RuntimeError if not as written)."""
    import psycopg

    read = (
        f"SELECT replace(id::text, '-', ''), status, result::text FROM \"{schema}\".jobs "
        "WHERE id = %s::uuid"
    )
    with psycopg.connect(url, autocommit=True) as c:
        kind = c.execute(
            "SELECT data_type FROM information_schema.columns WHERE table_schema = %s "
            "AND table_name = 'jobs' AND column_name = 'id'",
            (schema,),
        ).fetchone()[0]
        old = c.execute(read, (_md5("1"),)).fetchone()
        new = c.execute(read, (written[-1],)).fetchone() if written else None
    if kind != "uuid" or old is None or old[:2] != (_md5("1"), "completed"):
        raise RuntimeError(f"the old job {_md5('1')} did not read back as written: {old}")
    if new is None or new[:2] != (written[-1], "completed"):
        raise RuntimeError(f"the old writer's last job did not read back as written: {new}")
    return {"old_job": list(old), "written_job": list(new), "id_type": kind}


def _md5(text: str) -> str:
    import hashlib

    return hashlib.md5(text.encode()).hexdigest()


def run(args: argparse.Namespace) -> dict[str, Any]:
    import psycopg

    url, schema = args.database, f"jobq_bench_online_{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="jobq_bench_online_") as work:
        writers: Writers | None = None
        try:
            step = online_step(args.step)
            version = _create(args.old_tree, url, schema, args.rows, args.step)
            writers = Writers(args.old_tree, url, schema, args.writers, work)
            writers.wait_ready()
            time.sleep(args.baseline)  # a bench: the writers' baseline is a span of time
            t0, t1, waits = _prepare(url, schema, args.batch, step)
            times, written = writers.stop()
            done = _finish(url, schema, step)
            if args.step == "ids":  # plain SQL: the store's SQL on uuid ids is not this bench's
                reopened = {"open_s": None, **_read_back_ids(url, schema, written)}
            else:
                reopened = _reopen(url, schema, written)
            return {
                "step": f"{step.name} (to version {step.version})",
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
                "longest_claim_lock_wait": _longest(
                    {k: v for k, v in waits.items() if CLAIM in v[1]}
                ),
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
        help="a jobq checkout of the schema version before the step (schema.NATIVE_VERSION - 1 "
        "or schema.IDS_VERSION - 1); the old workers and the old migrations run from it",
    )
    p.add_argument(
        "--step",
        choices=("native", "ids"),
        default="native",
        help="the online step measured: native (times and JSON) or ids (job ids to uuid)",
    )
    p.add_argument("--database", default=os.environ.get("JOBQ_TEST_POSTGRES") or DEFAULT)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--batch", type=int, default=5_000)
    p.add_argument("--writers", type=int, default=2)
    p.add_argument("--baseline", type=float, default=10.0, help="seconds of writes before")
    p.add_argument("--keep", action="store_true", help="keep the schema afterwards")
    args = p.parse_args(argv)
    if not args.old_tree:
        p.error("--old-tree PATH is required: a jobq checkout before the measured step")
    args.old_tree = os.path.abspath(args.old_tree)
    if (why := old_tree_error(args.old_tree, args.step)) is not None:
        p.error(why)
    print(json.dumps(run(args), indent=2))


if __name__ == "__main__":
    main()
