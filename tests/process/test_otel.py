"""OpenTelemetry, on each engine with a real supervisor: the trace of the request that
enqueued a job continues into the worker's span; a retry starts a new trace linked to the attempt before;
log lines carry the span's ids; and nothing imports OpenTelemetry where the extra is absent.

The worker's SDK is set up by the handlers module tests/fixtures/oteljobs.py (imported by the
supervisor's template): it exports the worker's spans as JSON lines to ``JOBQ_TEST_SPANS``. This
test process traces with the SDK's in-memory exporter."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from shared.producer.api import JobQueue
from shared.settings.config import load
from tests.proc import REPO, log_events, wait_until, write_config
from tests.unit.cli.test_cli import jobq

pytestmark = pytest.mark.engines

SERVED = ("otel:work", "otel:flaky")


@pytest.fixture(scope="module")
def exporter() -> InMemorySpanExporter:
    """The in-memory exporter of this process's global TracerProvider (set once per process)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return memory


@pytest.fixture
def served(tmp_path, database, sup_factory, monkeypatch, exporter):
    """A supervisor serving oteljobs, its config file, and the file its workers' spans go to."""
    spans = tmp_path / "spans.jsonl"
    monkeypatch.setenv("JOBQ_TEST_SPANS", str(spans))
    path = write_config(tmp_path, handlers=["oteljobs"], log_format="json")
    exporter.clear()
    sup = sup_factory(path)
    q = JobQueue(config=load(path))
    yield sup, q, spans
    q.close()


def worker_spans(spans: Path, job_id: str, count: int) -> list[dict]:
    """The worker spans of ``job_id`` (waits until ``count`` have been exported)."""

    def read() -> list[dict]:
        if not spans.exists():
            return []
        found = [json.loads(line) for line in spans.read_text().splitlines() if line.strip()]
        mine = [s for s in found if s["attributes"].get("messaging.message.id") == job_id]
        return mine if len(mine) >= count else []

    return sorted(
        wait_until(read, timeout=60, what=f"{count} spans of job {job_id}"),
        key=lambda s: s["attributes"]["jobq.attempt"],
    )


def hexid(value: int, digits: int) -> str:
    return f"0x{value:0{digits}x}"


def test_the_worker_span_is_a_child_of_the_producer_span(served, exporter):
    sup, q, spans = served
    with trace.get_tracer("test").start_as_current_span("request") as request:
        job_id = q.enqueue("otel:work", {})
    producer = next(s for s in exporter.get_finished_spans() if s.name == "enqueue otel:work")
    assert producer.kind == trace.SpanKind.PRODUCER
    assert producer.parent.span_id == request.get_span_context().span_id
    stored = json.loads(q.get(job_id).trace)
    assert stored["traceparent"].split("-")[1:3] == [
        f"{producer.context.trace_id:032x}",
        f"{producer.context.span_id:016x}",
    ]
    [span] = worker_spans(spans, job_id, 1)
    assert span["context"]["trace_id"] == hexid(request.get_span_context().trace_id, 32)
    assert span["parent_id"] == hexid(producer.context.span_id, 16)
    assert span["kind"] == "SpanKind.CONSUMER" and span["name"] == "process otel:work"
    assert span["attributes"] == {
        "messaging.system": "jobq",
        "messaging.operation": "process",
        "messaging.destination.name": "default",
        "messaging.message.id": job_id,
        "jobq.job.type": "otel:work",
        "jobq.attempt": 1,
        "jobq.outcome": "completed",
    }
    for name in (
        "otel.inside",
        "job.completed",
    ):  # the handler's line, and the outcome's after the commit
        line = wait_until(
            lambda: [e for e in log_events(sup, name) if e.get("id") == job_id],
            what=f"the {name} log line",
        )
        assert line[0]["trace_id"] == span["context"]["trace_id"][2:]
        assert line[0]["span_id"] == span["context"]["span_id"][2:]


def test_a_retry_starts_a_new_trace_linked_to_the_previous_attempt(served, exporter):
    sup, q, spans = served
    with trace.get_tracer("test").start_as_current_span("request") as request:
        job_id = q.enqueue("otel:flaky", {})
    first, second = worker_spans(spans, job_id, 2)
    request_trace = hexid(request.get_span_context().trace_id, 32)
    assert first["context"]["trace_id"] == request_trace
    assert first["status"] == {
        "status_code": "ERROR",
        "description": "RuntimeError: first attempt fails",
    }
    assert first["attributes"]["jobq.outcome"] == "error"
    [error] = [e for e in first["events"] if e["name"] == "exception"]
    assert error["attributes"]["exception.type"] == "RuntimeError"
    assert error["attributes"]["exception.message"] == "first attempt fails"
    assert second["context"]["trace_id"] != request_trace and second["parent_id"] is None
    [link] = second["links"]  # the first attempt's own span: the chain of attempts can be walked
    assert link["context"]["trace_id"] == request_trace
    assert link["context"]["span_id"] == first["context"]["span_id"]
    assert link["attributes"] == {"jobq.link": "retry_of"}
    assert second["attributes"]["jobq.attempt"] == 2
    assert second["attributes"]["jobq.outcome"] == "completed"
    assert second["status"]["status_code"] == "UNSET"
    retry = wait_until(
        lambda: [e for e in log_events(sup, "job.retry") if e.get("id") == job_id],
        what="the job.retry log line",
    )
    assert (retry[0]["trace_id"], retry[0]["span_id"]) == (
        first["context"]["trace_id"][2:],
        first["context"]["span_id"][2:],
    )


