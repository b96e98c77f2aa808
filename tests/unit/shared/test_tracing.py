"""shared.telemetry.tracing: the trace context an enqueue stores, from the active span or given
explicitly, with OpenTelemetry's API only (spans of real jobs with the SDK:
tests/behaviour/test_otel_inline.py)."""

from __future__ import annotations

import json
import sys

import pytest
from opentelemetry import trace

from shared.telemetry import tracing

TRACE_ID, SPAN_ID = 0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331
PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def span(state=None):
    return trace.NonRecordingSpan(
        trace.SpanContext(
            TRACE_ID,
            SPAN_ID,
            is_remote=False,
            trace_flags=trace.TraceFlags(1),
            trace_state=trace.TraceState(state or []),
        )
    )


def test_nothing_is_stored_without_an_active_span():
    assert tracing.context() is None and tracing.ids() is None and not tracing.active()


def test_the_active_spans_context_and_ids():
    with trace.use_span(span([("vendor", "v1")])):
        assert tracing.active()
        assert tracing.ids() == ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")
        assert json.loads(tracing.context()) == {"traceparent": PARENT, "tracestate": "vendor=v1"}
    with trace.use_span(span()):
        assert tracing.context() == json.dumps({"traceparent": PARENT}, separators=(",", ":"))


def test_an_explicit_traceparent_wins_and_is_checked():
    with trace.use_span(span()):
        given = "00-" + "1" * 32 + "-" + "2" * 16 + "-00"
        assert json.loads(tracing.context(f" {given} ", "a=b")) == {
            "traceparent": given,
            "tracestate": "a=b",
        }
    for bad in (
        "",
        "00-abc-def-01",
        "ff-" + "1" * 32 + "-" + "2" * 16 + "-01",
        "00-" + "0" * 32 + "-" + "2" * 16 + "-01",
        "00-" + "1" * 32 + "-" + "0" * 16 + "-01",
        "00-" + "G" * 32 + "-" + "2" * 16 + "-01",
    ):
        with pytest.raises(ValueError, match=f"must be W3C trace context text.*{bad!r}"):
            tracing.context(bad)


def test_without_the_api_imported_nothing_is_looked_up(monkeypatch):
    monkeypatch.delitem(sys.modules, tracing.TRACE_MODULE)
    with trace.use_span(span()):
        assert tracing.context() is None and tracing.ids() is None
    assert tracing.context(PARENT) is not None  # an explicit context needs no API


def test_span_ids_of_a_finished_run():
    assert tracing.span_ids(span().get_span_context()) == (
        "0af7651916cd43dd8448eb211c80319c",
        "b7ad6b7169203331",
    )


def test_observe_gauge_only_where_the_metrics_api_is_imported(monkeypatch):
    monkeypatch.delitem(sys.modules, "opentelemetry.metrics", raising=False)
    assert tracing.observe_gauge("jobq.x", "1", "x", lambda: 1.0) is False


def test_a_retry_stores_its_attempts_span_beside_the_enqueuers_context():
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    stored = tracing.context(parent, "k=v")
    attempt = trace.SpanContext(0xAB, 0xCD, False, trace.TraceFlags(0))
    assert json.loads(tracing.retried(stored, attempt)) == {
        "traceparent": parent,
        "tracestate": "k=v",
        "attempt": f"00-{0xAB:032x}-{0xCD:016x}-00",
    }
    assert json.loads(tracing.retried(None, attempt)) == {
        "attempt": f"00-{0xAB:032x}-{0xCD:016x}-00"
    }
    assert json.loads(tracing.retried("not json", attempt)).keys() == {"attempt"}
    assert tracing.retried(stored, None) is None  # ran in no span: the stored context stays
