"""OpenTelemetry in one process, on each engine: the instruments that mirror the
Prometheus metrics, trace ids on text log lines, the stored context of ``enqueue_many`` with
``batch_size`` and of ``conn=``, the checks of an explicit ``traceparent``, and the chain of a
retried job's attempts, each linked to the one before. (The trace across
a real supervisor's workers: tests/process/test_otel.py.)"""

from __future__ import annotations

import io
import json

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from shared.runtime import logs
from shared.producer.api import JobQueue
from shared.settings.config import load
from shared.execution.handlers import handler
from shared.model.job import NewJob, new_id
from shared.telemetry.tracing import worker_tracing

pytestmark = pytest.mark.engines

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@handler("m:ok")
def ok(payload, job):
    job.logger.info("m.inside")
    return 1


@handler("m:bad", max_attempts=1)
def bad(payload, job):
    raise ValueError("no")


@handler("m:twice", max_attempts=3)
def twice(payload, job):
    """Fails its first two attempts, completes on the third."""
    if job.attempt < 3:
        raise RuntimeError(f"attempt {job.attempt} fails")
    return 3


@pytest.fixture(scope="module")
def reader() -> InMemoryMetricReader:
    """This process's global SDK providers (set once per process; a reader added here)."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        trace.set_tracer_provider(TracerProvider())
    memory = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[memory]))
    return memory


@pytest.fixture
def q(config_path, clock):
    queue = JobQueue(config=load(config_path), clock=clock, handlers=[ok, bad, twice])
    yield queue
    queue.close()


def points(reader: InMemoryMetricReader) -> dict[str, list]:
    data = reader.get_metrics_data()
    if data is None:  # nothing recorded yet
        return {}
    return {
        m.name: list(m.data.data_points)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        if sm.scope.name == "jobq"
        for m in sm.metrics
    }


def test_runs_are_counted_by_outcome_with_run_time_and_lag(q, reader, clock):
    before = {
        p.attributes["jobq.outcome"]: p.value
        for p in points(reader).get("jobq.jobs", [])
        if p.attributes["jobq.job.type"] in ("m:ok", "m:bad")
    }
    q.enqueue("m:ok", {})
    q.enqueue("m:bad", {})
    clock.advance(3)  # both have waited 3 s (the fake clock) when they start
    assert q.drain() == {"completed": 1, "retried": 0, "failed": 1}
    got = points(reader)
    counts = {
        p.attributes["jobq.outcome"]: p.value
        for p in got["jobq.jobs"]
        if p.attributes["jobq.job.type"] in ("m:ok", "m:bad")
    }
    assert counts["completed"] - before.get("completed", 0) == 1
    assert counts["error"] - before.get("error", 0) == 1
    ran = [p for p in got["jobq.job.duration"] if p.attributes["jobq.job.type"] == "m:ok"]
    assert ran[0].count >= 1 and ran[0].sum >= 0
    lag = [p for p in got["jobq.job.lag"] if p.attributes["jobq.job.type"] == "m:bad"]
    assert lag[0].max == pytest.approx(3.0, abs=0.01)


def test_text_log_lines_carry_the_span_ids(q, reader):
    buf = io.StringIO()
    logs.setup("info", "text", buf)
    try:
        with trace.get_tracer("test").start_as_current_span("request") as span:
            logs.event(logs.get_logger("app"), "app.here")
        logs.event(logs.get_logger("app"), "app.outside")
    finally:
        logs.setup("info", "text")
    inside, outside = buf.getvalue().splitlines()
    ctx = span.get_span_context()
    assert f"trace_id={ctx.trace_id:032x} span_id={ctx.span_id:016x}" in inside
    assert "trace_id" not in outside


def test_batches_and_conn_store_the_context(q, reader, database):
    with trace.get_tracer("test").start_as_current_span("request") as span:
        ids = q.enqueue_many([("m:ok", {})] * 3, batch_size=2)
    trace_id = f"{span.get_span_context().trace_id:032x}"
    stored = {json.loads(q.get(i).trace)["traceparent"] for i in ids}
    assert len(stored) == 1 and stored.pop().split("-")[1] == trace_id  # one producer span
    assert q.get(q.enqueue("m:ok", {})).trace is None


def test_an_explicit_traceparent_is_checked(q):
    job_id = q.enqueue("m:ok", {}, traceparent=PARENT)
    assert json.loads(q.get(job_id).trace) == {"traceparent": PARENT}
    for bad_text in (
        "",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
        PARENT.upper(),
        "00-" + "0" * 32 + "-b7ad6b7169203331-01",
        "ff" + PARENT[2:],
    ):
        with pytest.raises(ValueError, match="traceparent must be W3C trace context"):
            q.enqueue("m:ok", {}, traceparent=bad_text)
    assert q.counts() == {"pending": 1}


def depth(memory: InMemoryMetricReader) -> dict[tuple[str, str], int]:
    """The queue-depth gauge's points as {(status, type): jobs}."""
    found: dict[tuple[str, str], int] = {}
    data = memory.get_metrics_data()
    for rm in data.resource_metrics if data is not None else ():
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name == "jobq.queue.depth":
                    for p in m.data.data_points:
                        assert p.attributes["messaging.destination.name"] == "default"
                        found[(p.attributes["jobq.job.status"], p.attributes["jobq.job.type"])] = (
                            p.value
                        )
    return found


