"""What one job of a PostgreSQL drain costs, counted: jobq's store path against the raw loop.

    python -m bench.pg_drain_profile --database postgresql://127.0.0.1/test [--jobs 20000]
                                     [--batch 100] [--procs 2] [--rounds 2] [--systems jobq,raw]

Each round fills a fresh schema with no-op jobs and drains it as :mod:`bench.pg_drain_cost`
does (jobq: the store's ``finish_and_claim``, no handlers; raw: :mod:`bench.raw_pg`'s loop),
the systems alternated. Per job it reports counts that a loaded machine does not blur:

- client statements (``Cursor.execute`` calls in the workers) and trigger function calls
  (``pg_stat_user_functions``, the workers' sessions tracking ``pl`` functions);
- heap rows inserted, updated and HOT-updated, heap and index buffer hits
  (``pg_stat_user_tables``, ``pg_statio_user_*`` of the schema: other databases' and schemas'
  work is not counted);
- WAL: the records of the drain's LSN range that touch the schema's relations, or belong to a
  transaction that did, read with ``pg_waldump`` (the server's WAL directory must be readable:
  run as root or postgres on the server's machine); bytes without full-page images (steady:
  a page's first change after a checkpoint adds its image) and with; index entries inserted
  per index (``Btree INSERT_LEAF``/``INSERT_UPPER``/``SPLIT`` records);
- client and server-backend CPU (``time.process_time``, ``/proc/<pid>/stat``) and jobs/s,
  which the load of the machine does move (the load average is printed).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import time
from typing import Any

from . import pg, pg_drain_cost, raw_pg

WAL_DIR = os.environ.get("JOBQ_BENCH_PGWAL", "/var/lib/postgresql/15/main/pg_wal")
WALDUMP = os.environ.get("JOBQ_BENCH_WALDUMP", "/usr/lib/postgresql/15/bin/pg_waldump")
_REC = re.compile(
    r"rmgr: (\w+)\s+len \(rec/tot\):\s+(\d+)/\s*(\d+), tx:\s+(\d+), .*?desc: (\w+)(.*)$"
)
_REL = re.compile(r"rel \d+/(\d+)/(\d+)")


def _count_statements() -> list[int]:
    """Counts every ``Cursor.execute`` of this process from now on (a one-item list)."""
    import psycopg

    n = [0]
    orig = psycopg.Cursor.execute

    def execute(self: Any, *a: Any, **k: Any) -> Any:
        n[0] += 1
        return orig(self, *a, **k)

    psycopg.Cursor.execute = execute  # type: ignore[method-assign]
    return n


def _worker(raw: bool, url: str, schema: str, batch: int, out: Any) -> None:
    """One draining process: its statements counted, its session tracking trigger calls."""
    import psycopg

    connect = psycopg.Connection.connect.__func__  # type: ignore[attr-defined]

    def tracked(cls: Any, *a: Any, **k: Any) -> Any:
        conn = connect(cls, *a, **k)
        conn.execute("SET track_functions = 'pl'")  # a superuser's session setting
        return conn

    psycopg.Connection.connect = classmethod(tracked)  # type: ignore[method-assign,assignment]
    psycopg.connect = psycopg.Connection.connect  # type: ignore[assignment]
    n = _count_statements()

    class Out:
        def put(self, item: Any) -> None:
            out.put((*item, n[0]))

    fn = pg_drain_cost._drain_raw if raw else pg_drain_cost._drain_jobq
    try:
        fn(url, schema, batch, Out())
    except Exception as exc:  # the parent stops instead of waiting (too many clients, ...)
        out.put(("error", repr(exc)))


def _snapshot(c: Any, schema: str) -> dict[str, float]:
    """The schema's cumulative counters (a fresh statistics snapshot)."""
    c.execute("SELECT pg_stat_clear_snapshot()")
    snap: dict[str, float] = {}
    q = {
        "tables": "SELECT sum(n_tup_ins), sum(n_tup_upd), sum(n_tup_hot_upd), sum(n_tup_del) "
        "FROM pg_stat_user_tables WHERE schemaname = %s",
        "io": "SELECT sum(heap_blks_hit), sum(coalesce(idx_blks_hit, 0)), "
        "sum(heap_blks_read + coalesce(idx_blks_read, 0)) "
        "FROM pg_statio_user_tables WHERE schemaname = %s",
        "fn": "SELECT coalesce(sum(calls), 0), 0, 0, 0 FROM pg_stat_user_functions "
        "WHERE schemaname = %s",
    }
    names = {
        "tables": ("rows_ins", "rows_upd", "rows_hot_upd", "rows_del"),
        "io": ("heap_hits", "idx_hits", "blks_read"),
        "fn": ("trigger_calls",),
    }
    for key, sql in q.items():
        row = c.execute(sql, (schema,)).fetchone()
        for name, v in zip(names[key], row):
            snap[name] = float(v or 0)
    snap["lsn"] = float(c.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()[0])
    return snap


def _relations(c: Any, schema: str) -> dict[str, str]:
    """relfilenode -> relation name, of every relation in ``schema`` (with toast)."""
    rows = c.execute(
        "SELECT c.relfilenode::text, c.relname FROM pg_class c JOIN pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relfilenode <> 0 "
        "UNION ALL SELECT t.relfilenode::text, 'toast:' || c.relname FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_class t ON t.oid = c.reltoastrelid "
        "WHERE n.nspname = %s",
        (schema, schema),
    ).fetchall()
    return {r[0]: r[1] for r in rows}


