"""Tracing on for a burn-down run (docs/tracing.md), set up in each worker by ``bench.handlers``:
``JOBQ_BENCH_OTEL=sdk``: the OpenTelemetry SDK with a span exporter that drops every span;
``JOBQ_BENCH_OTEL=api``: the API imported, no SDK (what an application that installed the extra
but set up no provider pays).

A SimpleSpanProcessor exports in the thread that ends the span: no exporter thread is started in
the template process, so none crosses its fork."""
from __future__ import annotations


def setup(mode: str = "sdk") -> None:
    """``sdk``: set the global TracerProvider: every job's span is made, ended and handed to a
    no-op exporter (the SDK's full cost per span, no I/O). ``api``: import the API only."""
    from opentelemetry import trace
    if mode == "api":
        return
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans):  # noqa: ANN001 - the SDK's signature
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Drop()))
    trace.set_tracer_provider(provider)
