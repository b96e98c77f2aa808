"""OpenTelemetry: the enqueuer's trace context stored with a job, and the worker's span of a run.

jobq never imports OpenTelemetry itself: it traces only in a process where the application
has imported ``opentelemetry.trace`` (configured a TracerProvider, started a span). Elsewhere,
and wherever the ``otel`` extra is not installed, each function here costs one ``sys.modules``
look-up and does nothing, so the enqueue path stores NULL and runs no extra statement.

- :func:`context` (producer): the W3C ``traceparent``/``tracestate`` of the active span (or of
  an explicit ``traceparent``) as compact JSON for the job's ``trace`` column; with a span
  active, a PRODUCER span ``enqueue <type>`` is its parent (see :func:`producer`).
- :func:`consume` (worker): runs a job inside a CONSUMER span. Attempt 1 is a child of the
  stored context; a later attempt starts a new trace *linked* to it, so a retry hours later does
  not stretch the producer's trace. Messaging semantic conventions: ``messaging.system = jobq``,
  ``messaging.operation = process``, ``messaging.destination.name`` the job type,
  ``messaging.message.id`` the job id; ``jobq.queue`` (``default``), ``jobq.attempt``,
  ``jobq.outcome``. A failed
  run records its exception and sets status ERROR. Where the application imported
  ``opentelemetry.metrics``, instruments mirror the Prometheus metrics: ``jobq.jobs`` (runs by
  type and outcome), ``jobq.job.duration`` and ``jobq.job.lag`` (histograms, seconds).
- :func:`ids` (logs): the active span's ``trace_id`` and ``span_id`` as hex, or None.
"""
from __future__ import annotations

import contextlib
import functools
import json
import sys
import time
from typing import Any, Callable, Iterator

from .clock import parse_iso

TRACE_MODULE = "opentelemetry.trace"  # present in sys.modules once the application traces
QUEUE = "default"                     # jobq has one queue per database; types are destinations
SCOPE = "jobq"                        # the instrumentation scope of jobq's spans and meters


def _api() -> Any:
    """``opentelemetry.trace`` if the application imported it, else None (never imports)."""
    return sys.modules.get(TRACE_MODULE)


def _span_context() -> Any:
    """The active span's context if one is valid (never imports the API), else None."""
    api = _api()
    if api is None:
        return None
    ctx = api.get_current_span().get_span_context()
    return ctx if ctx.is_valid else None


def active() -> bool:
    """Is a span active in this context (so an enqueue stores a trace context)?"""
    return _span_context() is not None


def ids() -> tuple[str, str] | None:
    """The active span's (trace_id, span_id) as 32 and 16 hex digits, or None."""
    ctx = _span_context()
    return None if ctx is None else (f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}")


def context(traceparent: str | None = None, tracestate: str | None = None) -> str | None:
    """The trace context to store with a job: ``traceparent`` (and ``tracestate``) given
    explicitly, else the active span's; None when there is neither (the column stays NULL).
    A malformed explicit ``traceparent`` raises ValueError."""
    if traceparent is not None:
        return _explicit(traceparent, tracestate)
    if not active():
        return None
    carrier: dict[str, str] = {}
    _propagator().inject(carrier)
    return _encode(carrier)


def _explicit(traceparent: str, tracestate: str | None) -> str:
    parts = traceparent.strip().split("-")
    ok = (len(parts) == 4 and [len(p) for p in parts] == [2, 32, 16, 2]
          and all(c in "0123456789abcdef" for c in "".join(parts)) and parts[0] != "ff"
          and set(parts[1]) != {"0"} and set(parts[2]) != {"0"})
    if not ok:
        raise ValueError(f"traceparent must be W3C trace context text "
                         f"(00-<32 hex>-<16 hex>-<2 hex>), got {traceparent!r}")
    carrier = {"traceparent": traceparent.strip()}
    if tracestate:
        carrier["tracestate"] = tracestate
    return _encode(carrier)


def _encode(carrier: dict[str, str]) -> str:
    return json.dumps({k: carrier[k] for k in ("traceparent", "tracestate") if k in carrier},
                      separators=(",", ":"))


def _propagator() -> Any:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    return TraceContextTextMapPropagator()


@contextlib.contextmanager
def producer(types: list[str]) -> Iterator[None]:
    """A PRODUCER span ``enqueue <type>`` (``enqueue batch`` for several types) around an
    enqueue while a span is active and a tracer provider records (so the stored context is this
    span's, a child of the active one); nothing otherwise."""
    if not active():
        yield
        return
    api = _api()
    name = types[0] if len(set(types)) == 1 else "batch"
    attrs = {"messaging.system": SCOPE, "messaging.operation": "publish",
             "messaging.destination.name": name, "jobq.queue": QUEUE,
             "messaging.batch.message_count": len(types)}
    span = _tracer(api.get_tracer_provider()).start_span(f"enqueue {name}", kind=api.SpanKind.PRODUCER, attributes=attrs)
    if not span.get_span_context().is_valid:  # no SDK provider: the active span's context is stored
        yield
        return
    with api.use_span(span, end_on_exit=True):
        yield


