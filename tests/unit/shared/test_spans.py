"""shared.telemetry.spans: a run's CONSUMER span, its parent or link from the stored context,
and its outcome; with OpenTelemetry's API only (a recording tracer of the test's own)."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest
from opentelemetry import trace

from shared.telemetry.spans import Consumer

TRACE_ID, SPAN_ID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"


class Span:
    def __init__(self, name, kwargs):
        self.name, self.kwargs = name, kwargs
        self.attributes, self.events, self.status, self.ended = {}, [], None, False
        self.context = trace.SpanContext(1, 2, is_remote=False)

    def set_attribute(self, k, v):
        self.attributes[k] = v

    def record_exception(self, exc):
        self.events.append(exc)

    def set_status(self, status):
        self.status = status

    def end(self):
        self.ended = True

    def get_span_context(self):
        return self.context


class Tracer:
    def __init__(self):
        self.spans = []

    def start_span(self, name, **kwargs):
        self.spans.append(Span(name, kwargs))
        return self.spans[-1]


@dataclasses.dataclass(frozen=True)
class Outcome:
    kind: str
    error: str | None = None
    exc: BaseException | None = None
    span: object = None


def stored(version="00", trace_id=TRACE_ID):
    return json.dumps({"traceparent": f"{version}-{trace_id}-{SPAN_ID}-01"})


def job(trace_text=None, attempts=1, queue="emails"):
    return SimpleNamespace(id="j1", type="send", queue=queue, attempts=attempts, trace=trace_text)


def test_a_completed_run_is_one_span_with_every_attribute_and_its_context_on_the_outcome():
    tracer = Tracer()
    out = Consumer(trace, tracer).run(job(), lambda: Outcome("completed"))
    [span] = tracer.spans
    assert span.name == "process send" and span.kwargs["kind"] == trace.SpanKind.CONSUMER
    assert span.kwargs["attributes"] == {
        "messaging.system": "jobq",
        "messaging.operation": "process",
        "messaging.destination.name": "emails",
        "messaging.message.id": "j1",
        "jobq.job.type": "send",
        "jobq.attempt": 1,
    }
    assert span.attributes == {"jobq.outcome": "completed"} and span.ended
    assert span.status is None and out.span == span.context


def test_a_failed_run_records_its_exception_and_the_errors_headline():
    tracer, exc = Tracer(), KeyError("k")
    fail = Outcome("failed", "KeyError: 'k'\nTraceback...", exc)
    Consumer(trace, tracer).run(job(), lambda: fail)
    [span] = tracer.spans
    assert span.events == [exc]
    assert span.status.status_code == trace.StatusCode.ERROR
    assert span.status.description == "KeyError: 'k'"


def test_an_interrupt_ends_the_span_and_propagates():
    tracer = Tracer()

    def interrupted():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Consumer(trace, tracer).run(job(), interrupted)
    assert tracer.spans[0].ended and "jobq.outcome" not in tracer.spans[0].attributes


def test_a_first_attempt_is_a_child_of_the_stored_context():
    tracer = Tracer()
    Consumer(trace, tracer).run(job(stored()), lambda: Outcome("completed"))
    parent = trace.get_current_span(tracer.spans[0].kwargs["context"]).get_span_context()
    assert format(parent.trace_id, "032x") == TRACE_ID and parent.is_remote
    assert tracer.spans[0].kwargs["links"] is None


def test_a_retry_is_a_new_trace_linked_to_the_stored_context():
    tracer = Tracer()
    c = Consumer(trace, tracer)
    c.run(job(stored(), attempts=2), lambda: Outcome("completed"))
    kwargs = tracer.spans[0].kwargs
    assert kwargs["context"] is c.empty
    [link] = kwargs["links"]
    assert format(link.context.span_id, "016x") == SPAN_ID
    assert dict(link.attributes) == {"jobq.link": "retry_of"}


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        json.dumps({}),
        stored(version="ff"),
        stored(trace_id="0" * 32),
        json.dumps({"traceparent": "a-b"}),
    ],
)
def test_an_unreadable_or_invalid_stored_context_makes_a_root(text):
    tracer = Tracer()
    c = Consumer(trace, tracer)
    c.run(job(text), lambda: Outcome("completed"))
    assert tracer.spans[0].kwargs["context"] is c.empty and tracer.spans[0].kwargs["links"] is None


def test_a_job_without_a_queue_is_on_the_default_one():
    tracer = Tracer()
    Consumer(trace, tracer).run(job(queue=None), lambda: Outcome("completed"))
    assert tracer.spans[0].kwargs["attributes"]["messaging.destination.name"] == "default"
