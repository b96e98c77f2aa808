"""Job ids as 32-hex ``text`` or as ``uuid``, in the raw loop (:mod:`bench.raw_pg`): drain rate, WAL
bytes per job and index sizes at a given table size (a figure for the column type's choice).

    python -m bench.pg_id_types --database postgresql://127.0.0.1/test [--rows 1000000]
                                [--procs 8] [--batch 100] [--rounds 2]

Each round fills a fresh schema with ``--rows`` due jobs whose ids are random (a uuid4, as jobq
makes them: stored as its 32 hex digits in a ``text COLLATE "C"`` column, as jobq's schema has
it, or as ``uuid``) and drains it with ``--procs`` processes of the raw 100-per-transaction
loop, the two types alternated. WAL is counted as :mod:`bench.pg_drain_profile` counts it (the
schema's records, ``pg_waldump``); index sizes after the fill and after the drain.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from . import pg, raw_pg
from .pg_drain_profile import _relations, _snapshot, reserve_wal, wal_of

_ID = {
    "text": ('text COLLATE "C" PRIMARY KEY', "replace(gen_random_uuid()::text, '-', '')"),
    "uuid": ("uuid PRIMARY KEY", "gen_random_uuid()"),
}
_IDENTITY = "bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY"


def _sql(kind: str) -> tuple[str, str, str]:
    """The raw loop's DDL, fill and completion with ids of type ``kind``."""
    column, _ = _ID[kind]
    ddl = raw_pg.DDL.replace(_IDENTITY, column)
    complete = raw_pg.COMPLETE.replace("%(ids)s::bigint[]", f"%(ids)s::{kind}[]")
    fill = (
        f"INSERT INTO jobs (id, type, run_at) SELECT {_ID[kind][1]}, 'bench:noop', "
        "now() - interval '1 second' FROM generate_series(1, %s)"
    )
    return ddl, fill, complete


def _drain(kind: str, url: str, schema: str, batch: int, out: Any) -> None:
    """One raw worker on ``kind`` ids (the loop of :func:`bench.raw_pg.work`)."""
    _, _, complete = _sql(kind)
    raw_pg.COMPLETE = complete  # this process's own module (forked): ids of this type
    try:
        conn = pg.connect(url, schema)
    except Exception as exc:  # the parent stops instead of waiting (too many clients, ...)
        out.put(("error", repr(exc)))
        return
    t0 = time.perf_counter()
    n = raw_pg.work(conn, f"raw:{os.getpid()}", batch)
    out.put((n, time.perf_counter() - t0))
    conn.close()


def _sizes(c: Any) -> dict[str, int]:
    rows = c.execute(
        "SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c "
        "WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'i')"
    ).fetchall()
    return {r[0]: int(r[1]) for r in rows}


def one_round(url: str, kind: str, rows: int, procs: int, batch: int) -> dict[str, Any]:
    """Fill ``rows`` jobs with ``kind`` ids and drain them; rate, WAL and sizes."""
    ddl, fill, _ = _sql(kind)
    with pg.fresh_schema(url, f"ids_{kind}") as schema:
        with pg.connect(url, schema) as c:
            c.execute(ddl)
            c.execute(fill, (rows,))
            c.execute("VACUUM ANALYZE jobs")
            filled = _sizes(c)
            rels = _relations(c, schema)
            reserve_wal(c)
            before = _snapshot(c, schema)
            got, wall = pg.forked_drain(_drain, (kind, url, schema, batch), procs, 1800)
            after = _snapshot(c, schema)
            wal = wal_of(before["lsn"], after["lsn"], rels)
            drained = _sizes(c)
    n = sum(g[0] for g in got)
    return {
        "id": kind,
        "jobs": n,
        "jobs_per_s": n / wall,
        "load": os.getloadavg()[0],
        "wal_rec_bytes": wal["rec_bytes"] / n,
        "wal_tot_bytes": wal["tot_bytes"] / n,
        "size_filled": filled,
        "size_drained": drained,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m bench.pg_id_types", description=__doc__.split("\n\n")[1]
    )
    p.add_argument("--database", required=True)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--procs", type=int, default=8)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args(argv)
    for _ in range(args.rounds):
        for kind in ("text", "uuid"):
            r = one_round(args.database, kind, args.rows, args.procs, args.batch)
            print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
