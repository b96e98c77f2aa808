"""OpenTelemetry: the enqueuer's trace context stored with a job, and the worker's span of a run.

jobq never imports OpenTelemetry itself: it traces only in a process where the application
has imported ``opentelemetry.trace`` (configured a TracerProvider, started a span). Elsewhere,
and wherever the ``otel`` extra is not installed, each function here costs one ``sys.modules``
look-up and does nothing, so the enqueue path stores NULL and runs no extra statement.

- :func:`context` (producer): the W3C ``traceparent``/``tracestate`` of the active span (or of
  an explicit ``traceparent``) as compact JSON for the job's ``trace`` column; with a span
  active, a PRODUCER span ``enqueue <type>`` is its parent (:meth:`Tracing.producer`).
- :meth:`Tracing.consume` (worker): runs a job inside a CONSUMER span ``process <type>``
  (:mod:`shared.telemetry.spans`).
  Attempt 1 is a child of the stored context; a later attempt starts a new trace *linked* to
  the previous attempt's span (to the stored context when no attempt recorded one), so a retry
  hours later does not stretch the producer's trace. Messaging semantic
  conventions: ``messaging.system = jobq``, ``messaging.operation = process``,
  ``messaging.destination.name`` the queue (``default``), ``messaging.message.id`` the job id;
  ``jobq.job.type``, ``jobq.attempt``, ``jobq.outcome``. A failed run records its exception and
  sets status ERROR. Where the application imported ``opentelemetry.metrics``, the instruments
  of :mod:`shared.telemetry.meters` mirror the Prometheus metrics.
- :func:`retried` (worker): the context a retried job stores, naming the span of the attempt
  that ended, so that the next attempt's span links to it (the chain of attempts can be walked).
- :func:`ids` (logs): the active span's ``trace_id`` and ``span_id`` as hex, or None;
  :func:`span_ids` those of a finished run's span (its ``job.completed`` line).
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import time
from typing import Any, Callable, Iterator

from shared.telemetry.meters import METRICS_MODULE, QUEUE, SCOPE, Meters, depth_reader
from shared.telemetry.spans import Consumer

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
    ctx = _span_context()
    if ctx is None:
        return None
    # The W3C text the TraceContext propagator would write, formatted here (no propagator to
    # import and make per call)
    carrier = {"traceparent": f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"}
    state = ctx.trace_state.to_header() if ctx.trace_state else ""
    if state:
        carrier["tracestate"] = state
    return _encode(carrier)


def _explicit(traceparent: str, tracestate: str | None) -> str:
    parts = traceparent.strip().split("-")
    ok = (
        len(parts) == 4
        and [len(p) for p in parts] == [2, 32, 16, 2]
        and all(c in "0123456789abcdef" for c in "".join(parts))
        and parts[0] != "ff"
        and set(parts[1]) != {"0"}
        and set(parts[2]) != {"0"}
    )
    if not ok:
        raise ValueError(
            f"traceparent must be W3C trace context text "
            f"(00-<32 hex>-<16 hex>-<2 hex>), got {traceparent!r}"
        )
    carrier = {"traceparent": traceparent.strip()}
    if tracestate:
        carrier["tracestate"] = tracestate
    return _encode(carrier)


def _encode(carrier: dict[str, str]) -> str:
    return json.dumps(
        {k: carrier[k] for k in ("traceparent", "tracestate", "attempt") if k in carrier},
        separators=(",", ":"),
    )


def retried(stored: str | None, span: Any) -> str | None:
    """The trace context a retried job stores for its next attempt: ``stored`` (the enqueuer's,
    kept for whatever reads it) with ``attempt`` set to the W3C ``traceparent`` of the attempt
    that just ended (``span``: its SpanContext), which the next attempt's span links to; None
    when that attempt ran in no span (the stored context stays as it is)."""
    if span is None:
        return None
    try:
        carrier = json.loads(stored) if stored else {}
    except ValueError:
        carrier = {}
    if not isinstance(carrier, dict):
        carrier = {}
    carrier["attempt"] = f"00-{span.trace_id:032x}-{span.span_id:016x}-{span.trace_flags:02x}"
    return _encode(carrier)


class Tracing:
    """jobq's OpenTelemetry handles of one process: one object per owner that runs or enqueues
    jobs (a worker, an inline runner, a ``JobQueue``), so each owner looks its tracer and
    instruments up once, not per job, and no module keeps mutable state.

    While the application has set up no SDK (no OpenTelemetry imported, or the API alone), a
    run costs a flag test and a clock read: the global providers are looked at again at most
    once a second (asking for them reads the environment while none is set), in case one is
    set later. ``depth``: where the queue-depth gauge reads its rows (see
    :class:`shared.telemetry.meters.Meters`), or None for no gauge; ``metered=False``: spans only,
    no instruments (a one-off caller); ``meter_provider``: the instruments' MeterProvider instead
    of the global one."""

    def __init__(
        self,
        depth: Callable[[], list[dict[str, Any]]] | None = None,
        metered: bool = True,
        meter_provider: Any = None,
        batched: bool = False,
    ) -> None:
        self._tracer: Any = None  # jobq's tracer of the global provider, once there is one
        self._recheck = 0.0  # monotonic time of the next look for a tracer provider
        self._consumer: Consumer | None = None  # the runs' spans, once an SDK tracer records
        self._recorder: Meters | None = None  # the instruments, once an SDK MeterProvider records
        self._looking = True  # until both are found (or all that is wanted)
        self._next_look = 0.0  # monotonic time of the next look for them
        self._depth = depth
        self.meters: Meters | None = None  # made once the application imported the metrics API
        self._metered = metered
        self._meter_provider = meter_provider
        self._batched = batched  # runs counted per batch: the owner calls settle() (a worker)
        if depth is not None and METRICS_MODULE in sys.modules:
            self._meters()  # the gauge is there before the first job (an idle worker reports it too)

    def tracer(self, api: Any) -> Any:
        """jobq's tracer of the global provider, or None while that records nothing (the API's
        proxy: no SDK set up). A provider is set once per process, so a tracer, once made, is
        kept; the proxy is looked at again at most once a second."""
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
        attrs = {
            "messaging.system": SCOPE,
            "messaging.operation": "publish",
            "messaging.destination.name": QUEUE,
            "jobq.job.type": name,
            "messaging.batch.message_count": len(types),
        }
        span = tracer.start_span(f"enqueue {name}", kind=api.SpanKind.PRODUCER, attributes=attrs)
        if (
            not span.get_span_context().is_valid
        ):  # a provider that records nothing: store the active one
            yield
            return
        with api.use_span(span, end_on_exit=True):
            yield

    def consume(self, job: Any, run: Callable[..., Any], *args: Any) -> Any:
        """``run(*args)`` (returning a new outcome with ``kind`` and maybe ``exc``: see
        :meth:`shared.telemetry.spans.Consumer.run`) inside the job's CONSUMER span when the
        application traces with an SDK; just ``run(*args)`` otherwise. The outcome comes back with
        its span's context (``span``) for the job's log line; the run is measured while an SDK
        MeterProvider records it."""
        if self._looking:
            self._look()
        consumer, recorder = self._consumer, self._recorder
        if consumer is not None and args:
            run = functools.partial(run, *args)  # (the span's run takes no arguments)
            args = ()
        if recorder is None:
            return run(*args) if consumer is None else consumer.run(job, run)
        t0 = time.perf_counter()
        outcome = run(*args) if consumer is None else consumer.run(job, run)
        recorder.record(job, outcome.kind, time.perf_counter() - t0)
        return outcome

    def _look(self) -> None:
        """Look for an SDK tracer and MeterProvider, at most once a second, until both are
        found (or the tracer alone, for an owner without instruments)."""
        now = time.monotonic()
        if now < self._next_look:
            return
        self._next_look = now + 1.0
        api = _api()
        if self._consumer is None and api is not None:
            self._recheck = 0.0  # this look is the once-a-second one
            tracer = self.tracer(api)
            if tracer is not None:
                self._consumer = Consumer(api, tracer)
        if (
            self._metered
            and self._recorder is None
            and (self.meters is not None or METRICS_MODULE in sys.modules)
        ):
            meters = self._meters()
            if meters.live():
                self._recorder = meters
        self._looking = self._consumer is None or (self._metered and self._recorder is None)

    def settle(self) -> None:
        """The owner's batch of runs ended (or it goes idle): add the runs counted since to the
        run counter (see :class:`shared.telemetry.meters.Meters`). A flag test while no SDK
        records."""
        if self._recorder is not None:
            self._recorder.settle()

    def flush(self, timeout: float = 2.0) -> None:
        """Export what the SDK providers this object recorded with still hold (a
        BatchSpanProcessor's queue, the metrics since the last export), waiting at most about
        ``timeout`` seconds for each: a worker ends with ``os._exit``, which runs no ``atexit``
        hook, so the SDK's own flush at exit never comes. Nothing while no SDK was found."""
        self.settle()
        providers = []
        if self._consumer is not None:
            providers.append(self._consumer.api.get_tracer_provider())
        if self._recorder is not None:
            providers.append(self._recorder.provider or self._recorder.metrics.get_meter_provider())
        for provider in providers:
            flush = getattr(provider, "force_flush", None)
            try:
                if flush is not None:
                    flush(int(timeout * 1000))
            except Exception:  # noqa: BLE001 - an exporter's failure must not change how the worker ends
                pass

    def _meters(self) -> "Meters":
        if self.meters is None:
            self.meters = Meters(
                sys.modules[METRICS_MODULE], self._depth, self._meter_provider, self._batched
            )
        return self.meters


def span_ids(span: Any) -> tuple[str, str]:
    """A SpanContext's (trace_id, span_id) as 32 and 16 hex digits (the log lines' fields)."""
    return f"{span.trace_id:032x}", f"{span.span_id:016x}"


def worker_tracing(config: Any, slot: int | None, meter_provider: Any = None) -> Tracing:
    """A worker's :class:`Tracing`: the worker of slot 0 also reports the queue-depth gauge (one
    worker per supervisor, so the figure is not repeated by every worker). Runs are counted per
    batch: the worker calls :meth:`Tracing.settle` as a batch ends and before it waits idle."""
    return Tracing(
        depth=depth_reader(config) if slot == 0 else None,
        meter_provider=meter_provider,
        batched=True,
    )


def observe_gauge(name: str, unit: str, description: str, read: Callable[[], float]) -> bool:
    """An OpenTelemetry observable gauge ``name`` reporting ``read()`` at each collection, where
    the application imported the metrics API (else nothing); whether it was made."""
    metrics = sys.modules.get("opentelemetry.metrics")
    if metrics is None:
        return False

    def observe(_options: Any) -> Any:
        return [metrics.Observation(read())]

    metrics.get_meter(SCOPE).create_observable_gauge(
        name, callbacks=[observe], unit=unit, description=description
    )
    return True