def test_the_queue_depth_gauge_reads_jobs_by_status_and_type_at_each_collection(q, config_path):
    memory = InMemoryMetricReader()
    cfg = load(config_path)
    worker_tracing(
        cfg, 0, MeterProvider(metric_readers=[memory])
    )  # slot 0 reports it, before any job
    q.enqueue("m:ok", {})
    q.enqueue("m:ok", {})
    q.enqueue("m:bad", {})
    assert depth(memory) == {("pending", "m:ok"): 2, ("pending", "m:bad"): 1}
    assert q.drain() == {"completed": 2, "retried": 0, "failed": 1}
    assert {k: v for k, v in depth(memory).items() if v} == {
        ("completed", "m:ok"): 2,
        ("failed", "m:bad"): 1,
    }
    other = InMemoryMetricReader()
    worker_tracing(
        cfg, 1, MeterProvider(metric_readers=[other])
    )  # the other workers do not repeat it
    assert depth(other) == {}


@pytest.fixture
def spans(reader):
    """The spans this process's global TracerProvider ends from now on (an in-memory exporter)."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    processor = SimpleSpanProcessor(memory)
    trace.get_tracer_provider().add_span_processor(processor)
    yield memory
    memory.shutdown()  # the processor stays registered but exports nothing more


def test_a_stored_context_is_read_whole_and_an_unreadable_one_gives_a_root_span(q, spans, database):
    """The worker parses the stored context itself (not through the propagator): the trace id,
    parent, sampled flag and tracestate arrive; a context it cannot read (written by hand, or
    by another program) gives the run a root span instead of failing it."""
    good = q.enqueue("m:ok", {}, traceparent=PARENT)
    store = q.store
    bad_texts = [
        "not json",
        '{"traceparent": 5}',
        '{"traceparent": "00-zz-yy-01"}',
        "[]",
        '{"traceparent": "00-' + "0" * 32 + '-b7ad6b7169203331-01"}',
    ]
    bad = [
        store.enqueue(
            [NewJob(new_id(), "m:ok", "{}", 0, q.clock.now(), None, None, text)], q.clock.now()
        )[0]
        for text in bad_texts
    ]
    stated = q.enqueue_many([("m:ok", {})], traceparent=PARENT.replace("-01", "-00"))[0]
    with_state = store.enqueue(
        [
            NewJob(
                new_id(),
                "m:ok",
                "{}",
                0,
                q.clock.now(),
                None,
                None,
                json.dumps({"traceparent": PARENT, "tracestate": "v=1,w=2"}),
            )
        ],
        q.clock.now(),
    )[0]
    assert q.drain() == {"completed": 8, "retried": 0, "failed": 0}
    by_job = {
        s.attributes["messaging.message.id"]: s
        for s in spans.get_finished_spans()
        if s.name == "process m:ok"
    }
    assert by_job[good].context.trace_id == 0x0AF7651916CD43DD8448EB211C80319C
    assert by_job[good].parent.span_id == 0xB7AD6B7169203331 and by_job[good].parent.is_remote
    assert by_job[good].context.trace_flags.sampled
    assert by_job[with_state].context.trace_state.to_header() == "v=1,w=2"
    assert (
        stated not in by_job
    )  # its producer said "not sampled": the SDK's default sampler follows it
    for job_id in bad:
        assert (
            by_job[job_id].parent is None
            and by_job[job_id].attributes["jobq.outcome"] == "completed"
        )


def test_one_tracer_per_runner_however_many_jobs(q, spans, monkeypatch):
    """The tracer is looked up once by the object that runs the jobs, not per job."""
    made = []
    provider = trace.get_tracer_provider()
    real = provider.get_tracer
    monkeypatch.setattr(provider, "get_tracer", lambda *a, **k: made.append(a) or real(*a, **k))
    q.enqueue_many([("m:ok", {})] * 5)
    assert q.drain() == {"completed": 5, "retried": 0, "failed": 0}
    assert len(made) == 1


def test_a_worker_counts_its_runs_per_batch_with_the_same_totals(reader, config_path, monkeypatch):
    """A worker adds its runs to ``jobq.jobs`` once per (type, outcome) as each batch ends, not
    once per run; the totals are the runs'."""
    import types as pytypes

    import shared.telemetry.meters
    from shared.engines import open_store
    from shared.execution.handlers import Registry
    from worker.loop import Worker

    # only batch ends settle here
    monkeypatch.setattr(shared.telemetry.meters, "SETTLE_AFTER", 60.0)
    cfg = load(config_path)
    mod = pytypes.ModuleType("mjobs")
    mod.ok, mod.bad = ok, bad
    reg = Registry()
    reg.add_module(mod)

    def counted() -> dict[str, int]:
        return {
            p.attributes["jobq.outcome"]: p.value
            for p in points(reader).get("jobq.jobs", [])
            if p.attributes["jobq.job.type"] in ("m:ok", "m:bad")
        }

    before = counted()
    with JobQueue(config=cfg) as q:
        q.enqueue_many([("m:ok", {})] * 7 + [("m:bad", {})] * 2)
    w = Worker(cfg, reg)
    w.store = open_store(cfg)
    adds = []
    try:
        assert w.claim()
        recorder = w.tracing._meters()
        real = recorder.runs.add
        monkeypatch.setattr(recorder.runs, "add", lambda n, attrs: adds.append(n) or real(n, attrs))
        while True:
            added = len(adds)
            while w.held.queue:
                w.held.done.append(w.process(w.held.queue.popleft()))
            assert len(adds) == added  # nothing added while the batch runs
            w.resize()
            if not w.claim():
                break
        w.commit(limit=0, must=True)
    finally:
        w.store.close()
        w.signals.close()
    after = counted()
    assert after.get("completed", 0) - before.get("completed", 0) == 7
    assert after.get("error", 0) - before.get("error", 0) == 2
    assert sum(adds) == 9 and len(adds) < 9  # per batch and outcome, not per run


