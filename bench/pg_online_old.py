"""The old jobq's side of :mod:`bench.pg_online_upgrade`: run by the jobq of the version before
the measured online step (its checkout on PYTHONPATH and as the working directory), never
imported.

    python -c "$(cat bench/pg_online_old.py)" version
    python -c "$(cat bench/pg_online_old.py)" create URL SCHEMA
    python -c "$(cat bench/pg_online_old.py)" write URL SCHEMA STOP_FILE OUT_FILE

``version`` prints that jobq's PostgreSQL schema version. ``create`` opens a store on SCHEMA
(its migrations create it) and closes it. ``write`` is one of the old workers: once its store is
open it creates ``OUT_FILE.ready``, then loops enqueue + claim + complete, each statement timed,
until STOP_FILE exists or it gets SIGTERM; then it writes ``{"times": [[wall start, operation,
seconds], ...], "ids": [the jobs it completed, the last 100]}`` to OUT_FILE (JSON) and exits 0.

It uses only what both versions have: ``shared.engines.open_store``, ``shared.model.job``'s
``NewJob`` and ``Finish`` and ``shared.settings.config.Config``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import threading
import time
import uuid
from typing import Any


def _store(url: str, schema: str) -> Any:
    from shared.engines import open_store
    from shared.settings.config import Config

    cfg = Config().replace(database=url)
    return open_store(cfg.replace(postgres=dataclasses.replace(cfg.postgres, schema=schema)))


def _write(url: str, schema: str, stop_file: str, out_file: str) -> None:
    from shared.model.job import Finish, NewJob

    stop = threading.Event()
    # the handler only records the signal; the loop sees it before its next job
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    store = _store(url, schema)
    owner, times, ids = f"bench:{os.getpid()}:1", [], []
    open(out_file + ".ready", "w").close()
    try:
        while not stop.is_set() and not os.path.exists(stop_file):
            now = time.time()
            job = NewJob(uuid.uuid4().hex, "bench:new", '{"n": 1}', 0, now, None, None)
            t0 = time.perf_counter()
            store.enqueue([job], now)
            t1 = time.perf_counter()
            got = store.claim(owner, os.getpid(), time.time(), 1)
            t2 = time.perf_counter()
            times += [(now, "enqueue", t1 - t0), (now, "claim", t2 - t1)]
            if got:
                j = got[0]
                done = Finish("completed", j.id, j.attempts, '"ok"')
                store.finish_and_claim([done], owner, os.getpid(), time.time(), 0)
                times.append((now, "complete", time.perf_counter() - t2))
                ids = ids[-99:] + [j.id]
    finally:
        store.close()
    with open(out_file + ".tmp", "w") as f:
        json.dump({"times": times, "ids": ids}, f)
    os.replace(out_file + ".tmp", out_file)


def main(argv: list[str]) -> None:
    command, args = argv[0], argv[1:]
    if command == "version":
        from shared.engines.postgres import schema

        print(schema.VERSION)
    elif command == "create":
        _store(*args).close()
    elif command == "write":
        _write(*args)
    else:
        raise SystemExit(f"pg_online_old: unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
