"""The database file deleted or replaced under running processes: the path no
longer names the open file, so the supervisor and its workers say so and exit
DATABASE_UNAVAILABLE instead of serving a file nobody else sees."""

from __future__ import annotations

import json
import os
import time

import pytest

from shared import JobQueue
from shared.engines.sqlite.health import DatabaseFile
from shared.model.exitcodes import ExitCode
from tests.proc import wait_until, worker_rows, write_config


def test_database_file_notes_deletion_and_replacement(tmp_path):
    path = str(tmp_path / "q.db")
    JobQueue(path).close()
    watched = DatabaseFile(path)
    assert watched.problem() is None
    os.replace(path, path + ".moved")
    os.link(path + ".moved", path)  # the same file under the path again: fine
    assert watched.problem() is None
    os.unlink(path)
    assert "was deleted" in watched.problem() and path in watched.problem()
    JobQueue(path).close()
    assert "was replaced by another file" in watched.problem()
    assert DatabaseFile(":memory:").problem() is None


@pytest.mark.parametrize("how", ["replaced", "deleted"])
def test_supervisor_exits_database_unavailable_when_its_file_is_replaced(
    tmp_path, sup_factory, how
):
    cfg = write_config(
        tmp_path, handlers=["procjobs"], log_format="json", supervisor={"workers": 2}
    )
    sup = sup_factory(cfg)
    db = tmp_path / "q.db"
    wait_until(lambda: len(worker_rows(cfg)) == 2, what="2 workers registered")
    if how == "replaced":
        other = tmp_path / "other.db"
        with JobQueue(str(other)) as q:
            q.enqueue("proc:ok", {})
        os.replace(other, db)
    else:
        os.unlink(db)
    t0 = time.monotonic()
    assert sup.wait(20) == ExitCode.DATABASE_UNAVAILABLE
    took = time.monotonic() - t0
    lines = [json.loads(x) for x in sup.output().splitlines() if x.startswith("{")]
    said = [e for e in lines if e.get("event") == "supervisor.database_replaced"]
    assert len(said) == 1 and str(db) in said[0]["error"], sup.output()[-2000:]
    assert ("was deleted" if how == "deleted" else "was replaced") in said[0]["error"]
    assert (
        lines[-1]["event"] == "supervisor.stopped" and lines[-1]["code"] == "database_unavailable"
    )
    print(f"exit {took:.2f} s after the file was {how}")
    assert took < 20
    if how == "deleted":
        assert not db.exists()  # nothing re-created an empty database there
