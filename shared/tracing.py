"""OpenTelemetry: the enqueuer's trace context stored with a job, and the worker's span of a run.

jobq never imports OpenTelemetry itself: it traces only in a process where the application
has imported ``opentelemetry.trace`` (configured a TracerProvider, started a span). Elsewhere,
and wherever the ``otel`` extra is not installed, each function here costs one ``sys.modules``
look-up and does nothing, so the enqueue path stores NULL and runs no extra statement.

- :func:`context` (producer): the W3C ``traceparent``/``tracestate`` of the active span (or of
  an explicit ``traceparent``) as compact JSON for the job's ``trace`` column; with a span
  active, a PRODUCER span ``enqueue <type>`` is its parent (:meth:`Tracing.producer`).
- :meth:`Tracing.consume` (worker): runs a job inside a CONSUMER span ``process <type>``.
  Attempt 1 is a child of the stored context; a later attempt starts a new trace *linked* to
  it, so a retry hours later does not stretch the producer's trace. Messaging semantic
  conventions: ``messaging.system = jobq``, ``messaging.operation = process``,
  ``messaging.destination.name`` the queue (``default``), ``messaging.message.id`` the job id;
  ``jobq.job.type``, ``jobq.attempt``, ``jobq.outcome``. A failed run records its exception and
  sets status ERROR. Where the application imported ``opentelemetry.metrics``, the instruments
  of :mod:`shared.otelmeters` mirror the Prometheus metrics.
- :func:`ids` (logs): the active span's ``trace_id`` and ``span_id`` as hex, or None;
  :func:`span_ids` those of a finished run's span (its ``job.completed`` line).
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
import time
from typing import Any, Callable, Iterator

from .otelmeters import METRICS_MODULE, QUEUE, SCOPE, Meters, depth_reader

TRACE_MODULE = "opentelemetry.trace"  # present in sys.modules once the application traces


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


class Tracing:
    """jobq's OpenTelemetry handles of one process: one object per owner that runs or enqueues
    jobs (a worker, an inline runner, a ``JobQueue``), so each owner looks its tracer and
    instruments up once, not per job, and no module keeps mutable state.

    The stored context last read is kept, so a batch of jobs enqueued under one span parses it once.
    ``depth``: where the queue-depth gauge reads its rows (see :class:`shared.otelmeters.Meters`),
    or None for no gauge; ``metered=False``: spans only, no instruments (a one-off caller);
    ``meter_provider``: the instruments' MeterProvider instead of the global one."""

    def __init__(self, depth: Callable[[], list[dict[str, Any]]] | None = None, metered: bool = True,
                 meter_provider: Any = None) -> None:
        self._tracer: Any = None             # jobq's tracer of the global provider, once there is one
        self._recheck = 0.0                  # monotonic time of the next look for a provider
        self._last: tuple[str | None, Any] = (None, None)  # (stored text, its parent context)
        self._depth = depth
        self.meters: Meters | None = None    # made once the application imported the metrics API
        self._metered = metered
        self._meter_provider = meter_provider
        if depth is not None and METRICS_MODULE in sys.modules:
            self._meters()  # the gauge is there before the first job (an idle worker reports it too)

    def tracer(self, api: Any) -> Any:
        """jobq's tracer of the global provider, or None while that records nothing (the API's
        proxy: no SDK set up). A provider is set once per process, so a tracer, once made, is
        kept; the proxy is looked at again at most once a second (asking for the global provider
        reads the environment while none is set)."""
        if self._tracer is not None:
            return self._tracer
        now = time.monotonic()
        if now < self._recheck:
            return None
        self._recheck = now + 1.0
        provider = api.get_tracer_provider()
        if not isinstance(provider, api.ProxyTracerProvider):
            self._tracer = provider.get_tracer(SCOPE)
        return self._tracer

    @contextlib.contextmanager
    def producer(self, types: list[str]) -> Iterator[None]:
        """A PRODUCER span ``enqueue <type>`` (``enqueue batch`` for several types) around an
        enqueue while a span is active and a tracer provider records (so the stored context is
        this span's, a child of the active one); nothing otherwise."""
        api = _api()
        tracer = self.tracer(api) if active() else None
        if tracer is None:  # no span, or no SDK provider: the active span's context is stored
            yield
            return
        name = types[0] if len(set(types)) == 1 else "batch"
        attrs = {"messaging.system": SCOPE, "messaging.operation": "publish",
                 "messaging.destination.name": QUEUE, "jobq.job.type": name,
                 "messaging.batch.message_count": len(types)}
        span = tracer.start_span(f"enqueue {name}", kind=api.SpanKind.PRODUCER, attributes=attrs)
        if not span.get_span_context().is_valid:  # a provider that records nothing: store the active one
            yield
            return
        with api.use_span(span, end_on_exit=True):
            yield

    def consume(self, job: Any, run: Callable[[], Any]) -> Any:
        """``run()`` (returning an outcome with ``kind`` and maybe ``exc``) inside the job's
        CONSUMER span when the application traces with an SDK; just ``run()`` otherwise. The
        outcome comes back with its span's context (``span``) for the job's log line; the run
        is measured where the application imported the metrics API."""
        api = _api()
        tracer = None if api is None else self.tracer(api)
        t0 = time.perf_counter()
        outcome = run() if tracer is None else _consume(api, tracer, self._parent(api, job), job, run)
        if self._metered and (self.meters is not None or METRICS_MODULE in sys.modules):
            self._meters().record(job, outcome.kind, time.perf_counter() - t0)
        return outcome

    def _meters(self) -> "Meters":
        if self.meters is None:
            self.meters = Meters(sys.modules[METRICS_MODULE], self._depth, self._meter_provider)
        return self.meters

    def _parent(self, api: Any, job: Any) -> tuple[Any, Any]:
        """(parent context, links) of the job's span: attempt 1 a child of the stored context, a
        later attempt a root linked to it (a new trace), a job without one a root."""
        text = job.trace
        if text != self._last[0]:
            self._last = (text, _stored(api, text))
        stored = self._last[1]
        if stored is None:
            return _empty(), ()
        if job.attempts <= 1:
            return stored[0], ()
        return _empty(), (api.Link(stored[1], {"jobq.link": "retry_of"}),)