def consume(job: Any, run: Callable[[], Any]) -> Any:
    """``run()`` (returning an outcome with ``kind`` and maybe ``exc``) inside the job's
    CONSUMER span when the application traces; just ``run()`` otherwise."""
    api = _api()
    if api is None:
        return run()
    provider = api.get_tracer_provider()
    if isinstance(provider, api.ProxyTracerProvider):  # no SDK set up: spans would record nothing
        return run()
    return _consume(api, _tracer(provider), job, run)


@functools.lru_cache(maxsize=4)
def _tracer(provider: Any) -> Any:
    """jobq's tracer of ``provider`` (made once: an SDK makes a new tracer per call)."""
    return provider.get_tracer(SCOPE)


def _consume(api: Any, tracer: Any, job: Any, run: Callable[[], Any]) -> Any:
    """``run()`` in the job's span: attempt 1 a child of the stored context, a later attempt a
    root linked to it, a job without one a root (see the module's docstring)."""
    stored = _stored(job.trace)
    parent, links = None, []
    if stored is not None:
        if job.attempts <= 1:
            parent = stored
        else:  # a retry: a new trace, linked to the one that enqueued the job
            links = [api.Link(api.get_current_span(stored).get_span_context(), {"jobq.link": "retry_of"})]
    if parent is None:
        from opentelemetry.context import Context
        parent = Context()  # never the worker's own context: each run is its producer's or a root
    attrs = {"messaging.system": SCOPE, "messaging.operation": "process",
             "messaging.destination.name": job.type, "messaging.message.id": job.id,
             "jobq.queue": QUEUE, "jobq.attempt": job.attempts}
    t0 = time.perf_counter()
    with tracer.start_as_current_span(
            f"process {job.type}", context=parent, kind=api.SpanKind.CONSUMER, links=links,
            attributes=attrs, record_exception=False, set_status_on_exception=False) as span:
        outcome = run()
        span.set_attribute("jobq.outcome", outcome.kind)
        if outcome.kind != "completed":
            if getattr(outcome, "exc", None) is not None:
                span.record_exception(outcome.exc)
            last = (outcome.error or "").strip().splitlines()  # a traceback's last line says what
            span.set_status(api.Status(api.StatusCode.ERROR, last[-1][:200] if last else None))
    _measure(job, outcome.kind, time.perf_counter() - t0)
    return outcome


def _stored(text: str | None) -> Any:
    """The stored context as an OpenTelemetry Context, or None (none stored, or unreadable)."""
    if not text:
        return None
    try:
        carrier = json.loads(text)
    except ValueError:
        return None
    if not isinstance(carrier, dict) or "traceparent" not in carrier:
        return None
    ctx = _propagator().extract(carrier)
    api = _api()
    return ctx if api.get_current_span(ctx).get_span_context().is_valid else None


def _measure(job: Any, outcome: str, seconds: float) -> None:
    """Count the run by outcome, record its run time and its lag (due to started), where the
    application imported the metrics API."""
    metrics = sys.modules.get("opentelemetry.metrics")
    # The API's default provider (a proxy until an SDK one is set) records nothing: skip the work.
    if metrics is None or type(metrics.get_meter_provider()).__name__ == "_ProxyMeterProvider":
        return
    meters = _meters(metrics)
    jobs, duration, lag = meters
    labels = {"jobq.job.type": job.type, "jobq.outcome": outcome}
    jobs.add(1, labels)
    duration.record(seconds, labels)
    if job.started_at:  # ISO texts of one width order as times do: parse only the later one
        lag.record(max(parse_iso(job.started_at) - parse_iso(max(job.run_at, job.created_at)), 0.0),
                   {"jobq.job.type": job.type})


@functools.lru_cache(maxsize=4)
def _meters(metrics: Any) -> tuple[Any, Any, Any]:
    """The instruments, made once per metrics API module (a cache, not state: the API's
    instruments follow the global MeterProvider, also one set after they were made)."""
    meter = metrics.get_meter(SCOPE)
    return (meter.create_counter("jobq.jobs", unit="{job}", description="Job runs by type and outcome."),
            meter.create_histogram("jobq.job.duration", unit="s", description="Run time of jobs."),
            meter.create_histogram("jobq.job.lag", unit="s", description="Due to started, per job."))


def observe_gauge(name: str, unit: str, description: str, read: Callable[[], float]) -> bool:
    """An OpenTelemetry observable gauge ``name`` reporting ``read()`` at each collection, where
    the application imported the metrics API (else nothing); whether it was made."""
    metrics = sys.modules.get("opentelemetry.metrics")
    if metrics is None:
        return False

    def observe(_options: Any) -> Any:
        return [metrics.Observation(read())]
    metrics.get_meter(SCOPE).create_observable_gauge(name, callbacks=[observe], unit=unit,
                                                     description=description)
    return True