@pytest.fixture(scope="module")
def finished(reader) -> InMemorySpanExporter:
    """The spans this process's global TracerProvider ends, kept in memory."""
    memory = InMemorySpanExporter()
    trace.get_tracer_provider().add_span_processor(SimpleSpanProcessor(memory))
    return memory


def test_each_retry_links_to_the_previous_attempts_own_span(q, finished, clock):
    with trace.get_tracer("test").start_as_current_span("request"):
        job_id = q.enqueue("m:twice", {})
    for _ in range(3):  # each retry waits out its back-off on the fake clock
        q.drain()
        clock.advance(3600)
    assert q.get(job_id).status == "completed"
    first, second, third = sorted(
        (
            s
            for s in finished.get_finished_spans()
            if s.attributes.get("messaging.message.id") == job_id
        ),
        key=lambda s: s.attributes["jobq.attempt"],
    )
    [producer] = [
        s
        for s in finished.get_finished_spans()
        if s.name == "enqueue m:twice" and s.context.span_id == first.parent.span_id
    ]
    assert first.links == () and first.context.trace_id == producer.context.trace_id
    for before, after in ((first, second), (second, third)):
        [link] = after.links
        assert after.parent is None and after.context.trace_id != before.context.trace_id
        assert (link.context.trace_id, link.context.span_id) == (
            before.context.trace_id,
            before.context.span_id,
        )
        assert link.attributes == {"jobq.link": "retry_of"}
    stored = json.loads(q.get(job_id).trace)  # the enqueuer's context is kept beside the attempt's
    assert stored["traceparent"].split("-")[2] == f"{producer.context.span_id:016x}"
    assert stored["attempt"].split("-")[1:3] == [
        f"{second.context.trace_id:032x}",
        f"{second.context.span_id:016x}",
    ]


def test_a_retry_of_a_job_enqueued_without_a_context_links_to_its_first_attempt(q, finished, clock):
    job_id = q.enqueue("m:twice", {})
    for _ in range(3):
        q.drain()
        clock.advance(3600)
    first, second, third = sorted(
        (
            s
            for s in finished.get_finished_spans()
            if s.attributes.get("messaging.message.id") == job_id
        ),
        key=lambda s: s.attributes["jobq.attempt"],
    )
    assert first.parent is None and first.links == ()
    assert second.links[0].context.span_id == first.context.span_id
    assert third.links[0].context.span_id == second.context.span_id
    assert set(json.loads(q.get(job_id).trace)) == {"attempt"}
