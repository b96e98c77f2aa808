"""Tracing on for a burn-down run (``JOBQ_BENCH_OTEL=1``, docs/tracing.md): the OpenTelemetry
SDK with a span exporter that drops every span, set up in each worker by ``bench.handlers``.

A SimpleSpanProcessor exports in the thread that ends the span: no exporter thread is started in
the template process, so none crosses its fork."""
from __future__ import annotations


def setup() -> None:
    """Set the global TracerProvider: every job's span is made, ended and handed to a no-op
    exporter (the SDK's full cost per span, no I/O)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans):  # noqa: ANN001 - the SDK's signature
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Drop()))
    trace.set_tracer_provider(provider)
