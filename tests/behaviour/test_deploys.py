"""Deploying new code to a running supervisor: ``jobq reload`` (SIGHUP) rolls the workers onto
the handler modules' code when it changed on disk (a helper module the handler imports counts
too), ``jobq reload --code`` rolls them even when no file looks changed, and code that no longer
imports is refused while the workers keep running the old code. Real supervisors, both engines.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from shared.producer.api import JobQueue
from shared.settings.config import load
from tests.proc import log_events, wait_until, write_config
from tests.unit.cli.test_cli import jobq, ok

pytestmark = pytest.mark.engines

HANDLER = """
from worker import handler
from deployhelp import version


@handler("deploy:which")
def which(payload, job):
    return {"version": version()}
"""


def helper(v: str) -> str:
    return f"def version():\n    return {v!r}\n"


def write(path, text: str) -> None:
    """Write ``text`` and move the file's time on (two writes within one clock tick look alike)."""
    path.write_text(text)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, max(st.st_mtime_ns, time.time_ns()) + 10**9))


def run_one(q: JobQueue) -> str:
    jid = q.enqueue("deploy:which", {})
    job = wait_until(
        lambda: (j := q.get(jid)).status in ("completed", "failed") and j,
        timeout=30,
        what=f"job {jid}",
    )
    assert job.status == "completed", job.error
    return job.result["version"]


@pytest.fixture
def deployed(database, tmp_path, sup_factory):
    (tmp_path / "deployjobs.py").write_text(HANDLER)
    write(tmp_path / "deployhelp.py", helper("v1"))
    path = write_config(
        tmp_path, handlers=["deployjobs"], log_format="json", supervisor={"workers": 2}
    )
    sup = sup_factory(path)
    with JobQueue(config=load(str(path))) as q:
        assert run_one(q) == "v1"
        yield tmp_path, path, sup, q


def reloaded(sup, n: int) -> dict:
    """The supervisor's ``n``-th ``config.reloaded`` line (its workers log their own, codeless)."""

    def mine() -> list[dict]:
        return [e for e in log_events(sup, "config.reloaded") if "code" in e]

    return wait_until(
        lambda: len(e := mine()) >= n and e[n - 1],
        timeout=30,
        what=f"reload {n}",
    )


def test_a_reload_after_a_deploy_runs_the_new_code(deployed):
    folder, path, sup, q = deployed
    write(folder / "deployhelp.py", helper("v2"))  # only the helper the handler imports
    ok(jobq(path, "reload"))
    assert reloaded(sup, 1)["code"] == "reloaded"
    assert [e["modules"] for e in log_events(sup, "code.reloaded")] == ["deployhelp"]
    wait_until(lambda: run_one(q) == "v2", timeout=30, what="a job on the new code")
    ok(jobq(path, "reload"))  # nothing changed since: nothing rolls
    assert reloaded(sup, 2)["code"] == "unchanged"
    assert len(log_events(sup, "code.reloaded")) == 1


def test_reload_code_rolls_the_workers_even_when_no_file_looks_changed(deployed):
    folder, path, sup, q = deployed
    out = ok(jobq(path, "reload", "--code"))
    assert "and its workers' code" in out
    assert reloaded(sup, 1)["code"] == "reloaded"
    assert log_events(sup, "code.reloaded")[0]["modules"] == "(asked)"
    assert run_one(q) == "v1"


def test_code_that_no_longer_imports_is_refused_and_the_old_code_runs_on(deployed):
    folder, path, sup, q = deployed
    write(folder / "deployhelp.py", "def version(:\n")  # a syntax error
    sup.signal(signal.SIGHUP)
    assert reloaded(sup, 1)["code"] == "refused"
    [refused] = log_events(sup, "code.rejected")
    assert refused["modules"] == "deployhelp" and "SyntaxError" in refused["error"]
    assert run_one(q) == "v1"
    write(folder / "deployhelp.py", helper("v3"))  # the fix, deployed
    sup.signal(signal.SIGHUP)
    assert reloaded(sup, 2)["code"] == "reloaded"
    wait_until(lambda: run_one(q) == "v3", timeout=30, what="a job on the fixed code")
