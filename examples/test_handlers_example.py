"""How a jobq user tests their handlers without a supervisor (docs/testing.md).

Two ways: ``JobQueue(..., immediate=True)`` runs each job as it is enqueued, and ``q.drain()``
runs whatever is due when the test says so. Both run the real handler through jobq's own
retry and outcome code and store the outcome in the database, so the test reads it back with
``q.get(job_id)``. Run with: ``pytest examples/test_handlers_example.py``.
"""

from __future__ import annotations

import csv
import json

import pytest

from jobq import Config, FakeClock, JobQueue, RetryConfig, handler

from examples import handlers as my_handlers


@pytest.fixture
def report_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(my_handlers.REPORT_DIR_ENV, str(tmp_path / "reports"))
    return tmp_path / "reports"


# -- immediate mode: the job runs inside enqueue() ------------------------------------------------


def test_report_is_written_at_enqueue(tmp_path, report_dir):
    with JobQueue(str(tmp_path / "q.db"), handlers=[my_handlers], immediate=True) as q:
        job_id = q.enqueue("report:generate", {"reportId": "r1", "format": "csv"})
        job = q.get(job_id)
    assert job.status == "completed"
    assert job.result["path"] == str(report_dir / "r1.csv")
    assert dict(csv.reader((report_dir / "r1.csv").open()))["reportId"] == "r1"


def test_each_format_writes_a_file_of_that_format(tmp_path, report_dir):
    """The README promises reports/r1.pdf: a PDF (it was JSON under a .pdf name)."""
    with JobQueue(str(tmp_path / "q.db"), handlers=[my_handlers], immediate=True) as q:
        for fmt in ("pdf", "json", "txt"):
            assert (
                q.get(q.enqueue("report:generate", {"reportId": "r1", "format": fmt})).status
                == "completed"
            )
    assert json.loads((report_dir / "r1.json").read_text())["reportId"] == "r1"
    assert "reportId: r1\n" in (report_dir / "r1.txt").read_text()
    data = (report_dir / "r1.pdf").read_bytes()
    assert (
        data.startswith(b"%PDF-1.4\n")
        and data.rstrip().endswith(b"%%EOF")
        and b"(reportId: r1) Tj" in data
    )
    xref = int(data.rsplit(b"startxref\n", 1)[1].split()[0])
    table = data[xref:].split(b"trailer")[0].split(b"\n")
    assert table[:2] == [b"xref", b"0 6"]
    for n, entry in enumerate(
        table[3:8], 1
    ):  # every object where the table says, as readers seek it
        assert data[int(entry[:10]) :].startswith(b"%d 0 obj\n" % n)


def test_bad_payload_fails_at_once_without_retries(tmp_path, report_dir):
    with JobQueue(str(tmp_path / "q.db"), handlers=[my_handlers], immediate=True) as q:
        job = q.get(q.enqueue("report:generate", {"reportId": "r1", "format": "docx"}))
    assert job.status == "failed" and job.attempts == 1  # PermanentError: no retry
    assert "unknown format 'docx'" in job.error


# -- drain: the test decides when jobs run ----------------------------------------------------------


def test_drain_runs_everything_due(tmp_path, report_dir):
    with JobQueue(str(tmp_path / "q.db"), handlers=["examples.handlers"]) as q:
        ids = [q.enqueue("report:generate", {"reportId": f"r{i}"}) for i in range(3)]
        q.enqueue("exploration:run", {"sessionId": "s1", "config": {"steps": 10}})
        assert q.get(ids[0]).status == "pending"  # nothing runs until we drain
        assert q.drain(types=["report:generate"]) == {"completed": 3, "retried": 0, "failed": 0}
        assert q.counts() == {"completed": 3, "pending": 1}
        assert q.drain() == {"completed": 1, "retried": 0, "failed": 0}


calls: list[int] = []


@handler("payment:capture", max_attempts=3)
def capture(payload, job):
    """A handler of the test's own: fails twice, then succeeds."""
    calls.append(job.attempt)
    if job.attempt < 3:
        raise ConnectionError("gateway timeout")
    return {"captured": payload["amount"]}


def test_retries_follow_the_backoff_on_a_fake_clock(tmp_path):
    calls.clear()
    clock = FakeClock()
    with JobQueue(str(tmp_path / "q.db"), handlers=[capture], clock=clock) as q:
        job_id = q.enqueue("payment:capture", {"amount": 42})
        assert q.drain() == {"completed": 0, "retried": 1, "failed": 0}
        assert q.drain() == {"completed": 0, "retried": 0, "failed": 0}  # back-off not over yet
        clock.advance(60)
        assert q.drain() == {"completed": 0, "retried": 1, "failed": 0}
        clock.advance(60)
        assert q.drain() == {"completed": 1, "retried": 0, "failed": 0}
        assert q.get(job_id).result == {"captured": 42} and calls == [1, 2, 3]


def test_retries_run_at_once_with_zero_backoff(tmp_path):
    calls.clear()
    config = Config(retry=RetryConfig(backoff_base=0))
    with JobQueue(str(tmp_path / "q.db"), config=config, handlers=[capture], immediate=True) as q:
        job = q.get(q.enqueue("payment:capture", {"amount": 7}))
    assert job.status == "completed" and job.attempts == 3 and calls == [1, 2, 3]