def test_enqueue_many_and_no_span_store_what_they_should(served, exporter):
    sup, q, spans = served
    plain = q.enqueue("otel:work", {})
    assert q.get(plain).trace is None  # no span active: nothing stored, no producer span
    assert exporter.get_finished_spans() == ()
    with trace.get_tracer("test").start_as_current_span("request") as request:
        ids = q.enqueue_many([("otel:work", {}), ("otel:work", {})])
    producer = next(s for s in exporter.get_finished_spans() if s.name == "enqueue otel:work")
    assert producer.attributes["messaging.batch.message_count"] == 2
    for job_id in ids:
        [span] = worker_spans(spans, job_id, 1)
        assert span["context"]["trace_id"] == hexid(request.get_span_context().trace_id, 32)
        assert span["parent_id"] == hexid(producer.context.span_id, 16)
    [span] = worker_spans(spans, plain, 1)
    assert span["parent_id"] is None and span["links"] == []


def test_the_cli_stores_an_explicit_traceparent(served):
    sup, q, spans = served
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    r = jobq(sup.config, "enqueue", "otel:work", "{}", "--traceparent", parent)
    assert r.returncode == 0, r.stderr
    job_id = r.stdout.strip()
    assert json.loads(q.get(job_id).trace) == {"traceparent": parent}
    [span] = worker_spans(spans, job_id, 1)
    assert span["context"]["trace_id"] == "0x0af7651916cd43dd8448eb211c80319c"
    assert span["parent_id"] == "0xb7ad6b7169203331"
    bad = jobq(sup.config, "enqueue", "otel:work", "{}", "--traceparent", "nonsense")
    assert bad.returncode == 2 and "traceparent must be W3C trace context" in bad.stderr


def test_the_cli_stores_a_traceparent_with_each_job_of_a_file(served, tmp_path):
    sup, q, spans = served
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    lines = tmp_path / "jobs.jsonl"
    lines.write_text('{"type": "otel:work", "payload": {}}\n{"type": "otel:work", "delay": 0}\n')
    r = jobq(sup.config, "enqueue", "--file", str(lines), "--traceparent", parent)
    assert r.returncode == 0, r.stderr
    ids = r.stdout.split()
    assert len(ids) == 2 and all(json.loads(q.get(i).trace) == {"traceparent": parent} for i in ids)
    for job_id in ids:
        [span] = worker_spans(spans, job_id, 1)
        assert span["context"]["trace_id"] == "0x0af7651916cd43dd8448eb211c80319c"
        assert span["parent_id"] == "0xb7ad6b7169203331"
    before = sum(
        q.counts().values()
    )  # (jobs, whatever their state: the two may still be finishing)
    bad = jobq(sup.config, "enqueue", "--file", str(lines), "--traceparent", "00-nonsense")
    assert bad.returncode == 2 and "traceparent must be W3C trace context" in bad.stderr
    assert "nothing was written" in bad.stderr and sum(q.counts().values()) == before


def test_a_batch_processor_s_spans_are_exported_as_the_worker_stops(
    tmp_path, database, sup_factory, monkeypatch
):
    """A worker ends with os._exit (no atexit flush): it flushes the SDK itself, so spans a
    BatchSpanProcessor still queues (here: all of them, it exports only when flushed) arrive."""
    spans = tmp_path / "spans.jsonl"
    monkeypatch.setenv("JOBQ_TEST_SPANS", str(spans))
    monkeypatch.setenv("JOBQ_TEST_SPANS_BATCH", "1")
    path = write_config(
        tmp_path, handlers=["oteljobs"], log_format="json", supervisor={"workers": 1}
    )
    sup = sup_factory(path)
    with JobQueue(config=load(path)) as q:
        ids = [q.enqueue("otel:work", {}) for _ in range(3)]
        wait_until(
            lambda: q.counts() == {"completed": 3}, timeout=60, what="the three jobs completed"
        )
    assert not spans.exists()  # queued in the worker, not exported yet
    sup.signal(signal.SIGTERM)
    assert sup.wait(60) == 0
    found = [json.loads(line) for line in spans.read_text().splitlines()]
    assert sorted(s["attributes"]["messaging.message.id"] for s in found) == sorted(ids)


BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, Block())
"""

RUN = """
import jobq, worker, worker.loop, worker.forkserver, supervisor, supervisor.arbiter, supervisor.cli.main
from shared.runtime import logs
logs.setup("debug", "json")
q = jobq.JobQueue(sys.argv[1], handlers=[jobq.handler("t")(lambda p, j: 1)])
q.enqueue("t", {})
q.enqueue_many([("t", {})])
assert q.drain() == {"completed": 2, "retried": 0, "failed": 0}, q.drain()
assert q.get(q.enqueue("t", {}, traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")).trace
print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""


@pytest.mark.engine_only("sqlite", reason="the import graph does not depend on the engine")
@pytest.mark.parametrize("blocked", [True, False], ids=["extra-absent", "extra-installed"])
def test_nothing_imports_opentelemetry_unless_the_application_does(tmp_path, database, blocked):
    """With the extra absent (a meta-path finder refuses it) jobq's producer, worker, supervisor
    and CLI import and run; installed, jobq still imports none of it by itself."""
    code = (BLOCK if blocked else "import sys\n") + RUN
    r = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "q.db")],
        capture_output=True,
        text=True,
        cwd=str(REPO),
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"