def _consume(api: Any, tracer: Any, parent: tuple[Any, Any], job: Any, run: Callable[[], Any]) -> Any:
    """``run()`` in the job's span (see the module's docstring): started with every attribute
    at once, current while the handler runs (its own spans and log lines belong to it), ended
    with the outcome, which carries the span's context back."""
    span = tracer.start_span(
        f"process {job.type}", context=parent[0], kind=api.SpanKind.CONSUMER, links=parent[1],
        attributes={"messaging.system": SCOPE, "messaging.operation": "process",
                    "messaging.destination.name": job.queue or QUEUE, "messaging.message.id": job.id,
                    "jobq.job.type": job.type, "jobq.attempt": job.attempts},
        record_exception=False, set_status_on_exception=False)
    token = _context().attach(api.set_span_in_context(span))
    try:
        outcome = run()
    except BaseException:  # run() classifies every handler failure: this is jobq's own, or an interrupt
        span.end()
        raise
    finally:
        _context().detach(token)
    span.set_attribute("jobq.outcome", outcome.kind)
    if outcome.kind != "completed":
        if outcome.exc is not None:
            span.record_exception(outcome.exc)
        last = (outcome.error or "").strip().splitlines()  # a traceback's last line says what
        span.set_status(api.Status(api.StatusCode.ERROR, last[-1][:200] if last else None))
    span.end()
    ctx = span.get_span_context()
    return dataclasses.replace(outcome, span=ctx) if ctx.is_valid else outcome


def _context() -> Any:
    """``opentelemetry.context`` (imported with ``opentelemetry.trace``: a dict look-up)."""
    return sys.modules["opentelemetry.context"]


def _empty() -> Any:
    """An empty Context: a run's span is never a child of the worker's own context."""
    return _context().Context()


def span_ids(span: Any) -> tuple[str, str]:
    """A SpanContext's (trace_id, span_id) as 32 and 16 hex digits (the log lines' fields)."""
    return f"{span.trace_id:032x}", f"{span.span_id:016x}"


def _stored(api: Any, text: str | None) -> tuple[Any, Any] | None:
    """The stored context as (an OpenTelemetry Context holding it as the remote parent, its
    SpanContext), or None (none stored, or unreadable). Parsed here, not by the propagator: the
    format was checked at enqueue, and this runs per job."""
    if not text:
        return None
    try:
        carrier = json.loads(text)
        version, trace_id, span_id, flags = carrier["traceparent"].split("-")
        ctx = api.SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True,
                              trace_flags=api.TraceFlags(int(flags, 16)),
                              trace_state=_state(api, carrier.get("tracestate")))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    if not ctx.is_valid or version == "ff":
        return None
    return api.set_span_in_context(api.NonRecordingSpan(ctx), _empty()), ctx


def _state(api: Any, header: Any) -> Any:
    return api.TraceState.from_header([header]) if isinstance(header, str) and header else None


def worker_tracing(config: Any, slot: int | None, meter_provider: Any = None) -> Tracing:
    """A worker's :class:`Tracing`: the worker of slot 0 also reports the queue-depth gauge (one
    worker per supervisor, so the figure is not repeated by every worker)."""
    return Tracing(depth=depth_reader(config) if slot == 0 else None, meter_provider=meter_provider)


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