def _lsn_text(v: float) -> str:
    v = int(v)
    return f"{v >> 32:X}/{v & 0xFFFFFFFF:X}"


def reserve_wal(c: Any) -> None:
    """Keep the server's WAL from here until ``c`` closes (a temporary replication slot), so
    that a long drain's segments are still there for :func:`wal_of` after checkpoints."""
    c.execute(
        "SELECT pg_create_physical_replication_slot(%s, true, true)",
        (f"bench_wal_{os.getpid()}_{int(time.time() * 1000)}",),
    )


def wal_of(start: float, end: float, rels: dict[str, str]) -> dict[str, Any]:
    """The WAL records between two LSNs that are the schema's (see the module's docstring): a
    record of a transaction comes before its commit, so one pass finds both."""
    stats: dict[str, Any] = {"rec_bytes": 0, "tot_bytes": 0, "records": 0}
    kinds: collections.Counter[str] = collections.Counter()
    kind_bytes: collections.Counter[str] = collections.Counter()
    index_entries: collections.Counter[str] = collections.Counter()
    xids: set[str] = set()
    cmd = [WALDUMP, "-p", WAL_DIR, "-s", _lsn_text(start), "-e", _lsn_text(end)]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as p:
        assert p.stdout is not None
        for line in p.stdout:
            m = _REC.search(line)
            if m is None:
                continue
            ours = [rels[r] for _, r in _REL.findall(line) if r in rels]
            if ours and m.group(4) != "0":
                xids.add(m.group(4))
            elif not ours and m.group(4) not in xids:
                continue
            stats["rec_bytes"] += int(m.group(2))
            stats["tot_bytes"] += int(m.group(3))
            stats["records"] += 1
            kinds[f"{m.group(1)}/{m.group(5)}"] += 1
            kind_bytes[f"{m.group(1)}/{m.group(5)}"] += int(m.group(2))
            if m.group(1) == "Btree" and m.group(5).startswith("INSERT"):
                index_entries[ours[0] if ours else "?"] += 1
    stats["kinds"] = dict(kinds)
    stats["kind_bytes"] = dict(kind_bytes)
    stats["index_entries"] = dict(index_entries)
    return stats


def one_round(
    url: str, jobs: int, batch: int, procs: int, raw: bool, tweak: str = ""
) -> dict[str, Any]:
    """One drain of ``jobs`` by ``procs`` processes, with its counts per job (``tweak``: SQL
    run in the filled schema first, to weigh a part by its absence)."""
    with pg.fresh_schema(url, "prof", create=raw) as schema:
        if raw:
            with pg.connect(url, schema) as c:
                raw_pg.create(c)
                raw_pg.fill(c, jobs)
        else:
            pg_drain_cost._fill_jobq(url, schema, jobs)
        with pg.connect(url, schema) as c:
            for part in filter(None, tweak.split(";;")):  # ";;": statements run apart
                c.execute(part)
            c.execute("ANALYZE")
            rels = _relations(c, schema)
            reserve_wal(c)
            before = _snapshot(c, schema)
            got, wall = pg.forked_drain(_worker, (raw, url, schema, batch), procs, 600)
            time.sleep(0.5)  # the exited backends' statistics flushed
            after = _snapshot(c, schema)
            wal = wal_of(before["lsn"], after["lsn"], rels)
    n = sum(g[0] for g in got)
    per = {k: (after[k] - before[k]) / n for k in after if k != "lsn"}
    return {
        "system": ("raw" if raw else "jobq") + (f" [{tweak}]" if tweak else ""),
        "jobs": n,
        "jobs_per_s": n / wall,
        "load": os.getloadavg()[0],
        "client_statements": sum(g[4] for g in got) / n,
        "client_us": 1e6 * sum(g[2] for g in got) / n,
        "server_us": 1e6 * sum(g[3] for g in got) / n,
        **per,
        "wal_rec_bytes": wal["rec_bytes"] / n,
        "wal_tot_bytes": wal["tot_bytes"] / n,
        "wal_records": wal["records"] / n,
        "wal_kinds": {k: v / n for k, v in sorted(wal["kinds"].items())},
        "wal_kind_bytes": {k: v / n for k, v in sorted(wal["kind_bytes"].items())},
        "index_entries": {k: v / n for k, v in sorted(wal["index_entries"].items())},
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m bench.pg_drain_profile", description=__doc__.split("\n\n")[1]
    )
    p.add_argument("--database", required=True)
    p.add_argument("--jobs", type=int, default=20000)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--systems", default="jobq,raw")
    p.add_argument(
        "--tweak",
        action="append",
        default=[],
        help="also jobq with this SQL run first (repeatable; ';;' separates statements run apart, "
        "as VACUUM must)",
    )
    args = p.parse_args(argv)
    for _ in range(args.rounds):
        for system in args.systems.split(","):
            r = one_round(args.database, args.jobs, args.batch, args.procs, system == "raw")
            print(json.dumps(r), flush=True)
        for tweak in args.tweak:
            r = one_round(args.database, args.jobs, args.batch, args.procs, False, tweak)
            print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
