"""Workflows under chaos, against real supervisors on each engine: ``extract -> N x
transform -> load`` graphs while a random worker is SIGKILLed every ~100 ms and the supervisor is
SIGKILLed and restarted twice (bench/flowchaos.py: every job ends once, no run overlaps another,
every load runs after all its transforms ended and receives all their results).

The default run is small (3 graphs of 20 jobs, one with a transform that fails for good: its
load must end cancelled, naming it); the full size (20 graphs of 102) is marked slow."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench.flowchaos import check_loads
from tests.engines import postgres_url, require_postgres

pytestmark = pytest.mark.engines
REPO = next(
    p
    for p in __import__("pathlib").Path(__file__).resolve().parents
    if (p / "pyproject.toml").exists()
)


def soak(
    tmp_path, database, graphs: int, width: int, job_ms: int, timeout: float, failing: int = 0
) -> dict:
    out = tmp_path / "report.json"
    argv = [
        sys.executable,
        "-m",
        "bench.flowchaos",
        "--graphs",
        str(graphs),
        "--width",
        str(width),
        "--workers",
        "8",
        "--kill-every",
        "0.1",
        "--supervisor-kills",
        "2",
        "--job-ms",
        str(job_ms),
        "--json",
        str(out),
        "--timeout",
        str(timeout),
        "--failing",
        str(failing),
    ]
    if database.name == "postgresql":
        require_postgres()
        argv += ["--database", postgres_url()]
    p = subprocess.run(argv, cwd=str(REPO), capture_output=True, text=True, timeout=timeout + 60)
    assert out.exists(), (p.stdout, p.stderr)
    rep = json.loads(out.read_text())
    assert rep["lost"] == 0 and rep["overlapping"] == 0 and rep["unexplained"] == 0, rep[
        "problems"
    ][:5]
    assert rep["problems"] == [] and rep["bad_loads"] == [], (
        rep["problems"][:5],
        rep["bad_loads"][:5],
    )
    assert rep["jobs"] == graphs * (width + 2)
    assert (rep["completed"], rep["failed"]) == (
        rep["jobs"] - 2 * failing,
        failing,
    )  # a transform, and its load cancelled
    assert rep["supervisor_kills"] == 2 and rep["worker_kills"] > 0
    assert p.returncode == 0, p.stderr
    return rep


def test_flow_graphs_survive_worker_and_supervisor_kills(tmp_path, database):
    """3 graphs of 20 jobs; in one of them a transform fails for good: its load ends cancelled,
    naming it."""
    soak(tmp_path, database, graphs=3, width=18, job_ms=100, timeout=180, failing=1)


@pytest.mark.slow
def test_flow_graphs_full_size(tmp_path, database):
    """The full size: 20 graphs of extract -> 100 transforms -> load."""
    soak(tmp_path, database, graphs=20, width=100, job_ms=2, timeout=1200)


def test_the_load_oracle_catches_an_early_or_short_load():
    class Rows:
        def __init__(self, rows):
            self.rows = rows

        def query(self, sql):
            if "cancelled" in sql:
                return [(r[0], r[3]) for r in self.rows if r[1] == "cancelled"]
            return [r[:3] for r in self.rows]

    t1, t2 = {"pid": 1, "attempt": 1, "start": 1.0}, {"pid": 2, "attempt": 1, "start": 1.0}
    log = [
        {"ev": "end", "job": "t1", "pid": 1, "attempt": 1, "start": 1.0, "end": 2.0},
        {"ev": "end", "job": "t2", "pid": 2, "attempt": 1, "start": 1.0, "end": 5.0},
        {"ev": "start", "job": "L", "t": 3.0},
    ]
    load = {"parents": {"t1": t1, "t2": t2}}
    rows = [
        ("t1", "completed", json.dumps(t1), None),
        ("t2", "completed", json.dumps(t2), None),
        ("L", "completed", json.dumps(load), None),
    ]
    assert check_loads(Rows(rows), log, [["e", "t1", "t2", "L"]]) == [
        "load L: a run started before its last transform ended"
    ]
    log[-1]["t"] = 6.0
    assert check_loads(Rows(rows), log, [["e", "t1", "t2", "L"]]) == []
    rows[-1] = ("L", "completed", json.dumps({"parents": {"t1": t1, "t2": None}}), None)
    assert check_loads(Rows(rows), log, [["e", "t1", "t2", "L"]]) == [
        "load L: saw 1 of 2 results, or not theirs, or out of order"
    ]
    # a graph whose first transform failed: its load must end cancelled, naming that transform
    assert check_loads(Rows(rows), log, [["e", "t1", "t2", "L"]], failing=1) == [
        "load L: completed (None), not cancelled naming t1"
    ]
    rows[-1] = ("L", "cancelled", None, "parent job t1 (chaos:work) failed")
    assert check_loads(Rows(rows), log, [["e", "t1", "t2", "L"]], failing=1) == []
