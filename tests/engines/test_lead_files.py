"""The idle lead's lock files for PostgreSQL: one file per server and database in
the temporary folder, however many schemas (queues) come and go, each queue locking a byte of
its own, so the leads of two queues never exclude each other."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile

from shared.engines.idlelead import IdleLead
from tests.engines import PostgresEngine
from tests.proc import env


def lead_files() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "jobq-pg-*-lead")))


def test_queues_on_one_database_share_one_lead_file_and_lead_apart(tmp_path):
    engines = [PostgresEngine(tmp_path) for _ in range(3)]
    before = lead_files()
    stores = [e.open() for e in engines]
    try:
        wakeups = [s.wakeup() for s in stores]
        assert len({w.lead.path for w in wakeups}) == 1  # one file for the three schemas
        assert len(lead_files() - before) <= 1  # and at most one new one here
        for w in wakeups:
            w.close()
        path, slots = wakeups[0].lead.path, [w.lead.slot for w in wakeups]
        assert len(set(slots)) == 3
        # another process leads the first queue: here the first one follows, the second leads
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys, time\nfrom shared.engines.idlelead import IdleLead\n"
                "l = IdleLead(sys.argv[1], int(sys.argv[2])); assert l.take(); print('lead', flush=True); "
                "time.sleep(60)",
                path[: -len("-lead")],
                str(slots[0]),
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=env(),
        )
        try:
            assert child.stdout.readline().strip() == "lead"
            first, second = (
                IdleLead(path[: -len("-lead")], slots[0]),
                IdleLead(path[: -len("-lead")], slots[1]),
            )
            assert first.take() is False and second.take() is True
            second.close()
            first.close()
        finally:
            child.kill()
            child.wait()
    finally:
        for s in stores:
            s.close()
        for e in engines:
            e.drop()
